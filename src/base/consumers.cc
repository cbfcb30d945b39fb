#include "base/consumers.h"

#include <unistd.h>

#include <chrono>

#include "base/clock.h"
#include "base/log.h"
#include "base/usdt.h"

namespace parcagpu {

Consumers Consumers::read() {
  Consumers c;
  c.correlation = usdt::correlation_consumers();
  c.kernel_executed = usdt::kernel_executed_consumers();
  c.activity_batch = usdt::activity_batch_consumers();
  c.gpu_config = usdt::gpu_config_consumers();
  c.graph_node_clone = usdt::graph_node_clone_consumers();
  c.pc_sample_batch = usdt::pc_sample_batch_consumers();
  c.stall_reason_map = usdt::stall_reason_map_consumers();
  c.cubin_loaded = usdt::cubin_loaded_consumers();
  return c;
}

void ConsumerWatcher::cycle() {
  const Consumers now = Consumers::read();
  if (!(now == last_)) {
    const Consumers before = last_;
    last_ = now;
    debug_log(
        "consumers: correlation=%u kernel_executed=%u activity_batch=%u gpu_config=%u "
        "graph_node_clone=%u pc_sample_batch=%u",
        now.correlation, now.kernel_executed, now.activity_batch, now.gpu_config,
        now.graph_node_clone, now.pc_sample_batch);
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
