// Who is listening, and the one thread that notices when that changes.
//
// The kernel raises a probe's semaphore when an eBPF consumer attaches to it and lowers it on
// detach; nothing tells the process. With lazy subscription the launch path is not even called
// while nobody listens, so it cannot be what notices an attach: a watcher thread polls the
// semaphores (a few loads from our own memory) every PARCAGPU_WATCH_INTERVAL_MS and tells the
// subsystems that must follow the consumers (launch subscription, kernel activity, metadata
// re-firing, PC sampling). The same thread runs their periodic work (setting the launch coin's
// mean, re-firing stored metadata in bounded chunks), never the application's threads.
//
// Why 100 ms by default: an idle poll costs one wake-up (a few microseconds of CPU) per interval,
// 10 a second, nothing measurable; the production agent attaches once and stays attached for
// hours, so at most 0.1 s of launches unsampled after an attach is immaterial. A consumer that is
// attached before the process starts is seen at once (the semaphores are already raised when the
// library starts). Tests or short-lived jobs that attach late may lower it (1 ms .. 10 s).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "parcagpu/probe_list.h"

namespace parcagpu {

// A consumer's semaphore rises before its program is in place: the kernel raises the semaphore
// when it installs the uprobe (perf_event_open), and libbpf attaches the BPF program to that
// event in a later system call, so a probe fired in between reaches nobody. What is fired again
// for a consumer that attached waits this long after the rise (seen: a consumer attached by pid
// on a busy 2-core machine got PC records but never the stall reason map fired at the rise).
constexpr uint64_t kAttachSettleNs = 1'000'000'000;

// Every probe's semaphore, read as one snapshot: a field per probe of the probe list
// (include/parcagpu/probe_list.h), named after it.
struct Consumers {
#define PARCAGPU_CONSUMER_FIELD(name, params, args, nargs, sizes) uint16_t name = 0;
  PARCAGPU_PROBE_LIST(PARCAGPU_CONSUMER_FIELD)
#undef PARCAGPU_CONSUMER_FIELD

  static Consumers read();
  constexpr bool wants_launches() const { return cuda_correlation != 0; }
  constexpr bool wants_kernels() const { return kernel_executed != 0 || activity_batch != 0; }
  constexpr bool wants_memory() const { return memory_batch != 0; }
  constexpr bool wants_nvtx() const { return nvtx_event_batch != 0 || nvtx_resource_name != 0; }
  bool operator==(const Consumers &) const = default;
  // "name=count ..." of every probe, for the debug log.
  void describe(char *out, size_t size) const;
};

class ConsumerWatcher {
 public:
  // A subsystem that follows the consumers. Both calls run on the watcher thread (the first
  // on_consumers also on the thread calling start()), never concurrently with each other.
  class Client {
   public:
    virtual ~Client() = default;
    // The snapshot changed (or, at start, differs from "nobody").
    virtual void on_consumers(const Consumers &now, const Consumers &before) = 0;
    // Periodic work. Returns when it next wants to run (monotonic ns); the watcher sleeps until
    // the earliest such time, or one interval, whichever comes first.
    virtual uint64_t on_tick(uint64_t now_ns) { return now_ns + (1ull << 62); }
  };

  explicit ConsumerWatcher(uint32_t interval_ms) : interval_ns_(uint64_t(interval_ms) * 1000000) {}
  ~ConsumerWatcher() { stop(); }

  // Clients are told in the order they were added: add what must be ready first (kernel
  // activity before the launch subscription that produces launches needing it).
  void add(Client *client) { clients_.push_back(client); }
  // Reads the semaphores and tells the clients on the calling thread: a consumer attached before
  // the process started is served before the first launch.
  void poll_now() { cycle(); }
  // Starts the watcher thread. False if it could not be started (already reported): consumers
  // are then only noticed at start.
  bool start_thread();
  // Stops the thread; the clients are not told anything more. In a child forked after the start
  // the thread does not exist (only the forking thread survives a fork): nothing to join there.
  void stop();
  // Runs a cycle now rather than at the next scheduled time (cheap; never blocks).
  void wake();
  const Consumers &last() const { return last_; }

 private:
  void cycle();
  void main_loop();

  const uint64_t interval_ns_;
  std::vector<Client *> clients_;
  Consumers last_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool woken_ = false;
  std::thread thread_;
  int owner_pid_ = 0;  // the process the thread runs in
};

}  // namespace parcagpu
