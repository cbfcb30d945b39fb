// CUPTI's activity API: kernel timing records (CONCURRENT_KERNEL) and the other kinds of
// activity_kinds.h (copies and fills), collected only while a consumer listens — enabling it costs
// more per launch than the callbacks themselves — and delivered to consumers only for launches the
// tracker says were announced.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <memory>

#include "activity/activity_kinds.h"
#include "activity/buffer_router.h"
#include "activity/graph_kernel_filter.h"
#include "activity/kernel_delivery.h"
#include "activity/memory_delivery.h"
#include "base/config.h"
#include "base/consumers.h"
#include "base/cupti_api.h"
#include "base/subsystem_links.h"

namespace parcagpu {

class ActivityLosses;        // activity_losses.h
class ActivitySwitch;        // the on/off policy (activity_switch.h)
class HousekeepingSchedule;  // housekeeping_schedule.h
class CorrelationTracker;
class GraphTracker;

// Each part's totals, as the part keeps them.
struct ActivityStats {
  BufferStats buffers;             // buffers, records read, dropped, flushes
  KernelDeliveryStats kernels;     // kernel records delivered, batches, fired to nobody
  GraphKernelStats graph_kernels;  // conditional bodies unattributed, made-up ends
  MemoryStats memory;              // copies and fills
  // Announced launches still waiting for kernels when the last kernel consumer left (given up
  // there, said as an error).
  uint64_t launches_unheard = 0;
  uint64_t enables = 0;  // successful cuptiActivityEnable / Disable of CONCURRENT_KERNEL
  uint64_t disables = 0;
};

// Kernel activity as a whole, built from its parts and joined to the rest: the on/off policy
// (ActivitySwitch), the buffers and their routing (BufferRouter), kernel delivery
// (KernelDelivery, with GraphKernelFilter for graph kernels), copies and fills (MemoryDelivery),
// losses (ActivityLosses). A client of the consumer watcher for its housekeeping alone (the
// profiler arms and disarms it as consumers come and go): every flush interval
// (HousekeepingSchedule), on the watcher thread, it flushes CUPTI's buffers, ends sticky
// collection that no longer pays, retries a failed disable, gives up tracker entries past their
// age and reports losses.
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
  void housekeeping();
  // LaunchCountSource, for the switch: `launches` plus the launches the tracker refused.
  LaunchCounts launch_counts() const override;

  CorrelationTracker &tracker_;
  const LaunchCountSource *const launches_;
  // The parts, in the order they are built (each takes those before it).
  const std::unique_ptr<ActivitySwitch> switch_;
  const std::unique_ptr<MemoryDelivery> memory_;
  const std::unique_ptr<GraphKernelFilter> graph_kernels_;
  const std::unique_ptr<KernelDelivery> kernels_;
  const std::unique_ptr<BufferRouter> buffers_;
  const std::unique_ptr<ActivityLosses> losses_;
  const std::unique_ptr<HousekeepingSchedule> schedule_;
};

}  // namespace parcagpu
