#include "log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "usdt.h"

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

bool RepeatedError::report(int32_t code, const char *fmt, ...) {
  if (count_.fetch_add(1, std::memory_order_relaxed) != 0) return false;
  code_.store(code, std::memory_order_relaxed);
  // First failure of this site: register it for the totals (lock-free push).
  RepeatedError *head = g_repeated.load(std::memory_order_relaxed);
  do {
    next_ = head;
  } while (!g_repeated.compare_exchange_weak(head, this, std::memory_order_release,
                                             std::memory_order_relaxed));
  va_list ap;
  va_start(ap, fmt);
  vreport(code, component_, fmt, ap);
  va_end(ap);
  return true;
}

void for_each_repeated_error(void (*fn)(const RepeatedError &, void *), void *arg) {
  for (RepeatedError *e = g_repeated.load(std::memory_order_acquire); e; e = e->next_) fn(*e, arg);
}

void report_repeated_error_totals() {
  static std::atomic<bool> done{false};
  if (done.exchange(true)) return;
  for_each_repeated_error(
      [](const RepeatedError &e, void *) {
        const uint64_t n = e.count();
        if (n > 1)
          report_error(e.code_.load(std::memory_order_relaxed), e.component(),
                       "%s: %llu times in all (only the first was reported)", e.what(),
                       static_cast<unsigned long long>(n));
      },
      nullptr);
}

}  // namespace parcagpu
