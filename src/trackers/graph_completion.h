// Keeps kernel activity on until an announced graph launch's kernels have finished.
//
// Why. On real CUPTI a graph kernel that finishes while CONCURRENT_KERNEL activity is disabled
// still gets its record, with a true start, but its end is about the moment activity is next
// enabled (H100: a PyTorch graph replay's kernels "took" 49 ms in a 178 us step;
// docs/cupti-facts.md). Eager kernels are not affected. So for an announced graph launch the
// activity collector's launch_end() waits until the GPU is past the launch: an event is recorded
// on the launch's stream at the end of its API call, and a waiter thread polls it.
//
// Uses the driver's event calls only (CudaApi), never a host function or a synchronize on the
// application's stream; the event adds no dependency to the stream.
#pragma once

#include <cuda.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "base/cupti_api.h"

namespace parcagpu {

class GraphCompletion {
 public:
  // `done` ends one watched launch (the activity collector's launch_end); called once per
  // launch that watch() accepted, on the waiter thread or in shutdown(). `now_ns` is the clock
  // the timeout is measured on (monotonic_ns; a fake one in unit tests).
  GraphCompletion(const CudaApi *cuda, std::function<void()> done,
                  std::function<uint64_t()> now_ns);
  ~GraphCompletion();
  GraphCompletion(const GraphCompletion &) = delete;
  GraphCompletion &operator=(const GraphCompletion &) = delete;

  // At the end of an announced graph launch's API call, on the launching thread (its context is
  // current): watches the work queued on `stream` so far. False if it cannot (no libcuda, an
  // event call failed, said once): the caller ends the launch at once.
  bool watch(CUstream stream);
  // One look at every watched launch: those finished (or failed, or older than the timeout) are
  // ended. The waiter thread calls it; public for unit tests, which run no thread.
  void poll();
  // Ends every watched launch (their events given back) and stops the waiter (at exit).
  void shutdown();

  struct Stats {
    uint64_t watched = 0;
    uint64_t finished = 0;
    uint64_t timed_out = 0;  // still running kTimeoutNs after the launch: ended anyway
    uint64_t failed = 0;     // cuEventCreate / cuEventRecord / cuEventQuery failed
  };
  Stats stats() const;
  size_t pending() const;

  // A graph whose kernels run longer than this after its launch call has its activity switched
  // off before they end (their end timestamps are then wrong, said once).
  static constexpr uint64_t kTimeoutNs = 2000000000ull;  // 2 s
  static constexpr uint64_t kPollNs = 200000;            // 200 us between looks while waiting
  // Kernel activity stays on this long after the GPU is past the launch: CUPTI finishes a graph's
  // kernel records after the GPU ran them, and a record it finishes after kernel activity went
  // off gets the time of the next enable as its end. H100 (docs/cupti-facts.md): a 117-kernel
  // training-step graph, 10 s at the default rates, 7 of 176 announced launches with kernels tens
  // of ms long (53 s of GPU time summed over 10 s); with 1, 5 or 20 ms of grace none, same steps.
  // That is the grace it starts with. On an H200 running PyTorch (torch_mixed.py) 2 ms was not
  // always enough (12 of 411 announced graph launches, docs/cupti-facts.md): whenever records
  // with such a made-up end come (ActivityCollector drops them, activity_off_times.h), the
  // profiler makes the grace four times longer, up to kMaxGraceNs.
  static constexpr uint64_t kGraceNs = 2000000;      // 2 ms
  static constexpr uint64_t kMaxGraceNs = 64000000;  // 64 ms
  uint64_t grace_ns() const { return grace_ns_.load(std::memory_order_relaxed); }
  // The activity collector's count of made-up ends so far: more than at the last call lengthens
  // the grace. The watcher's tick calls it.
  void on_made_up_ends(uint64_t total);
  // Makes the grace four times longer (at most kMaxGraceNs); returns the new one. Four: a made-up
  // end is seen only when its buffer is read (every flush interval, 1 s by default), and each
  // step until the grace is long enough loses that long's announced graph launches.
  uint64_t lengthen_grace();

  // Starts the waiter thread (not in unit tests).
  void start_thread();

 private:
  struct Watched {
    CUevent event;
    uint64_t since_ns;
    uint64_t complete_ns = 0;  // when the event was first seen complete (0: not yet)
  };
  void waiter_main();

  const CudaApi *cuda_;
  const std::function<void()> done_;
  const std::function<uint64_t()> now_ns_;
  std::atomic<uint64_t> grace_ns_{kGraceNs};
  uint64_t made_up_seen_ = 0;  // on_made_up_ends' last total (the watcher thread's alone)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Watched> watched_;
  Stats stats_;
  bool stopping_ = false;
  bool thread_failed_ = false;
  std::thread waiter_;
};

}  // namespace parcagpu
