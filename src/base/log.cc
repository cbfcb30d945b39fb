#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "base/usdt.h"

namespace parcagpu {
namespace {
std::atomic<bool> g_debug{false};

// One write(2) per line, so lines from several threads don't interleave.
void write_line(const char *msg) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm {};
  localtime_r(&ts.tv_sec, &tm);
  char line[1200];  // room for the longest report (every optional CUPTI entry point missing)
  int n = snprintf(line, sizeof line, "%02d:%02d:%02d.%06ld parcagpu[%d]: %s\n", tm.tm_hour,
                   tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000, static_cast<int>(getpid()), msg);
  if (n <= 0) return;
  size_t len = static_cast<size_t>(n) < sizeof line ? static_cast<size_t>(n) : sizeof line - 1;
  ssize_t ignored = write(STDERR_FILENO, line, len);
  (void)ignored;
}
}  // namespace

void set_debug(bool on) { g_debug.store(on, std::memory_order_relaxed); }
bool debug_enabled() { return g_debug.load(std::memory_order_relaxed); }

void debug_log(const char *fmt, ...) {
  if (!debug_enabled()) return;
  char msg[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  write_line(msg);
}

namespace {

void vreport(int32_t code, const char *component, const char *fmt, va_list ap) {
  char msg[1024];
  vsnprintf(msg, sizeof msg, fmt, ap);
  char line[1100];
  snprintf(line, sizeof line, "%s: %s", component, msg);
  write_line(line);
  usdt::error(code, msg, component);
}

std::atomic<RepeatedError *> g_repeated{nullptr};  // sites that failed at least once

}  // namespace

void report_error(int32_t code, const char *component, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vreport(code, component, fmt, ap);
  va_end(ap);
}

bool RepeatedError::vreport_n(uint64_t n, int32_t code, const char *fmt, va_list ap) {
  if (n == 0) return false;
  if (count_.fetch_add(n, std::memory_order_relaxed) != 0) return false;
  reported_.store(n, std::memory_order_relaxed);
  code_.store(code, std::memory_order_relaxed);
  // First failure of this site: register it for the totals (lock-free push).
  RepeatedError *head = g_repeated.load(std::memory_order_relaxed);
  do {
    next_ = head;
  } while (!g_repeated.compare_exchange_weak(head, this, std::memory_order_release,
                                             std::memory_order_relaxed));
  vreport(code, component_, fmt, ap);
  return true;
}

bool RepeatedError::report(int32_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const bool reported = vreport_n(1, code, fmt, ap);
  va_end(ap);
  return reported;
}

bool RepeatedError::report_n(uint64_t n, int32_t code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const bool reported = vreport_n(n, code, fmt, ap);
  va_end(ap);
  return reported;
}

void for_each_repeated_error(void (*fn)(const RepeatedError &, void *), void *arg) {
  for (RepeatedError *e = g_repeated.load(std::memory_order_acquire); e; e = e->next_) fn(*e, arg);
}

void report_repeated_error_progress() {
  for (RepeatedError *e = g_repeated.load(std::memory_order_acquire); e; e = e->next_) {
    const uint64_t n = e->count();
    const uint64_t before = e->reported_.exchange(n, std::memory_order_relaxed);
    if (n > before)
      report_error(e->code_.load(std::memory_order_relaxed), e->component(),
                   "%s: %llu more %s (%llu in all)", e->what(),
                   static_cast<unsigned long long>(n - before), e->unit(),
                   static_cast<unsigned long long>(n));
  }
}

void report_repeated_error_totals() {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return;
  for_each_repeated_error(
      [](const RepeatedError &e, void *) {
        const uint64_t n = e.count();
        const uint64_t reported = e.reported_.load(std::memory_order_relaxed);
        if (n > reported)
          report_error(e.code_.load(std::memory_order_relaxed), e.component(), "%s: %llu %s in all",
                       e.what(), static_cast<unsigned long long>(n), e.unit());
        else
          debug_log("%s: %s: %llu %s in all", e.component(), e.what(),
                    static_cast<unsigned long long>(n), e.unit());
      },
      nullptr);
}

}  // namespace parcagpu
