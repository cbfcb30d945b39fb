#include "activity/buffer_router.h"

#include <chrono>
#include <thread>

#include "activity/kernel_delivery.h"
#include "activity/memory_delivery.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/process_guard.h"
#include "trackers/correlation_tracker.h"

namespace parcagpu {
namespace {

BufferRouter *g_router = nullptr;  // CUPTI's buffer callbacks carry no user data

// Every error here can repeat (per flush, per buffer): once, then counted.
RepeatedError g_flush_failed("activity", "cuptiActivityFlushAll failed");
RepeatedError g_next_record_failed("activity", "buffers cut short by cuptiActivityGetNextRecord",
                                   "buffers");
RepeatedError g_dropped_query_failed("activity", "cuptiActivityGetNumDroppedRecords failed");
RepeatedError g_records_dropped("activity", "activity records dropped by CUPTI", "records");
RepeatedError g_buffer_exception("activity", "exceptions while reading a buffer");

constexpr uint64_t kSecondNs = 1000000000ull;
// At exit, announced launches still awaiting their first kernel are waited for this long at most
// (their buffer in CUPTI's worker's hands, kernels still running), flushing again this often.
constexpr uint64_t kExitWaitNs = kSecondNs;
constexpr uint64_t kExitReflushNs = 50'000'000ull;

// Before any context exists (injection runs inside cuInit): CUPTI otherwise reserves device
// buffers for the GPU's kernel timestamps on every context it creates, GPU memory the
// application would miss. Where host memory is refused (CUPTI_ERROR_NOT_SUPPORTED on
// confidential-computing devices) or the call is missing, CUPTI's default stays: said in the
// debug log, nothing lost.
void keep_timestamps_in_host_memory(const CuptiApi &cupti) {
  uint8_t host_pinned = 1;
  size_t size = sizeof host_pinned;
  const CUptiResult r = cupti.cuptiActivitySetAttribute(
      CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, &size, &host_pinned);
  debug_log("kernel timestamps kept in %s",
            r == CUPTI_SUCCESS ? "page-locked host memory" : "CUPTI's device buffers");
  if (r != CUPTI_SUCCESS)
    debug_log("cuptiActivitySetAttribute(MEM_ALLOCATION_TYPE_HOST_PINNED): %s",
              cupti_result_string(cupti, r));
}

}  // namespace

BufferRouter::BufferRouter(const CuptiApi &cupti, const Config &config, CorrelationTracker &tracker,
                           KernelDelivery &kernels, MemoryDelivery &memory)
    : cupti_(cupti),
      config_(config),
      tracker_(tracker),
      kernels_(kernels),
      memory_(memory),
      pool_(static_cast<size_t>(config.buffer_kib) * 1024, config.max_buffers) {}

BufferRouter::~BufferRouter() {
  if (g_router == this) g_router = nullptr;
}

bool BufferRouter::init() {
  g_router = this;
  if (config_.activity_host_memory) keep_timestamps_in_host_memory(cupti_);
  CUptiResult r = cupti_.cuptiActivityRegisterCallbacks(&on_buffer_requested, &on_buffer_completed);
  if (r != CUPTI_SUCCESS) {
    report_error(r, "activity",
                 "cuptiActivityRegisterCallbacks failed: %s; kernel timing will not be collected",
                 cupti_result_string(cupti_, r));
    return false;
  }
  return true;
}

void BufferRouter::flush(bool forced) {
  CUptiResult r = cupti_.cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
  if (r != CUPTI_SUCCESS)
    g_flush_failed.report(r,
                          "cuptiActivityFlushAll failed: %s; kernels arrive only as CUPTI "
                          "completes full buffers",
                          cupti_result_string(cupti_, r));
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.flushes;
}

// The last flush delivered on this thread what was complete, but CUPTI's own thread may have
// taken a buffer before it: being read (counted in flight), or taken off CUPTI's queue and not
// yet handed to us, which nothing tells (a worker preempted between the two on a loaded machine:
// in CI, kernels delivered after the exit said them lost). Only an exit that would otherwise say
// a loss waits.
void BufferRouter::drain_at_exit() {
  const uint64_t give_up = monotonic_ns() + kExitWaitNs;
  uint64_t next_flush = monotonic_ns() + kExitReflushNs;
  while (monotonic_ns() < give_up &&
         (in_flight_.load(std::memory_order_acquire) != 0 || tracker_.pending() > 0)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (monotonic_ns() >= next_flush && in_flight_.load(std::memory_order_acquire) == 0) {
      flush(true);
      next_flush = monotonic_ns() + kExitReflushNs;
    }
  }
}

BufferStats BufferRouter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CUPTIAPI BufferRouter::on_buffer_requested(uint8_t **buffer, size_t *size,
                                                size_t *max_num_records) {
  *max_num_records = 0;  // as many as fit
  BufferRouter *self = g_router;
  if (process_guard::forked_child()) self = nullptr;  // the pool's lock may be held for ever
  uint8_t *b = self ? self->pool_.acquire() : nullptr;
  *buffer = b;
  *size = b ? self->pool_.buffer_bytes() : 0;
  if (!b && self) {
    std::lock_guard<std::mutex> lock(self->mu_);
    ++self->stats_.refused;
  }
}

void CUPTIAPI BufferRouter::on_buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                                size_t /*size*/, size_t valid_size) {
  BufferRouter *self = g_router;
  // After fork the buffer stays unread: its records are the parent's to deliver, and the locks
  // reading it takes may be held by threads that do not exist here.
  if (!self || process_guard::forked_child()) return;
  self->in_flight_.fetch_add(1, std::memory_order_acq_rel);
  try {
    self->route(ctx, stream_id, buffer, valid_size);
  } catch (...) {
    g_buffer_exception.report(kErrInternal, "unexpected exception while reading a buffer");
  }
  self->pool_.release(buffer);
  self->in_flight_.fetch_sub(1, std::memory_order_acq_rel);
}

// Kernels and copies go out in batches of their own, each fired as it fills and at the end of
// the walk (when its Batch ends).
void BufferRouter::route(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t valid_size) {
  const uint64_t now = coarse_ns();
  BufferWalk walk;
  {
    KernelDelivery::Batch kernels(kernels_, now);
    MemoryDelivery::Batch copies(memory_, now);
    struct Batches {
      KernelDelivery::Batch *kernels;
      MemoryDelivery::Batch *copies;
    } to{&kernels, &copies};
    const RecordSink sink{
        &to, [](void *c, KernelRecord &k) { static_cast<Batches *>(c)->kernels->add(k); },
        [](void *c, MemoryRecord &m) { static_cast<Batches *>(c)->copies->add(m); }};
    walk = walk_records(cupti_, buffer, valid_size, sink);
  }
  account(walk, ctx, stream_id, valid_size);
}

void BufferRouter::account(const BufferWalk &walk, CUcontext ctx, uint32_t stream_id,
                           size_t valid_size) {
  if (walk.cut_short)
    g_next_record_failed.report(walk.error,
                                "cuptiActivityGetNextRecord failed: %s; the rest of a %zu-byte "
                                "buffer (after %llu kernel records) is lost",
                                cupti_result_string(cupti_, walk.error), valid_size,
                                static_cast<unsigned long long>(walk.kernel_records));
  const size_t dropped = dropped_records(ctx, stream_id);
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.completed;
  stats_.kernel_records += walk.kernel_records;
  stats_.records_dropped += dropped;
  stats_.cut_short += walk.cut_short ? 1 : 0;
}

size_t BufferRouter::dropped_records(CUcontext ctx, uint32_t stream_id) {
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

}  // namespace parcagpu
