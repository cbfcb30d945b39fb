// CUPTI's activity API: kernel timing records (CONCURRENT_KERNEL) and the other kinds of
// activity_kinds.h (copies and fills), collected only while a consumer listens — enabling it costs
// more per launch than the callbacks themselves — and delivered to consumers only for launches the
// tracker says were announced.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "activity/activity_kinds.h"
#include "base/config.h"
#include "base/consumer_names.h"
#include "base/consumers.h"
#include "base/cupti_api.h"
#include "base/subsystem_links.h"

namespace parcagpu {

class ActivitySwitch;  // the on/off policy (activity_switch.h)
class BufferPool;      // activity_buffers.h
class MemoryDelivery;  // memory_delivery.h
struct KernelRecord;   // activity_buffers.h
class CorrelationTracker;
class GraphTracker;

struct ActivityStats {
  uint64_t buffers_completed = 0;
  uint64_t buffers_refused = 0;    // requested at the memory cap: CUPTI drops those records
  uint64_t kernel_records = 0;     // kernel records seen
  uint64_t kernels_delivered = 0;  // ... of announced launches, fired to consumers
  uint64_t batches_fired = 0;
  uint64_t records_dropped = 0;           // reported by cuptiActivityGetNumDroppedRecords
  uint64_t buffers_cut_short = 0;         // cuptiActivityGetNextRecord failed: the rest was lost
  uint64_t conditional_unattributed = 0;  // correlation-0 records of no known exec: lost
  // ... of no exec known here because none of its launches was announced: not a loss.
  uint64_t conditional_unannounced = 0;
  // Losses at a consumer's detach (said as errors): kernels of announced launches fired while no
  // kernel consumer (activity_batch, kernel_executed) was attached any more, and announced
  // launches still waiting for kernels when the last one left (given up there).
  uint64_t kernels_unheard = 0;
  uint64_t launches_unheard = 0;
  // Graph kernel records of announced launches whose end CUPTI wrote after kernel activity went
  // off (activity_off_times.h): a made-up end, not delivered.
  uint64_t graph_ends_made_up = 0;
  // Copies and fills (memory_delivery.h): records read, delivered, batches, fired to nobody.
  uint64_t memory_records = 0;
  uint64_t memory_delivered = 0;
  uint64_t memory_batches = 0;
  uint64_t memory_unheard = 0;
  uint64_t memory_blocked = 0;  // ... with a CPU blocked time (synchronous ones)
  uint64_t flushes = 0;
  uint64_t enables = 0;
  uint64_t disables = 0;
};

// A client of the consumer watcher for its housekeeping alone (the profiler arms and disarms it
// as consumers come and go): every flush interval, on the watcher thread, it flushes CUPTI's
// buffers, ends sticky collection that no longer pays, retries a failed disable, gives up tracker
// entries past their age and reports losses.
class ActivityCollector : public ConsumerWatcher::Client,
                          public KernelActivityControl,
                          private LaunchCountSource {
 public:
  // `launches`: launches announced and not so far, for the sticky policy (ActivitySwitch; launches
  // the correlation tracker refused count as unannounced too). `kernels`: told the function name
  // of every kernel record read, before its delivery. `wake`: how request_flush wakes the
  // watcher. Any may be null (no sticky refusal, nobody told, no early flush).
  ActivityCollector(const CuptiApi &cupti, const Config &config, CorrelationTracker &tracker,
                    GraphTracker &graphs, const LaunchCountSource *launches,
                    KernelRecordObserver *kernels, WatcherWake *wake);
  ~ActivityCollector() override;

  // Registers the buffer callbacks. Activity stays disabled.
  bool init();
  // Arms kernel collection (a consumer wants kernels) or disarms it; disarming flushes what was
  // collected. In WhileConsumer mode CUPTI activity is on exactly while armed. Called by the
  // consumer watcher, never on the launch path.
  void arm(bool on);
  // AroundLaunch mode: CUPTI activity is on only while an announced launch is in its API call,
  // so unannounced launches don't pay for activity collection. No-ops in the other mode. Called
  // by the launch path, at the ENTER and EXIT of each announced launch.
  // launch_begin says whether it counted the launch in (false: not armed, or the other mode);
  // launch_end is for counted launches only.
  bool launch_begin();
  void launch_end();
  bool armed() const;  // a consumer wants kernels (arm(true) last)
  // The activity kinds the consumers want (activity_kinds.h: copies and fills besides kernels).
  // Called by the consumer watcher, before arm.
  void want_kinds(KindMask kinds);
  // ActivitySwitch::recording_word: whether kernels launched now are recorded (launch path).
  uint64_t recording_word() const;
  // KernelActivityControl. PC sampling is about to be enabled (true) or is disabled everywhere
  // again (false): kernel activity is held on meanwhile (ActivitySwitch::hold). Called by the PC
  // sampler, on an application thread at a launch.
  void hold_on(bool hold) override;
  bool hold_off(bool hold) override;
  // Asks for a flush soon, on the watcher thread (from the launch path: never flush there, never
  // wait for it).
  void request_flush() override;
  // ConsumerWatcher::Client. The housekeeping, once kernels were first armed, every
  // flush_interval_ms or at once after request_flush. Consumer changes reach arm() through
  // the profiler, not on_consumers.
  void on_consumers(const Consumers &, const Consumers &) override {}
  uint64_t on_tick(uint64_t now_ns) override;
  // Flushes everything, forced, on the calling thread, and disables activity. The watcher thread
  // must be stopped before (no housekeeping runs meanwhile).
  void shutdown();
  ActivityStats stats() const;

 private:
  void keep_timestamps_in_host_memory();
  static void CUPTIAPI on_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_num_records);
  static void CUPTIAPI on_buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                           size_t size, size_t valid_size);
  void process_buffer(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t valid_size);
  static void fire_activity_batch(const void **records, uint32_t n);
  // A conditional body's kernel (correlation ID 0): the announced launch that owns its graph, or
  // 0 (counted in *unattributed when no exec is known for the graph and an announced launch may
  // have owned it, in *unannounced when none can have).
  uint32_t conditional_body_owner(const KernelRecord &k, uint64_t *unattributed,
                                  uint64_t *unannounced);
  bool deliverable(KernelRecord &k, uint64_t now, uint64_t *unattributed, uint64_t *unannounced);
  // A buffer's walk said: cut short, dropped records, kernels fired to nobody.
  struct BufferTally;
  void account_buffer(const BufferTally &t, CUcontext ctx, uint32_t stream_id, size_t valid_size);
  // The records CUPTI dropped for this buffer's context and stream (said once when not 0).
  size_t dropped_records(CUcontext ctx, uint32_t stream_id);
  void housekeeping();
  void flush(bool forced);
  // Loss accounting (watcher thread, then shutdown).
  void account_losses(bool at_exit);
  // LaunchCountSource, for the switch: `launches` plus the launches the tracker refused.
  LaunchCounts launch_counts() const override;

  const CuptiApi &cupti_;
  const Config &config_;
  CorrelationTracker &tracker_;
  GraphTracker &graphs_;
  const LaunchCountSource *const launches_;
  KernelRecordObserver *const kernels_;
  WatcherWake *const wake_;
  const std::unique_ptr<BufferPool> pool_;
  const std::unique_ptr<ActivitySwitch> switch_;
  const std::unique_ptr<MemoryDelivery> memory_;
  // Kernel names longer than the consumer keeps, as their stand-ins (consumer_names.h): the
  // record's name is pointed at one before it is fired (the buffer is ours).
  FunctionNames kernel_names_{PARCAGPU_KERNEL_NAME_MAX, PARCAGPU_KERNEL_NAME_MAX + 1};
  // account_losses(): tracker counts already reported (watcher thread, then shutdown).
  uint64_t refused_seen_ = 0;
  uint64_t expired_seen_ = 0;
  uint64_t next_progress_ns_ = 0;

  std::atomic<uint32_t> buffers_in_flight_{0};
  bool shutting_down_ = false;  // shutdown(): what still waits is accounted there, not dropped  //
                                // bufferCompleted calls running now

  std::atomic<bool> flush_requested_{false};
  uint64_t next_housekeeping_ns_ = 0;  // the watcher thread's; 0: not armed yet

  mutable std::mutex stats_mu_;
  ActivityStats stats_;
};

}  // namespace parcagpu
