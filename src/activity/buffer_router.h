// CUPTI's activity buffers handed out and taken back: the buffer callbacks (registered once:
// they carry no user data, one router a process), the bounded pool they draw from
// (activity_buffers.h), each completed buffer's records routed to their family's delivery
// (activity_kinds.h: kernels to KernelDelivery, copies and fills to MemoryDelivery), what a
// buffer says of losses (cut short, records CUPTI dropped), and the flushes that make CUPTI hand
// buffers back.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "activity/activity_buffers.h"
#include "base/config.h"
#include "base/cupti_api.h"

namespace parcagpu {

class CorrelationTracker;
class KernelDelivery;  // kernel_delivery.h
class MemoryDelivery;  // memory_delivery.h

struct BufferStats {
  uint64_t completed = 0;
  uint64_t refused = 0;          // requested at the memory cap: CUPTI drops those records
  uint64_t kernel_records = 0;   // kernel records read
  uint64_t records_dropped = 0;  // reported by cuptiActivityGetNumDroppedRecords
  uint64_t cut_short = 0;        // cuptiActivityGetNextRecord failed: the rest was lost
  uint64_t flushes = 0;
};

class BufferRouter {
 public:
  BufferRouter(const CuptiApi &cupti, const Config &config, CorrelationTracker &tracker,
               KernelDelivery &kernels, MemoryDelivery &memory);
  ~BufferRouter();

  // Registers the buffer callbacks (and first, with PARCAGPU_ACTIVITY_HOST_MEMORY, keeps the
  // kernel timestamps in host memory). False, said, if CUPTI refuses: no activity then.
  bool init();
  // cuptiActivityFlushAll: CUPTI hands back the buffers it has filled (forced: also those it
  // has not), on this thread. A failure is said once, then counted.
  void flush(bool forced);
  // At exit, after the last flush: while announced launches still await their first kernel, or
  // CUPTI's thread is reading a buffer, waits for them, flushing again now and then; at most a
  // second.
  void drain_at_exit();
  BufferStats stats() const;

 private:
  static void CUPTIAPI on_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_num_records);
  static void CUPTIAPI on_buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                           size_t size, size_t valid_size);
  void route(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t valid_size);
  void account(const BufferWalk &walk, CUcontext ctx, uint32_t stream_id, size_t valid_size);
  // The records CUPTI dropped for this buffer's context and stream (said once when not 0).
  size_t dropped_records(CUcontext ctx, uint32_t stream_id);

  const CuptiApi &cupti_;
  const Config &config_;
  CorrelationTracker &tracker_;
  KernelDelivery &kernels_;
  MemoryDelivery &memory_;
  BufferPool pool_;
  std::atomic<uint32_t> in_flight_{0};  // on_buffer_completed calls running now
  mutable std::mutex mu_;
  BufferStats stats_;
};

}  // namespace parcagpu
