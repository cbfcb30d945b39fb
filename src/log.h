// Diagnostics: a timestamped debug log (PARCAGPU_DEBUG) and error reports, which go to stderr
// and to the `error` probe so a consumer sees what went wrong. Both are safe to call from any
// thread and never throw.
#pragma once

#include <atomic>
#include <cstdint>

namespace parcagpu {

// Error codes carried by the `error` probe's first argument. CUPTI failures carry the
// CUptiResult instead (a positive number), so ours are negative.
enum ErrorCode : int32_t {
  kErrConfig = -1,         // a PARCAGPU_* variable was unknown or invalid
  kErrLibraryMissing = -2, // libcupti could not be loaded, or lacks a symbol
  kErrInternal = -3,       // an exception or impossible state inside the library
  kErrRecordsDropped = -4,  // CUPTI dropped activity records
  kErrAnotherInstance = -5, // another copy of the library profiles the process: this one is inert
  kErrDataLost = -6,        // kernels of announced launches will not be delivered (and why)
  kErrDriver = -7,          // a libcuda call failed (the CUresult is in the message)
};

void set_debug(bool on);
bool debug_enabled();

// printf-style; prefixed with a timestamp and "parcagpu:". Only when PARCAGPU_DEBUG is on.
void debug_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Always printed ("parcagpu: component: message") and fired as the `error` probe. For errors
// that can repeat (per launch, per flush, per buffer), use RepeatedError instead.
void report_error(int32_t code, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// One place in the library where the same error can happen again and again (a CUPTI call that
// keeps failing on every launch or every flush). The first occurrence is reported like
// report_error; later ones are only counted, never a line per launch. Every site that ever
// failed more than once gets one summary line (and `error` probe) from
// report_repeated_error_totals() at shutdown, and its count is in the debug counters.
// Thread-safe and lock-free; declare instances with static storage (they register themselves
// on first use and must outlive the summary).
class RepeatedError {
 public:
  constexpr RepeatedError(const char *component, const char *what)
      : component_(component), what_(what) {}
  RepeatedError(const RepeatedError &) = delete;
  RepeatedError &operator=(const RepeatedError &) = delete;

  // Reports the first occurrence, counts every one. Returns true if this call reported.
  bool report(int32_t code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  const char *component() const { return component_; }
  const char *what() const { return what_; }

 private:
  friend void report_repeated_error_totals();
  friend void for_each_repeated_error(void (*fn)(const RepeatedError &, void *), void *arg);
  const char *component_;
  const char *what_;  // short, for the summary line: "cuptiActivityFlushAll failed"
  std::atomic<uint64_t> count_{0};
  std::atomic<int32_t> code_{0};
  RepeatedError *next_ = nullptr;  // registry of sites that failed at least once
};

// One line per site that failed more than once: "component: what: N times in all (first
// reported above)". Called at shutdown; idempotent.
void report_repeated_error_totals();
// Every site that failed at least once (debug counters, tests).
void for_each_repeated_error(void (*fn)(const RepeatedError &, void *), void *arg);

}  // namespace parcagpu
