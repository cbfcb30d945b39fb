// Diagnostics: a timestamped debug log (PARCAGPU_DEBUG) and error reports, which go to stderr
// and to the `error` probe so a consumer sees what went wrong. Both are safe to call from any
// thread and never throw.
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstdint>

namespace parcagpu {

// Error codes carried by the `error` probe's first argument. CUPTI failures carry the
// CUptiResult instead (a positive number), so ours are negative.
enum ErrorCode : int32_t {
  kErrConfig = -1,           // a PARCAGPU_* variable was unknown or invalid
  kErrLibraryMissing = -2,   // libcupti could not be loaded, or lacks a symbol
  kErrInternal = -3,         // an exception or impossible state inside the library
  kErrRecordsDropped = -4,   // CUPTI dropped activity records
  kErrAnotherInstance = -5,  // another copy of the library profiles the process: this one is inert
  kErrDataLost = -6,         // kernels of announced launches will not be delivered (and why)
  kErrDriver = -7,           // a libcuda call failed (the CUresult is in the message)
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
// keeps failing on every launch or every flush, records lost on every buffer). The first
// occurrence is reported like report_error; later ones are only counted, never a line per
// launch. report_repeated_error_progress() (the activity housekeeping, once a minute) reports what
// was counted since, and report_repeated_error_totals() (at exit) one summary line per site that
// failed more than once; both go to the `error` probe too, and PARCAGPU_DEBUG lists every count at
// exit. Thread-safe and lock-free; declare instances with static storage (they register themselves
// on first use and must outlive the summary).
class RepeatedError {
 public:
  // `unit` names what count() counts, for the summary lines: "times" (occurrences), or what
  // report_n() counts ("records", "launches").
  constexpr RepeatedError(const char *component, const char *what, const char *unit = "times")
      : component_(component), what_(what), unit_(unit) {}
  RepeatedError(const RepeatedError &) = delete;
  RepeatedError &operator=(const RepeatedError &) = delete;

  // Reports the first occurrence, counts every one. Returns true if this call reported.
  bool report(int32_t code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
  // The same for n things at once (n records dropped by one buffer): counts n; n == 0 does
  // nothing.
  bool report_n(uint64_t n, int32_t code, const char *fmt, ...)
      __attribute__((format(printf, 4, 5)));
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  const char *component() const { return component_; }
  const char *what() const { return what_; }
  const char *unit() const { return unit_; }

 private:
  friend void report_repeated_error_totals();
  friend void report_repeated_error_progress();
  friend void for_each_repeated_error(void (*fn)(const RepeatedError &, void *), void *arg);
  bool vreport_n(uint64_t n, int32_t code, const char *fmt, va_list ap);
  const char *component_;
  const char *what_;  // short, for the summary line: "cuptiActivityFlushAll failed"
  const char *unit_;
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> reported_{0};  // count_ as of the last line about this site
  std::atomic<int32_t> code_{0};
  RepeatedError *next_ = nullptr;  // registry of sites that failed at least once
};

// For every site whose count grew since its last line: "component: what: N more UNIT (M in
// all)". Called periodically (the activity housekeeping on the watcher thread, at most once a
// minute).
void report_repeated_error_progress();
// One line per site that counted more than its lines told: "component: what: N UNIT in all";
// with PARCAGPU_DEBUG, every site's count. Called at exit; idempotent.
void report_repeated_error_totals();
// Every site that failed at least once (debug counters, tests).
void for_each_repeated_error(void (*fn)(const RepeatedError &, void *), void *arg);

}  // namespace parcagpu
