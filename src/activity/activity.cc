#include "activity/activity.h"

#include "activity/activity_losses.h"
#include "activity/activity_switch.h"
#include "activity/buffer_router.h"
#include "activity/graph_kernel_filter.h"
#include "activity/housekeeping_schedule.h"
#include "activity/kernel_delivery.h"
#include "activity/memory_delivery.h"
#include "base/clock.h"
#include "base/log.h"
#include "trackers/correlation_tracker.h"

namespace parcagpu {
namespace {

RepeatedError g_housekeeping_exception("activity", "exceptions in the activity housekeeping");

constexpr uint64_t kNever = ~uint64_t{0};

}  // namespace

ActivityCollector::ActivityCollector(const CuptiApi &cupti, const Config &config,
                                     CorrelationTracker &tracker, GraphTracker &graphs,
                                     const LaunchCountSource *launches,
                                     KernelRecordObserver *kernels, WatcherWake *wake)
    : tracker_(tracker),
      launches_(launches),
      switch_(std::make_unique<ActivitySwitch>(
          cupti, config.activity_mode,
          launches ? static_cast<const LaunchCountSource *>(this) : nullptr)),
      memory_(std::make_unique<MemoryDelivery>(tracker)),
      graph_kernels_(std::make_unique<GraphKernelFilter>(cupti, tracker, graphs, *switch_)),
      kernels_(std::make_unique<KernelDelivery>(tracker, *graph_kernels_, kernels)),
      buffers_(std::make_unique<BufferRouter>(cupti, config, tracker, *kernels_, *memory_)),
      losses_(std::make_unique<ActivityLosses>(cupti, config, tracker)),
      schedule_(std::make_unique<HousekeepingSchedule>(
          uint64_t{config.flush_interval_ms} * 1000000ull, wake)) {}

ActivityCollector::~ActivityCollector() = default;

// The launch path's calls: the policy is ActivitySwitch's.
bool ActivityCollector::launch_begin() { return switch_->launch_begin(); }
void ActivityCollector::launch_end() { switch_->launch_end(); }
bool ActivityCollector::armed() const { return switch_->armed(); }
void ActivityCollector::want_kinds(KindMask kinds) { switch_->want_kinds(kinds); }
uint64_t ActivityCollector::recording_word() const { return switch_->recording_word(); }
void ActivityCollector::hold_on(bool hold) { switch_->hold(hold); }
bool ActivityCollector::hold_off(bool hold) { return switch_->hold_off(hold); }
void ActivityCollector::request_flush() { schedule_->request(); }

LaunchCounts ActivityCollector::launch_counts() const {
  LaunchCounts c = launches_->launch_counts();
  c.unannounced += tracker_.refused();  // refused at the tracker's cap: not announced either
  return c;
}

bool ActivityCollector::init() { return buffers_->init(); }

void ActivityCollector::arm(bool on) {
  // Disarming flushes what was collected; the housekeeping begins at the first arm (on_tick).
  if (!switch_->arm(on) || on) return;
  // The last kernel consumer left: this flush fires to nobody (counted where it is delivered),
  // and what the tracker still waits for will reach nobody either.
  buffers_->flush(true);
  losses_->last_consumer_left();
}

uint64_t ActivityCollector::on_tick(uint64_t now) {
  if (!switch_->armed_once()) return kNever;  // a request waits for the first arm
  if (uint64_t next = 0; !schedule_->due(now, &next)) return next;
  // Caught here so that the watcher's other clients still get their tick.
  try {
    housekeeping();
  } catch (...) {
    g_housekeeping_exception.report(kErrInternal,
                                    "unexpected exception in the activity housekeeping");
  }
  return schedule_->after_round(now, monotonic_ns());
}

void ActivityCollector::housekeeping() {
  if (armed()) buffers_->flush(false);
  switch_->end_sticky_if_quiet();
  switch_->recheck_sticky();
  switch_->retry_stuck_disable();
  tracker_.expire(coarse_ns());
  graph_kernels_->prune_retired();
  losses_->account(false);
}

void ActivityCollector::shutdown() {
  // Also when disarmed: kernels of launches announced just before the last consumer left may
  // have been recorded after that flush.
  if (switch_->armed_once()) buffers_->flush(true);
  // Disarmed here: what still waits is accounted below, at exit, not dropped as unheard.
  if (switch_->arm(false)) buffers_->flush(true);
  // A disable that failed before gets one more try, whatever the back-off says.
  switch_->force_off();
  buffers_->drain_at_exit();
  losses_->account(true);
}

ActivityStats ActivityCollector::stats() const {
  ActivityStats a;
  a.buffers = buffers_->stats();
  a.kernels = kernels_->stats();
  a.graph_kernels = graph_kernels_->stats();
  a.memory = memory_->stats();
  a.launches_unheard = losses_->launches_unheard();
  a.enables = switch_->enables();
  a.disables = switch_->disables();
  return a;
}

}  // namespace parcagpu
