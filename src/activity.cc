#include "activity.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "log.h"
#include "parcagpu/abi.h"
#include "process_guard.h"
#include "usdt.h"

namespace parcagpu {
namespace {

ActivityCollector *g_collector = nullptr;  // CUPTI's buffer callbacks carry no user data

// Every error here can repeat (per launch, per flush, per buffer): once, then counted.
RepeatedError g_enable_failed("activity", "cuptiActivityEnable failed");
RepeatedError g_disable_failed("activity", "cuptiActivityDisable failed");
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
RepeatedError g_buffer_exception("activity", "exceptions while reading a buffer");
RepeatedError g_flusher_exception("activity", "exceptions in the flusher thread");
RepeatedError g_flusher_start_failed("activity", "flusher thread could not start");

constexpr uint64_t kSecondNs = 1000000000ull;
constexpr uint64_t kDisableRetryNs = kSecondNs;
constexpr uint64_t kProgressIntervalNs = 60 * kSecondNs;  // repeated errors: a line a minute
// After sticky collection was found not to pay, it is not considered again for this long.
constexpr uint64_t kStickyRecheckNs = kSecondNs;

constexpr size_t kRecordAlign = 8;  // CUPTI requires 8-byte aligned buffers

template <typename T>
T field(const uint8_t *record, size_t offset) {
  T v;
  std::memcpy(&v, record + offset, sizeof v);
  return v;
}

}  // namespace

BufferPool::~BufferPool() {
  for (uint8_t *b : free_) std::free(b);
}

uint8_t *BufferPool::acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_.empty()) {
    uint8_t *b = free_.back();
    free_.pop_back();
    return b;
  }
  if (alive_ >= max_) return nullptr;
  void *p = std::aligned_alloc(kRecordAlign, bytes_);
  if (!p) return nullptr;
  ++alive_;
  return static_cast<uint8_t *>(p);
}

void BufferPool::release(uint8_t *buf) {
  if (!buf) return;
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(buf);
}

ActivityCollector::ActivityCollector(const CuptiApi &cupti, const Config &config,
                                     CorrelationTracker &tracker, GraphTracker &graphs)
    : cupti_(cupti),
      config_(config),
      tracker_(tracker),
      graphs_(graphs),
      pool_(static_cast<size_t>(config.buffer_kib) * 1024, config.max_buffers) {}

bool ActivityCollector::init() {
  g_collector = this;
  CUptiResult r =
      cupti_.cuptiActivityRegisterCallbacks(&on_buffer_requested, &on_buffer_completed);
  if (r != CUPTI_SUCCESS) {
    report_error(r, "activity",
                 "cuptiActivityRegisterCallbacks failed: %s; kernel timing will not be collected",
                 cupti_result_string(cupti_, r));
    return false;
  }
  return true;
}

bool ActivityCollector::cupti_enable_locked() {
  if (cupti_on_) return true;
  const uint64_t now = monotonic_ns();
  if (now < retry_after_ns_) return false;
  CUptiResult r = cupti_.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    retry_after_ns_ = now + 5 * kSecondNs;
    g_enable_failed.report(r,
                           "cuptiActivityEnable(CONCURRENT_KERNEL) failed: %s; retrying every "
                           "5 s, launches are still announced but their kernels are not timed",
                           cupti_result_string(cupti_, r));
    return false;
  }
  cupti_on_ = true;
  std::lock_guard<std::mutex> s(stats_mu_);
  ++stats_.enables;
  return true;
}

void ActivityCollector::cupti_disable_locked(bool force) {
  if (!cupti_on_) return;
  // Held for PC sampling: once off, CUPTI would not let it on again (hold_on). At exit (force)
  // PC sampling has been torn down before.
  if (held_ && !force) return;
  const uint64_t now = monotonic_ns();
  if (!force && now < disable_retry_after_ns_) return;
  // Records of kernels launched before the disable are still delivered by later flushes.
  CUptiResult r = cupti_.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) {
    // Still on, as CUPTI says: not toggled again per launch, retried after a pause (by the
    // flusher when launches stop) and at exit.
    disable_retry_after_ns_ = now + kDisableRetryNs;
    g_disable_failed.report(r,
                            "cuptiActivityDisable(CONCURRENT_KERNEL) failed: %s; kernel "
                            "activity stays on, retried every second and at exit",
                            cupti_result_string(cupti_, r));
    return;
  }
  cupti_on_ = false;
  std::lock_guard<std::mutex> s(stats_mu_);
  ++stats_.disables;
}

// Whether kernel activity should be on now, PC sampling's hold aside: armed, and in the mode
// that keeps it on or around an announced launch (or left on: sticky).
bool ActivityCollector::wanted_on_locked() const {
  return enabled_.load(std::memory_order_relaxed) &&
         (config_.activity_mode == ActivityMode::WhileConsumer || active_launches_ != 0 ||
          sticky_);
}

void ActivityCollector::hold_on(bool hold) {
  std::lock_guard<std::mutex> lock(toggle_mu_);
  if (hold == held_) return;
  held_ = hold;
  if (hold) {
    if (cupti_enable_locked()) debug_log("kernel activity on while PC sampling is enabled");
    return;
  }
  if (!wanted_on_locked()) cupti_disable_locked();
}

void ActivityCollector::set_enabled(bool on) {
  std::lock_guard<std::mutex> lock(toggle_mu_);
  if (on == enabled_.load(std::memory_order_relaxed)) return;
  if (on) {
    // Per-launch mode switches CUPTI on only around announced launches (launch_begin/end).
    if (config_.activity_mode == ActivityMode::WhileConsumer && !cupti_enable_locked()) return;
    enabled_.store(true, std::memory_order_release);
    armed_once_.store(true, std::memory_order_relaxed);
    debug_log("kernel collection armed (a consumer attached, mode %s)",
              config_.activity_mode == ActivityMode::WhileConsumer ? "consumer" : "launch");
    std::lock_guard<std::mutex> f(flusher_mu_);
    if (!flusher_.joinable() && !stopping_) {
      try {
        flusher_ = std::thread([this] { flusher_main(); });
      } catch (...) {
        g_flusher_start_failed.report(kErrInternal,
                                      "cannot start the flusher thread; flushing only when "
                                      "the last consumer leaves and at exit");
      }
    }
    return;
  }
  cupti_disable_locked();
  active_launches_ = 0;
  sticky_ = false;
  enabled_.store(false, std::memory_order_release);
  debug_log("kernel collection disarmed (no consumer left)");
  flush(true);
}

// Toggling CUPTI activity costs about 12 us per enable/disable pair on an H100: cheap at the
// default rate limits (100 + 20 announced launches/s per thread), dearer than leaving activity on
// when nearly every launch is announced. So when enables come faster than one per
// kStickyIntervalNs on average (a moving average, so a few coinciding launches of several threads
// don't count), activity stays on until the gap between announced launches exceeds kQuietNs.
constexpr uint64_t kStickyIntervalNs = 1000000ull;  // 1 ms
constexpr uint64_t kQuietNs = 10000000ull;          // 10 ms

bool ActivityCollector::launch_begin() {
  if (config_.activity_mode != ActivityMode::AroundLaunch || !enabled()) return false;
  const uint64_t now = monotonic_ns();
  std::lock_guard<std::mutex> lock(toggle_mu_);
  if (!enabled()) return false;
  if (last_begin_ns_ != 0 && now - last_begin_ns_ > kQuietNs) {
    enable_interval_avg_ns_ = kQuietNs;  // a pause: forget the earlier rate
    if (sticky_) {
      sticky_ = false;
      debug_log("announced launches slowed down: kernel activity back to per-launch");
    }
  }
  last_begin_ns_ = now;
  if (active_launches_++ == 0 && !cupti_on_) {
    if (last_enable_ns_ != 0) {
      const uint64_t interval = now - last_enable_ns_;
      enable_interval_avg_ns_ = enable_interval_avg_ns_ - enable_interval_avg_ns_ / 8 + interval / 8;
      if (!sticky_ && enable_interval_avg_ns_ < kStickyIntervalNs &&
          now >= sticky_banned_until_ns_ && sticky_pays_locked(now)) {
        sticky_ = true;
        debug_log("announced launches come faster than 1 kHz: kernel activity stays on");
      }
    }
    last_enable_ns_ = now;
    cupti_enable_locked();
  }
  return true;
}

void ActivityCollector::launch_end() {
  if (config_.activity_mode != ActivityMode::AroundLaunch) return;
  std::lock_guard<std::mutex> lock(toggle_mu_);
  if (active_launches_ == 0) return;  // disarmed meanwhile
  if (--active_launches_ == 0 && !sticky_) cupti_disable_locked();
}

void ActivityCollector::end_sticky_if_quiet() {
  if (config_.activity_mode != ActivityMode::AroundLaunch) return;
  const uint64_t now = monotonic_ns();
  std::lock_guard<std::mutex> lock(toggle_mu_);
  if (!sticky_ || active_launches_ != 0 || now - last_begin_ns_ < kQuietNs) return;
  sticky_ = false;
  enable_interval_avg_ns_ = kQuietNs;
  cupti_disable_locked();
  debug_log("announced launches paused: kernel activity back to per-launch");
}

void ActivityCollector::request_flush() {
  // try_lock: the launch path must never wait on the flusher.
  std::unique_lock<std::mutex> lock(flusher_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  if (flush_requested_) return;
  flush_requested_ = true;
  flusher_cv_.notify_one();
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

void ActivityCollector::flusher_main() {
  std::unique_lock<std::mutex> lock(flusher_mu_);
  while (!stopping_) {
    flusher_cv_.wait_for(lock, std::chrono::milliseconds(config_.flush_interval_ms),
                         [this] { return flush_requested_ || stopping_; });
    if (stopping_) break;
    flush_requested_ = false;
    lock.unlock();
    try {
      if (enabled()) flush(false);
      end_sticky_if_quiet();
      recheck_sticky();
      retry_stuck_disable();
      tracker_.expire(coarse_ns());
      account_losses(false);
    } catch (...) {
      g_flusher_exception.report(kErrInternal, "unexpected exception in the flusher thread");
    }
    lock.lock();
  }
}

void ActivityCollector::shutdown() {
  {
    std::lock_guard<std::mutex> f(flusher_mu_);
    stopping_ = true;
    flusher_cv_.notify_all();
  }
  if (flusher_.joinable()) flusher_.join();
  // Also when disarmed: kernels of launches announced just before the last consumer left may
  // have been recorded after that flush.
  if (armed_once_.load(std::memory_order_relaxed)) flush(true);
  set_enabled(false);
  {
    // A disable that failed before gets one more try, whatever the back-off says: activity
    // left on would go on recording the exiting process's kernels.
    std::lock_guard<std::mutex> lock(toggle_mu_);
    cupti_disable_locked(true);
  }
  // The flush delivered on this thread what was complete, but CUPTI's own thread may still be
  // reading a buffer it took before: its kernels are not lost. Waited for, briefly.
  for (int i = 0; i < 1000 && buffers_in_flight_.load(std::memory_order_acquire) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  account_losses(true);
}

void ActivityCollector::retry_stuck_disable() {
  std::lock_guard<std::mutex> lock(toggle_mu_);
  if (!cupti_on_) return;
  // Activity is on where nothing wants it: a disable failed. Retried here, where no launch
  // comes by to do it.
  if (!wanted_on_locked()) cupti_disable_locked();
}

// Sticky collection (AroundLaunch mode at high announced rates) records every kernel. That pays
// when most launches are announced (rate limits raised). When the announced rate is high only
// because many threads launch, each at its rate limit, most records would be of unannounced
// launches: CUPTI's cost on every launch, buffers filling with what is thrown away, and
// announced kernels dropped at the buffer cap. So sticky needs at least as many announced
// launches as unannounced ones since the last look.
bool ActivityCollector::sticky_pays_locked(uint64_t now) {
  if (!launch_counts_) return true;
  LaunchCounts c = launch_counts_();
  c.unannounced += tracker_.refused();  // refused at the tracker's cap: not announced either
  const uint64_t announced = c.announced - counts_seen_.announced;
  const uint64_t unannounced = c.unannounced - counts_seen_.unannounced;
  counts_seen_ = c;
  if (unannounced <= announced) return true;
  sticky_banned_until_ns_ = now + kStickyRecheckNs;
  return false;
}

void ActivityCollector::recheck_sticky() {
  if (config_.activity_mode != ActivityMode::AroundLaunch) return;
  const uint64_t now = monotonic_ns();
  std::lock_guard<std::mutex> lock(toggle_mu_);
  if (!sticky_ || sticky_pays_locked(now)) return;
  sticky_ = false;
  debug_log("most launches are not announced: kernel activity back to per-launch");
  if (active_launches_ == 0) cupti_disable_locked();
}

// Every kernel of an announced launch that will not reach consumers is counted and said:
// tracker entries given up at the age limit, and at exit what is still waiting; and so is every
// launch left unannounced because the tracker was full. Flusher thread, then shutdown (after
// the flusher stopped).
void ActivityCollector::account_losses(bool at_exit) {
  const TrackerStats t = tracker_.stats();
  if (t.refused > refused_seen_)
    g_refused.report_n(t.refused - refused_seen_, kErrDataLost,
                       "%llu launches were not announced: the correlation tracker was full "
                       "(PARCAGPU_MAX_OUTSTANDING=%u launches waiting for kernel records, which "
                       "arrive too late for this launch rate); lower the rate limits or raise "
                       "the cap",
                       static_cast<unsigned long long>(t.refused - refused_seen_),
                       config_.max_outstanding);
  refused_seen_ = t.refused;
  if (t.expired > expired_seen_)
    g_expired.report_n(t.expired - expired_seen_, kErrDataLost,
                       "%llu announced launches got no (or not all) kernel records within "
                       "PARCAGPU_MAX_AGE_MS=%u (failed launches, or records CUPTI dropped): "
                       "given up",
                       static_cast<unsigned long long>(t.expired - expired_seen_),
                       config_.max_age_ms);
  expired_seen_ = t.expired;
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
  return stats_;
}

void CUPTIAPI ActivityCollector::on_buffer_requested(uint8_t **buffer, size_t *size,
                                                     size_t *max_num_records) {
  *max_num_records = 0;  // as many as fit
  ActivityCollector *self = g_collector;
  if (process_guard::forked_child()) self = nullptr;  // the pool's lock may be held for ever
  uint8_t *b = self ? self->pool_.acquire() : nullptr;
  *buffer = b;
  *size = b ? self->pool_.buffer_bytes() : 0;
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
  self->pool_.release(buffer);
  self->buffers_in_flight_.fetch_sub(1, std::memory_order_acq_rel);
}

void ActivityCollector::process_buffer(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                       size_t valid_size) {
  const bool per_kernel = usdt::kernel_executed_consumers() != 0;
  const void *batch[PARCAGPU_ACTIVITY_BATCH_MAX];
  uint32_t n = 0;
  uint64_t seen = 0, delivered = 0, batches = 0, unattributed = 0;
  const uint64_t now = coarse_ns();
  CUpti_Activity *record = nullptr;
  CUptiResult next = CUPTI_ERROR_MAX_LIMIT_REACHED;
  while (valid_size > 0 && (next = cupti_.cuptiActivityGetNextRecord(buffer, valid_size,
                                                                      &record)) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    ++seen;
    auto *r = reinterpret_cast<uint8_t *>(record);
    if (kernel_observer_) kernel_observer_(field<const char *>(r, PARCAGPU_KREC_OFF_NAME));
    uint32_t corr = field<uint32_t>(r, PARCAGPU_KREC_OFF_CORRELATION_ID);
    if (corr == 0) {
      // A kernel of a conditional node's body: CUPTI drops the launch's correlation ID (ground
      // truth, fact 7). Hand it back to the launch that owns the body graph; the buffer is
      // ours, so consumers see the record with that launch's ID.
      const uint32_t graph_id = field<uint32_t>(r, PARCAGPU_KREC_OFF_GRAPH_ID);
      if (graph_id == 0) continue;
      bool unknown_graph = false;
      corr = graphs_.conditional_owner(graph_id, field<uint64_t>(r, PARCAGPU_KREC_OFF_START),
                                       field<uint64_t>(r, PARCAGPU_KREC_OFF_END),
                                       [this](uint32_t c) { return tracker_.contains(c); },
                                       &unknown_graph);
      if (corr == 0) {
        // No exec known for the graph: whichever launch ran it, its kernels cannot be handed
        // back (graph IDs unknown at instantiation, or the exec long retired). Without an open
        // launch it is simply a kernel of an unannounced launch.
        if (unknown_graph) {
          ++unattributed;
          // (Without cuptiGetGraphId no graph is known: reported once at start.)
          if (cupti_.available(cupti_.cuptiGetGraphId))
            g_conditional_unattributed.report(
              kErrDataLost,
              "a kernel record of graph %u carries correlation ID 0 (a conditional body) and "
              "no known graph exec owns that graph: conditional body kernels of such graphs "
              "are not delivered",
              graph_id);
        }
        continue;
      }
      std::memcpy(r + PARCAGPU_KREC_OFF_CORRELATION_ID, &corr, sizeof corr);
    }
    if (!tracker_.on_kernel(corr, now)) continue;
    ++delivered;
    if (per_kernel)
      usdt::kernel_executed(field<uint64_t>(r, PARCAGPU_KREC_OFF_START),
                            field<uint64_t>(r, PARCAGPU_KREC_OFF_END), corr,
                            field<uint32_t>(r, PARCAGPU_KREC_OFF_DEVICE_ID),
                            field<uint32_t>(r, PARCAGPU_KREC_OFF_STREAM_ID),
                            field<uint32_t>(r, PARCAGPU_KREC_OFF_GRAPH_ID),
                            field<uint64_t>(r, PARCAGPU_KREC_OFF_GRAPH_NODE_ID),
                            field<const char *>(r, PARCAGPU_KREC_OFF_NAME));
    batch[n++] = record;
    if (n == PARCAGPU_ACTIVITY_BATCH_MAX) {
      usdt::activity_batch(batch, n);
      ++batches;
      n = 0;
    }
  }
  if (n > 0) {
    usdt::activity_batch(batch, n);
    ++batches;
  }
  // CUPTI_ERROR_MAX_LIMIT_REACHED is the end of the buffer; anything else leaves the rest of it
  // unread.
  const bool cut_short = valid_size > 0 && next != CUPTI_ERROR_MAX_LIMIT_REACHED;
  if (cut_short)
    g_next_record_failed.report(next,
                                "cuptiActivityGetNextRecord failed: %s; the rest of a %zu-byte "
                                "buffer (after %llu kernel records) is lost",
                                cupti_result_string(cupti_, next), valid_size,
                                static_cast<unsigned long long>(seen));
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
  std::lock_guard<std::mutex> s(stats_mu_);
  ++stats_.buffers_completed;
  stats_.kernel_records += seen;
  stats_.kernels_delivered += delivered;
  stats_.batches_fired += batches;
  stats_.records_dropped += dropped;
  stats_.buffers_cut_short += cut_short ? 1 : 0;
  stats_.conditional_unattributed += unattributed;
}

}  // namespace parcagpu
