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
  char line[700];
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

void report_error(int32_t code, const char *component, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char line[600];
  snprintf(line, sizeof line, "%s: %s", component, msg);
  write_line(line);
  usdt::error(code, msg, component);
}

}  // namespace parcagpu
