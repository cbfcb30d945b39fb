// What the subsystems ask of each other, as narrow interfaces. Each subsystem receives the ones it
// calls in its constructor; the profiler (profiler.h), which builds and owns them all, implements
// every one by forwarding to the subsystem that does the work. It stands between them because
// kernel activity and PC sampling call each other (activity tells PC sampling which kernels are
// new; PC sampling holds activity on and asks for flushes), so neither can be built first with
// the other in hand. A base header: it includes nothing of the library.
#pragma once

#include <cstdint>

namespace parcagpu {

// Launches announced and not (rate-limited, or refused by the correlation tracker) so far:
// activity stays on for every kernel (sticky) only while announced launches are at least half
// of all (see ActivitySwitch::launch_begin).
struct LaunchCounts {
  uint64_t announced = 0;
  uint64_t unannounced = 0;
};

// The launch callbacks' statistics, for kernel activity's sticky policy.
class LaunchCountSource {
 public:
  virtual LaunchCounts launch_counts() const = 0;

 protected:
  ~LaunchCountSource() = default;
};

// What PC sampling asks of kernel activity (ActivityCollector).
class KernelActivityControl {
 public:
  // True before PC sampling is first enabled, false once it is disabled everywhere: while PC
  // sampling is enabled CUPTI refuses to enable kernel activity, so it is held on meanwhile.
  virtual void hold_on(bool on) = 0;
  // True while a graph's kernels are registered with PC sampling (PcEpisodes::register_graph),
  // false after: an upload with kernel activity on registers nothing (docs/pc-sampling.md
  // P33), so it is held off meanwhile. Returns whether it is off.
  virtual bool hold_off(bool on) = 0;
  // The activity buffers read soon, on the watcher thread (never waits).
  virtual void request_flush() = 0;

 protected:
  ~KernelActivityControl() = default;
};

// What kernel activity tells PC sampling (PcSampler): the function name of every kernel record
// read, on CUPTI's buffer thread or a flushing one. PC sampling learns from it which kernels are
// new.
class KernelRecordObserver {
 public:
  virtual void on_kernel_record(const char *function_name) = 0;

 protected:
  ~KernelRecordObserver() = default;
};

// A tick of the consumer watcher now, not at its next interval (never waits).
class WatcherWake {
 public:
  virtual void wake() = 0;

 protected:
  ~WatcherWake() = default;
};

}  // namespace parcagpu
