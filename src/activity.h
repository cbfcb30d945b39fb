// CUPTI's activity API: kernel timing records (CONCURRENT_KERNEL), collected only while a
// consumer listens — enabling it costs more per launch than the callbacks themselves — and
// delivered to consumers only for launches the tracker says were announced.
#pragma once

#include <cupti.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "config.h"
#include "clock.h"
#include "correlation_tracker.h"
#include "cupti_api.h"
#include "graph_tracker.h"

namespace parcagpu {

struct ActivityStats {
  uint64_t buffers_completed = 0;
  uint64_t buffers_refused = 0;    // requested at the memory cap: CUPTI drops those records
  uint64_t kernel_records = 0;     // kernel records seen
  uint64_t kernels_delivered = 0;  // ... of announced launches, fired to consumers
  uint64_t batches_fired = 0;
  uint64_t records_dropped = 0;    // reported by cuptiActivityGetNumDroppedRecords
  uint64_t buffers_cut_short = 0;  // cuptiActivityGetNextRecord failed: the rest was lost
  uint64_t conditional_unattributed = 0;  // correlation-0 records of no known exec
  uint64_t flushes = 0;
  uint64_t enables = 0;
  uint64_t disables = 0;
};

// Fixed-size activity buffers with a cap on how many exist at once, reused through a free list.
class BufferPool {
 public:
  BufferPool(size_t buffer_bytes, uint32_t max_buffers)
      : bytes_(buffer_bytes), max_(max_buffers) {}
  ~BufferPool();
  uint8_t *acquire();  // nullptr at the cap
  void release(uint8_t *buf);
  size_t buffer_bytes() const { return bytes_; }

 private:
  const size_t bytes_;
  const uint32_t max_;
  std::mutex mu_;
  std::vector<uint8_t *> free_;
  uint32_t alive_ = 0;
};

class ActivityCollector {
 public:
  ActivityCollector(const CuptiApi &cupti, const Config &config, CorrelationTracker &tracker,
                    GraphTracker &graphs);

  // Registers the buffer callbacks. Activity stays disabled.
  bool init();
  // Arms kernel collection (a consumer wants kernels) or disarms it; disarming flushes what was
  // collected. In WhileConsumer mode CUPTI activity is on exactly while armed. Called by the
  // consumer watcher, never on the launch path.
  void set_enabled(bool on);
  // AroundLaunch mode: CUPTI activity is on only while an announced launch is in its API call,
  // so unannounced launches don't pay for activity collection. No-ops in the other mode. Called
  // by the launch path, at the ENTER and EXIT of each announced launch.
  // launch_begin says whether it counted the launch in (false: not armed, or the other mode);
  // launch_end is for counted launches only.
  bool launch_begin();
  void launch_end();
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  // PC sampling is about to be enabled (true) or is disabled everywhere again (false). While PC
  // sampling is enabled CUPTI refuses to enable kernel activity (CUPTI_ERROR_NOT_COMPATIBLE on
  // an H100, docs/cupti-facts.md), but kernel activity enabled before stays on: so it is
  // switched on here, before, and left on until PC sampling is off again. Called by the PC
  // sampler, on an application thread at a launch.
  void hold_on(bool hold);
  // Asks the flusher thread to flush soon (from the launch path: never flush there).
  void request_flush();
  // Flushes everything, forced, on the calling thread; stops the flusher and disables activity.
  void shutdown();
  ActivityStats stats() const;

  // Launches announced and not (rate-limited) so far: activity stays on for every kernel
  // (sticky) only while announced launches are at least half of all (see launch_begin).
  struct LaunchCounts {
    uint64_t announced = 0;
    uint64_t unannounced = 0;
  };
  // From the launch callbacks' statistics; set by the profiler, which owns both.
  void set_launch_counts(std::function<LaunchCounts()> fn) { launch_counts_ = std::move(fn); }
  // Told the function name of every kernel record read (CUPTI's buffer thread or a flushing one);
  // set before activity is first enabled. PC sampling learns from it which kernels are new.
  void set_kernel_observer(std::function<void(const char *)> fn) { kernel_observer_ = std::move(fn); }

 private:
  static void CUPTIAPI on_buffer_requested(uint8_t **buffer, size_t *size,
                                           size_t *max_num_records);
  static void CUPTIAPI on_buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                           size_t size, size_t valid_size);
  void process_buffer(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t valid_size);
  void flusher_main();
  void flush(bool forced);

  const CuptiApi &cupti_;
  const Config &config_;
  CorrelationTracker &tracker_;
  GraphTracker &graphs_;
  BufferPool pool_;
  std::atomic<bool> enabled_{false};
  std::atomic<bool> armed_once_{false};
  void end_sticky_if_quiet();
  bool cupti_enable_locked();
  bool wanted_on_locked() const;
  // `force`: try even within the back-off after a failed disable (at exit).
  void cupti_disable_locked(bool force = false);
  // Error paths and loss accounting (flusher thread and shutdown).
  void retry_stuck_disable();
  bool sticky_pays_locked(uint64_t now);
  void recheck_sticky();
  void account_losses(bool at_exit);

  std::mutex toggle_mu_;
  bool cupti_on_ = false;          // CUPTI's CONCURRENT_KERNEL activity is enabled
  bool held_ = false;              // hold_on: kept on while PC sampling is enabled
  uint32_t active_launches_ = 0;   // AroundLaunch: announced launches inside their API call
  bool sticky_ = false;            // AroundLaunch at a high announced rate: left on
  uint64_t last_begin_ns_ = 0;
  uint64_t last_enable_ns_ = 0;
  uint64_t enable_interval_avg_ns_ = 10000000;  // moving average of the gaps between enables
  uint64_t retry_after_ns_ = 0;    // after a failed enable, don't hammer CUPTI
  uint64_t disable_retry_after_ns_ = 0;  // ... nor after a failed disable (activity stays on)
  // Sticky collection records every kernel: worth it only while most launches are announced.
  std::function<LaunchCounts()> launch_counts_;
  std::function<void(const char *)> kernel_observer_;
  LaunchCounts counts_seen_{};     // launch_counts_() at the last look
  uint64_t sticky_banned_until_ns_ = 0;
  // account_losses(): tracker counts already reported (flusher thread, then shutdown).
  uint64_t refused_seen_ = 0;
  uint64_t expired_seen_ = 0;
  uint64_t next_progress_ns_ = 0;

  std::atomic<uint32_t> buffers_in_flight_{0};  // bufferCompleted calls running now

  std::mutex flusher_mu_;
  std::condition_variable flusher_cv_;
  std::thread flusher_;
  bool flush_requested_ = false;
  bool stopping_ = false;

  mutable std::mutex stats_mu_;
  ActivityStats stats_;
};

}  // namespace parcagpu
