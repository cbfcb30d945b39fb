#include "base/consumers.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "base/clock.h"
#include "base/log.h"
#include "base/usdt.h"

namespace parcagpu {

Consumers Consumers::read() {
  Consumers c;
#define PARCAGPU_CONSUMER_READ(name, params, args, nargs, sizes) c.name = usdt::name##_consumers();
  PARCAGPU_PROBE_LIST(PARCAGPU_CONSUMER_READ)
#undef PARCAGPU_CONSUMER_READ
  return c;
}

void Consumers::describe(char *out, size_t size) const {
  size_t used = 0;
  if (size > 0) out[0] = 0;
#define PARCAGPU_CONSUMER_DESCRIBE(name, params, args, nargs, sizes)                \
  if (used < size)                                                                  \
    used += static_cast<size_t>(snprintf(out + used, size - used, "%s" #name "=%u", \
                                         used ? " " : "", static_cast<unsigned>(name)));
  PARCAGPU_PROBE_LIST(PARCAGPU_CONSUMER_DESCRIBE)
#undef PARCAGPU_CONSUMER_DESCRIBE
}

void ConsumerWatcher::cycle() {
  const Consumers now = Consumers::read();
  if (!(now == last_)) {
    const Consumers before = last_;
    last_ = now;
    char line[512];
    now.describe(line, sizeof line);
    debug_log("consumers: %s", line);
    for (Client *c : clients_) c->on_consumers(now, before);
  }
}

bool ConsumerWatcher::start_thread() {
  try {
    owner_pid_ = getpid();
    thread_ = std::thread([this] { main_loop(); });
  } catch (...) {
    report_error(kErrInternal, "watcher",
                 "cannot start the consumer watcher thread; consumers attaching later are not "
                 "noticed");
    return false;
  }
  return true;
}

void ConsumerWatcher::stop() {
  if (getpid() != owner_pid_) return;  // a forked child: the watcher thread is the parent's
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ConsumerWatcher::wake() {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // the watcher is running a cycle (or about to)
  woken_ = true;
  cv_.notify_one();
}

void ConsumerWatcher::main_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    woken_ = false;
    lock.unlock();
    uint64_t next = monotonic_ns() + interval_ns_;
    try {
      cycle();
      const uint64_t now = monotonic_ns();
      for (Client *c : clients_) {
        const uint64_t want = c->on_tick(now);
        if (want < next) next = want;
      }
    } catch (...) {
      report_error(kErrInternal, "watcher", "unexpected exception in the consumer watcher");
    }
    lock.lock();
    const uint64_t now = monotonic_ns();
    if (next > now && !stopping_ && !woken_)
      cv_.wait_for(lock, std::chrono::nanoseconds(next - now),
                   [this] { return stopping_ || woken_; });
  }
}

}  // namespace parcagpu
