#include "activity.h"

#include <cstdlib>
#include <cstring>
#include <ctime>

#include "log.h"
#include "parcagpu/abi.h"
#include "usdt.h"

namespace parcagpu {
namespace {

ActivityCollector *g_collector = nullptr;  // CUPTI's buffer callbacks carry no user data

constexpr size_t kRecordAlign = 8;  // CUPTI requires 8-byte aligned buffers

template <typename T>
T field(const uint8_t *record, size_t offset) {
  T v;
  std::memcpy(&v, record + offset, sizeof v);
  return v;
}

}  // namespace

uint64_t coarse_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

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
    retry_after_ns_ = now + 5ull * 1000000000ull;
    report_error(r, "activity",
                 "cuptiActivityEnable(CONCURRENT_KERNEL) failed: %s; retrying in 5 s, "
                 "launches are still announced",
                 cupti_result_string(cupti_, r));
    return false;
  }
  cupti_on_ = true;
  std::lock_guard<std::mutex> s(stats_mu_);
  ++stats_.enables;
  return true;
}

void ActivityCollector::cupti_disable_locked() {
  if (!cupti_on_) return;
  // Records of kernels launched before the disable are still delivered by later flushes.
  CUptiResult r = cupti_.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS)
    report_error(r, "activity", "cuptiActivityDisable(CONCURRENT_KERNEL) failed: %s",
                 cupti_result_string(cupti_, r));
  cupti_on_ = false;
  std::lock_guard<std::mutex> s(stats_mu_);
  ++stats_.disables;
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
        report_error(kErrInternal, "activity", "cannot start the flusher thread; flushing "
                                               "only at exit");
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

void ActivityCollector::launch_begin() {
  if (config_.activity_mode != ActivityMode::AroundLaunch || !enabled()) return;
  const uint64_t now = monotonic_ns();
  std::lock_guard<std::mutex> lock(toggle_mu_);
  if (!enabled()) return;
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
      if (!sticky_ && enable_interval_avg_ns_ < kStickyIntervalNs) {
        sticky_ = true;
        debug_log("announced launches come faster than 1 kHz: kernel activity stays on");
      }
    }
    last_enable_ns_ = now;
    cupti_enable_locked();
  }
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
    report_error(r, "activity", "cuptiActivityFlushAll failed: %s", cupti_result_string(cupti_, r));
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
      tracker_.expire(coarse_ns());
    } catch (...) {
      report_error(kErrInternal, "activity", "unexpected exception in the flusher thread");
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
}

ActivityStats ActivityCollector::stats() const {
  std::lock_guard<std::mutex> s(stats_mu_);
  return stats_;
}

void CUPTIAPI ActivityCollector::on_buffer_requested(uint8_t **buffer, size_t *size,
                                                     size_t *max_num_records) {
  *max_num_records = 0;  // as many as fit
  ActivityCollector *self = g_collector;
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
  if (!self) return;
  try {
    self->process_buffer(ctx, stream_id, buffer, valid_size);
  } catch (...) {
    report_error(kErrInternal, "activity", "unexpected exception while reading a buffer");
  }
  self->pool_.release(buffer);
}

void ActivityCollector::process_buffer(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                       size_t valid_size) {
  const bool per_kernel = usdt::kernel_executed_consumers() != 0;
  const void *batch[PARCAGPU_ACTIVITY_BATCH_MAX];
  uint32_t n = 0;
  uint64_t seen = 0, delivered = 0, batches = 0;
  const uint64_t now = coarse_ns();
  CUpti_Activity *record = nullptr;
  while (valid_size > 0 &&
         cupti_.cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
        record->kind != CUPTI_ACTIVITY_KIND_KERNEL)
      continue;
    ++seen;
    auto *r = reinterpret_cast<uint8_t *>(record);
    uint32_t corr = field<uint32_t>(r, PARCAGPU_KREC_OFF_CORRELATION_ID);
    if (corr == 0) {
      // A kernel of a conditional node's body: CUPTI drops the launch's correlation ID (ground
      // truth, fact 7). Hand it back to the launch that owns the body graph; the buffer is
      // ours, so consumers see the record with that launch's ID.
      const uint32_t graph_id = field<uint32_t>(r, PARCAGPU_KREC_OFF_GRAPH_ID);
      if (graph_id == 0) continue;
      corr = graphs_.conditional_owner(graph_id, field<uint64_t>(r, PARCAGPU_KREC_OFF_START),
                                       field<uint64_t>(r, PARCAGPU_KREC_OFF_END),
                                       [this](uint32_t c) { return tracker_.contains(c); });
      if (corr == 0) continue;
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
  size_t dropped = 0;
  if (cupti_.cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS &&
      dropped > 0) {
    report_error(kErrRecordsDropped, "activity",
                 "CUPTI dropped %zu activity records (buffers at the cap of %u x %u KiB?)",
                 dropped, config_.max_buffers, config_.buffer_kib);
  }
  std::lock_guard<std::mutex> s(stats_mu_);
  ++stats_.buffers_completed;
  stats_.kernel_records += seen;
  stats_.kernels_delivered += delivered;
  stats_.batches_fired += batches;
  stats_.records_dropped += dropped;
}

}  // namespace parcagpu
