// Diagnostics: a timestamped debug log (PARCAGPU_DEBUG) and error reports, which go to stderr
// and to the `error` probe so a consumer sees what went wrong. Both are safe to call from any
// thread and never throw.
#pragma once

#include <cstdint>

namespace parcagpu {

// Error codes carried by the `error` probe's first argument. CUPTI failures carry the
// CUptiResult instead (a positive number), so ours are negative.
enum ErrorCode : int32_t {
  kErrConfig = -1,         // a PARCAGPU_* variable was unknown or invalid
  kErrLibraryMissing = -2, // libcupti could not be loaded, or lacks a symbol
  kErrInternal = -3,       // an exception or impossible state inside the library
  kErrRecordsDropped = -4  // CUPTI dropped activity records
};

void set_debug(bool on);
bool debug_enabled();

// printf-style; prefixed with a timestamp and "parcagpu:". Only when PARCAGPU_DEBUG is on.
void debug_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Always printed ("parcagpu: component: message") and fired as the `error` probe.
void report_error(int32_t code, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

}  // namespace parcagpu
