#include "activity/activity.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include "activity/activity_buffers.h"
#include "activity/activity_switch.h"
#include "activity/memory_delivery.h"
#include "base/log.h"
#include "base/process_guard.h"
#include "base/usdt.h"
#include "parcagpu/abi.h"
#include "trackers/correlation_tracker.h"
#include "trackers/graph_tracker.h"

namespace parcagpu {
namespace {

ActivityCollector *g_collector = nullptr;  // CUPTI's buffer callbacks carry no user data

// Every error here can repeat (per launch, per flush, per buffer): once, then counted.
RepeatedError g_flush_failed("activity", "cuptiActivityFlushAll failed");
RepeatedError g_refused("activity", "launches not announced: the correlation tracker was full",
                        "launches");
RepeatedError g_expired("activity", "announced launches given up without their kernels",
                        "launches");
RepeatedError g_launches_unheard("activity",
                                 "announced launches still waiting for kernels when the last "
                                 "kernel consumer left",
                                 "launches");
RepeatedError g_buffer_exception("activity", "exceptions while reading a buffer");
RepeatedError g_housekeeping_exception("activity", "exceptions in the activity housekeeping");

constexpr uint64_t kSecondNs = 1000000000ull;
constexpr uint64_t kProgressIntervalNs = 60 * kSecondNs;  // repeated errors: a line a minute
constexpr uint64_t kNever = ~uint64_t{0};
// At exit, announced launches still awaiting their first kernel are waited for this long at most
// (their buffer in CUPTI's worker's hands, kernels still running), flushing again this often.
constexpr uint64_t kExitWaitNs = kSecondNs;
constexpr uint64_t kExitReflushNs = 50'000'000ull;

}  // namespace

ActivityCollector::ActivityCollector(const CuptiApi &cupti, const Config &config,
                                     CorrelationTracker &tracker, GraphTracker &graphs,
                                     const LaunchCountSource *launches,
                                     KernelRecordObserver *kernels, WatcherWake *wake)
    : cupti_(cupti),
      config_(config),
      tracker_(tracker),
      graphs_(graphs),
      launches_(launches),
      kernels_(kernels),
      wake_(wake),
      pool_(std::make_unique<BufferPool>(static_cast<size_t>(config.buffer_kib) * 1024,
                                         config.max_buffers)),
      switch_(std::make_unique<ActivitySwitch>(
          cupti, config.activity_mode,
          launches ? static_cast<const LaunchCountSource *>(this) : nullptr)),
      memory_(std::make_unique<MemoryDelivery>(tracker)) {}

ActivityCollector::~ActivityCollector() = default;

// The launch path's calls: the policy is ActivitySwitch's.
bool ActivityCollector::launch_begin() { return switch_->launch_begin(); }
void ActivityCollector::launch_end() { switch_->launch_end(); }
bool ActivityCollector::armed() const { return switch_->armed(); }
void ActivityCollector::want_kinds(KindMask kinds) { switch_->want_kinds(kinds); }
uint64_t ActivityCollector::recording_word() const { return switch_->recording_word(); }
void ActivityCollector::hold_on(bool hold) { switch_->hold(hold); }
bool ActivityCollector::hold_off(bool hold) { return switch_->hold_off(hold); }

LaunchCounts ActivityCollector::launch_counts() const {
  LaunchCounts c = launches_->launch_counts();
  c.unannounced += tracker_.refused();  // refused at the tracker's cap: not announced either
  return c;
}

bool ActivityCollector::init() {
  g_collector = this;
  if (config_.activity_host_memory) keep_timestamps_in_host_memory();
  CUptiResult r = cupti_.cuptiActivityRegisterCallbacks(&on_buffer_requested, &on_buffer_completed);
  if (r != CUPTI_SUCCESS) {
    report_error(r, "activity",
                 "cuptiActivityRegisterCallbacks failed: %s; kernel timing will not be collected",
                 cupti_result_string(cupti_, r));
    return false;
  }
  return true;
}

// Before any context exists (injection runs inside cuInit): CUPTI otherwise reserves device
// buffers for the GPU's kernel timestamps on every context it creates, GPU memory the
// application would miss. Where host memory is refused (CUPTI_ERROR_NOT_SUPPORTED on
// confidential-computing devices) or the call is missing, CUPTI's default stays: said in the
// debug log, nothing lost.
void ActivityCollector::keep_timestamps_in_host_memory() {
  uint8_t host_pinned = 1;
  size_t size = sizeof host_pinned;
  const CUptiResult r = cupti_.cuptiActivitySetAttribute(
      CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, &size, &host_pinned);
  debug_log("kernel timestamps kept in %s",
            r == CUPTI_SUCCESS ? "page-locked host memory" : "CUPTI's device buffers");
  if (r != CUPTI_SUCCESS)
    debug_log("cuptiActivitySetAttribute(MEM_ALLOCATION_TYPE_HOST_PINNED): %s",
              cupti_result_string(cupti_, r));
}

void ActivityCollector::arm(bool on) {
  // Disarming flushes what was collected; the housekeeping begins at the first arm (on_tick).
  if (!switch_->arm(on) || on) return;
  flush(true);
  if (shutting_down_) return;
  // The last kernel consumer left (its semaphores are down already: the flush above fired to
  // nobody, counted in process_buffer). What the tracker still waits for will reach nobody
  // either: a loss, said here, and forgotten (a later consumer must not get these kernels).
  const uint64_t n = tracker_.drop_all();
  if (n == 0) return;
  {
    std::lock_guard<std::mutex> s(stats_mu_);
    stats_.launches_unheard += n;
  }
  g_launches_unheard.report_n(n, kErrDataLost,
                              "%llu announced launches were still waiting for their kernel "
                              "records when the last kernel consumer (activity_batch, "
                              "kernel_executed) detached: their kernels reach no consumer (a "
                              "consumer should detach cuda_correlation first and drain)",
                              static_cast<unsigned long long>(n));
}

void ActivityCollector::request_flush() {
  // Once until the watcher takes it (each launch past the threshold asks); wake never waits.
  if (flush_requested_.exchange(true, std::memory_order_relaxed)) return;
  if (wake_) wake_->wake();
}

void ActivityCollector::flush(bool forced) {
  CUptiResult r = cupti_.cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
  if (r != CUPTI_SUCCESS)
    g_flush_failed.report(r,
                          "cuptiActivityFlushAll failed: %s; kernels arrive only as CUPTI "
                          "completes full buffers",
                          cupti_result_string(cupti_, r));
  std::lock_guard<std::mutex> s(stats_mu_);
  ++stats_.flushes;
}

uint64_t ActivityCollector::on_tick(uint64_t now) {
  if (!switch_->armed_once()) return kNever;  // a request waits for the first arm
  const uint64_t interval = uint64_t{config_.flush_interval_ms} * 1000000ull;
  const bool requested = flush_requested_.exchange(false, std::memory_order_relaxed);
  if (next_housekeeping_ns_ == 0 && !requested) {
    // Just armed: the first round comes one interval later.
    next_housekeeping_ns_ = now + interval;
    return next_housekeeping_ns_;
  }
  if (!requested && now < next_housekeeping_ns_) return next_housekeeping_ns_;
  // Caught here so that the watcher's other clients still get their tick.
  try {
    housekeeping();
  } catch (...) {
    g_housekeeping_exception.report(kErrInternal,
                                    "unexpected exception in the activity housekeeping");
  }
  next_housekeeping_ns_ = monotonic_ns() + interval;
  // Asked again meanwhile: another round at once.
  return flush_requested_.load(std::memory_order_relaxed) ? now : next_housekeeping_ns_;
}

void ActivityCollector::housekeeping() {
  if (armed()) flush(false);
  switch_->end_sticky_if_quiet();
  switch_->recheck_sticky();
  switch_->retry_stuck_disable();
  tracker_.expire(coarse_ns());
  graphs_.prune_retired([this](uint32_t c) { return tracker_.contains(c); });
  account_losses(false);
}

void ActivityCollector::shutdown() {
  shutting_down_ = true;
  // Also when disarmed: kernels of launches announced just before the last consumer left may
  // have been recorded after that flush.
  if (switch_->armed_once()) flush(true);
  arm(false);
  // A disable that failed before gets one more try, whatever the back-off says.
  switch_->force_off();
  // The flush delivered on this thread what was complete, but CUPTI's own thread may have taken
  // a buffer before it: being read (counted in flight), or taken off CUPTI's queue and not yet
  // handed to us, which nothing tells (a worker preempted between the two on a loaded machine:
  // in CI, kernels delivered after the exit said them lost). So while announced launches still
  // await their first kernel, this waits for them, flushing again now and then (kernels still
  // running at exit), at most kExitWaitNs: only an exit that would otherwise say a loss waits.
  const uint64_t give_up = monotonic_ns() + kExitWaitNs;
  uint64_t next_flush = monotonic_ns() + kExitReflushNs;
  while (monotonic_ns() < give_up &&
         (buffers_in_flight_.load(std::memory_order_acquire) != 0 || tracker_.pending() > 0)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (monotonic_ns() >= next_flush && buffers_in_flight_.load(std::memory_order_acquire) == 0) {
      flush(true);
      next_flush = monotonic_ns() + kExitReflushNs;
    }
  }
  account_losses(true);
}

// A loss count that grew since it was last said (`seen`): the growth is said as lost data, fmt
// taking the growth and the setting that bounds it.
[[gnu::format(printf, 4, 0)]] static void say_growth(RepeatedError &error, uint64_t total,
                                                     uint64_t &seen, const char *fmt,
                                                     uint32_t setting) {
  if (total > seen)
    error.report_n(total - seen, kErrDataLost, fmt, static_cast<unsigned long long>(total - seen),
                   setting);
  seen = total;
}

// Every kernel of an announced launch that will not reach consumers is counted and said:
// tracker entries given up at the age limit, and at exit what is still waiting; and so is every
// launch left unannounced because the tracker was full. Watcher thread, then shutdown (after
// the watcher stopped).
void ActivityCollector::account_losses(bool at_exit) {
  const TrackerStats t = tracker_.stats();
  say_growth(g_refused, t.refused, refused_seen_,
             "%llu launches were not announced: the correlation tracker was full "
             "(PARCAGPU_MAX_OUTSTANDING=%u launches waiting for kernel records, which arrive too "
             "late for this launch rate); lower the rate limits or raise the cap",
             config_.max_outstanding);
  say_growth(g_expired, t.expired, expired_seen_,
             "%llu announced launches got no (or not all) kernel records within "
             "PARCAGPU_MAX_AGE_MS=%u (failed launches, or records CUPTI dropped): given up",
             config_.max_age_ms);
  const uint64_t now = monotonic_ns();
  if (!at_exit && now >= next_progress_ns_) {
    if (next_progress_ns_ != 0) report_repeated_error_progress();
    next_progress_ns_ = now + kProgressIntervalNs;
  }
  if (at_exit && t.pending > 0) {
    // Said as an error when nothing said before explains it (records dropped, failing entry
    // points, a libcupti lacking some): kernels still running at exit, say.
    bool explained = !cupti_.missing.empty();
    for_each_repeated_error([](const RepeatedError &, void *e) { *static_cast<bool *>(e) = true; },
                            &explained);
    if (explained)
      debug_log("%llu announced launches had no kernel record at exit (see above)",
                static_cast<unsigned long long>(t.pending));
    else
      report_error(kErrDataLost, "activity",
                   "%llu announced launches had no kernel record at exit: their kernels are not "
                   "delivered",
                   static_cast<unsigned long long>(t.pending));
  }
}

ActivityStats ActivityCollector::stats() const {
  std::lock_guard<std::mutex> s(stats_mu_);
  ActivityStats a = stats_;
  const MemoryStats m = memory_->stats();
  a.memory_records = m.records;
  a.memory_delivered = m.delivered;
  a.memory_batches = m.batches;
  a.memory_unheard = m.unheard;
  a.memory_blocked = m.blocked;
  a.enables = switch_->enables();
  a.disables = switch_->disables();
  return a;
}

void CUPTIAPI ActivityCollector::on_buffer_requested(uint8_t **buffer, size_t *size,
                                                     size_t *max_num_records) {
  *max_num_records = 0;  // as many as fit
  ActivityCollector *self = g_collector;
  if (process_guard::forked_child()) self = nullptr;  // the pool's lock may be held for ever
  uint8_t *b = self ? self->pool_->acquire() : nullptr;
  *buffer = b;
  *size = b ? self->pool_->buffer_bytes() : 0;
  if (!b && self) {
    std::lock_guard<std::mutex> s(self->stats_mu_);
    ++self->stats_.buffers_refused;
  }
}

void CUPTIAPI ActivityCollector::on_buffer_completed(CUcontext ctx, uint32_t stream_id,
                                                     uint8_t *buffer, size_t /*size*/,
                                                     size_t valid_size) {
  ActivityCollector *self = g_collector;
  // After fork the buffer stays unread: its records are the parent's to deliver, and the locks
  // reading it takes may be held by threads that do not exist here.
  if (!self || process_guard::forked_child()) return;
  self->buffers_in_flight_.fetch_add(1, std::memory_order_acq_rel);
  try {
    self->process_buffer(ctx, stream_id, buffer, valid_size);
  } catch (...) {
    g_buffer_exception.report(kErrInternal, "unexpected exception while reading a buffer");
  }
  self->pool_->release(buffer);
  self->buffers_in_flight_.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace parcagpu
