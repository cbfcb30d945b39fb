#include "activity/activity.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include "activity/activity_buffers.h"
#include "activity/activity_switch.h"
#include "base/agent_ring_pacer.h"
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
RepeatedError g_next_record_failed("activity", "buffers cut short by cuptiActivityGetNextRecord",
                                   "buffers");
RepeatedError g_dropped_query_failed("activity", "cuptiActivityGetNumDroppedRecords failed");
RepeatedError g_records_dropped("activity", "activity records dropped by CUPTI", "records");
RepeatedError g_conditional_unattributed("activity",
                                         "conditional body kernel records of no known graph exec",
                                         "records");
RepeatedError g_refused("activity", "launches not announced: the correlation tracker was full",
                        "launches");
RepeatedError g_expired("activity", "announced launches given up without their kernels",
                        "launches");
RepeatedError g_kernels_unheard("activity",
                                "kernels of announced launches fired after the last kernel "
                                "consumer left",
                                "kernels");
RepeatedError g_launches_unheard("activity",
                                 "announced launches still waiting for kernels when the last "
                                 "kernel consumer left",
                                 "launches");
RepeatedError g_graph_ends_made_up("activity",
                                   "graph kernel records with an end CUPTI wrote after kernel "
                                   "activity went off",
                                   "kernels");
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
          launches ? static_cast<const LaunchCountSource *>(this) : nullptr)) {}

ActivityCollector::~ActivityCollector() = default;

// The launch path's calls: the policy is ActivitySwitch's.
bool ActivityCollector::launch_begin() { return switch_->launch_begin(); }
void ActivityCollector::launch_end() { switch_->launch_end(); }
bool ActivityCollector::armed() const { return switch_->armed(); }
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

uint32_t ActivityCollector::conditional_body_owner(const KernelRecord &k, uint64_t *unattributed,
                                                   uint64_t *unannounced) {
  if (k.graph_id == 0) return 0;
  bool unknown_graph = false;
  const uint32_t owner = graphs_.conditional_owner(
      k.graph_id, k.start, k.end, [this](uint32_t c) { return tracker_.contains(c); },
      &unknown_graph);
  // Without an open launch it is simply a kernel of an unannounced launch.
  if (owner != 0 || !unknown_graph) return owner;
  // No exec known for the graph: the graph tracker keeps every conditional exec with an
  // announced launch awaiting kernels, so unless it says owners may be unknown (graph IDs
  // unknown at instantiation, execs forgotten at a cap), this is a kernel of an exec none of
  // whose launches was announced, forgotten at its destroy: not a loss (issue 42: 460,534 such
  // records in 10 s of the conditional scenario were said lost).
  if (!graphs_.owners_may_be_unknown()) {
    ++*unannounced;
    return 0;
  }
  ++*unattributed;
  // (Without cuptiGetGraphId no graph is known: reported once at start.)
  if (cupti_.available(cupti_.cuptiGetGraphId))
    g_conditional_unattributed.report(
        kErrDataLost,
        "a kernel record of graph %u carries correlation ID 0 (a conditional body) and no known "
        "graph exec owns that graph (graph IDs unknown at instantiation, or execs forgotten at "
        "a cap, said before): conditional body kernels of such graphs are not delivered",
        k.graph_id);
  return 0;
}

size_t ActivityCollector::dropped_records(CUcontext ctx, uint32_t stream_id) {
  size_t dropped = 0;
  const CUptiResult dr = cupti_.cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped);
  if (dr != CUPTI_SUCCESS) {
    dropped = 0;
    // (A libcupti without it was reported once at start.)
    if (cupti_.available(cupti_.cuptiActivityGetNumDroppedRecords))
      g_dropped_query_failed.report(dr,
                                    "cuptiActivityGetNumDroppedRecords failed: %s; records CUPTI "
                                    "drops (buffers at their cap) go uncounted",
                                    cupti_result_string(cupti_, dr));
  } else if (dropped > 0) {
    g_records_dropped.report_n(dropped, kErrRecordsDropped,
                               "CUPTI dropped %zu activity records, kernels among them are not "
                               "delivered: the activity buffers were at their cap of %u x %u "
                               "KiB (PARCAGPU_MAX_BUFFERS, PARCAGPU_BUFFER_KIB)",
                               dropped, config_.max_buffers, config_.buffer_kib);
  }
  return dropped;
}

// One activity_batch firing. Its kernel records take their room in the production agent's ring
// from the pacer that PC firings wait for (agent_ring_pacer.h), waiting only once the bucket owes
// half the ring. Never on the launch path: CUPTI hands buffers back on its own thread, or on the
// one that flushes (the watcher, or the exiting thread).
void ActivityCollector::fire_activity_batch(const void **records, uint32_t n) {
  AgentRingPacer &pacer = AgentRingPacer::instance();
  const uint64_t bytes = uint64_t{n} * kAgentKernelEventBytes;
  for (uint64_t w;
       (w = pacer.wait_ns(bytes, monotonic_ns(), AgentRingPacer::kKernelDebtBytes)) > 0;)
    std::this_thread::sleep_for(std::chrono::nanoseconds(w));
  pacer.take(bytes, monotonic_ns());
  usdt::activity_batch(records, n);
}

// Whether a kernel record goes to consumers (its launch was announced), with the ID it goes
// with set in it; the buffer is ours, so consumers see the record with that ID.
bool ActivityCollector::deliverable(KernelRecord &k, uint64_t now, uint64_t *unattributed,
                                    uint64_t *unannounced) {
  if (k.correlation_id == 0) {
    // A kernel of a conditional node's body: CUPTI drops the launch's correlation ID (ground
    // truth, fact 7). Hand it back to the launch that owns the body graph.
    const uint32_t owner = conditional_body_owner(k, unattributed, unannounced);
    if (owner == 0) return false;
    k.set_correlation_id(owner);
  }
  uint32_t deliver_as = 0;
  if (!tracker_.on_kernel(k.correlation_id, now, &deliver_as)) return false;
  // A multi-device launch's second and later kernels go under IDs of its own
  // (correlation_tracker.h says why).
  if (deliver_as != k.correlation_id) k.set_correlation_id(deliver_as);
  return true;
}

// What one buffer lost: the rest of it after a failed record walk, and the graph kernel records
// not delivered for their made-up end (activity_off_times.h).
void ActivityCollector::say_buffer_losses(const BufferWalk &walk, size_t valid_size,
                                          uint64_t made_up) {
  if (walk.cut_short)
    g_next_record_failed.report(walk.error,
                                "cuptiActivityGetNextRecord failed: %s; the rest of a %zu-byte "
                                "buffer (after %llu kernel records) is lost",
                                cupti_result_string(cupti_, walk.error), valid_size,
                                static_cast<unsigned long long>(walk.kernel_records));
  if (made_up > 0)
    g_graph_ends_made_up.report_n(
        made_up, kErrDataLost,
        "%llu graph kernel records of announced launches came with an end CUPTI wrote after "
        "kernel activity went off (the next enable's time, docs/cupti-facts.md): not delivered, "
        "their GPU time is unknown",
        static_cast<unsigned long long>(made_up));
}

void ActivityCollector::process_buffer(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                       size_t valid_size) {
  const bool per_kernel = usdt::kernel_executed_consumers() != 0;
  // Nobody attached to either kernel probe: what is delivered now reaches no consumer (the last
  // one left after these launches were announced, before the watcher disarmed).
  const bool heard = per_kernel || usdt::activity_batch_consumers() != 0;
  const void *batch[PARCAGPU_ACTIVITY_BATCH_MAX];
  uint32_t n = 0;
  uint64_t delivered = 0, batches = 0, unattributed = 0, unannounced = 0, made_up = 0;
  const uint64_t now = coarse_ns();
  const BufferWalk walk = walk_kernel_records(cupti_, buffer, valid_size, [&](KernelRecord &k) {
    if (kernels_) kernels_->on_kernel_record(k.name);
    if (!deliverable(k, now, &unattributed, &unannounced)) return;
    if (k.graph_id != 0 && switch_->went_off_between(k.start, k.end)) {
      ++made_up;  // its launch stays matched: the kernel ran, its time is unknown
      return;
    }
    ++delivered;
    if (const char *fit = kernel_names_.fit(k.name); fit != k.name) k.set_name(fit);
    if (per_kernel)
      usdt::kernel_executed(k.start, k.end, k.correlation_id, k.device_id, k.stream_id, k.graph_id,
                            k.graph_node_id, k.name);
    batch[n++] = k.record;
    if (n == PARCAGPU_ACTIVITY_BATCH_MAX) {
      fire_activity_batch(batch, n);
      ++batches;
      n = 0;
    }
  });
  if (n > 0) {
    fire_activity_batch(batch, n);
    ++batches;
  }
  say_buffer_losses(walk, valid_size, made_up);
  const size_t dropped = dropped_records(ctx, stream_id);
  if (!heard && delivered > 0)
    g_kernels_unheard.report_n(delivered, kErrDataLost,
                               "%llu kernel records of announced launches were fired after the "
                               "last kernel consumer (activity_batch, kernel_executed) detached: "
                               "no consumer got them",
                               static_cast<unsigned long long>(delivered));
  std::lock_guard<std::mutex> s(stats_mu_);
  if (!heard) stats_.kernels_unheard += delivered;
  stats_.graph_ends_made_up += made_up;
  ++stats_.buffers_completed;
  stats_.kernel_records += walk.kernel_records;
  stats_.kernels_delivered += delivered;
  stats_.batches_fired += batches;
  stats_.records_dropped += dropped;
  stats_.buffers_cut_short += walk.cut_short ? 1 : 0;
  stats_.conditional_unattributed += unattributed;
  stats_.conditional_unannounced += unannounced;
}

}  // namespace parcagpu
