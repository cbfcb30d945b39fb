// CUPTI's activity buffers, apart from what their records are for: the bounded pool CUPTI's
// buffer-request callback draws from, and the walk over one completed buffer that hands each
// kernel record, decoded, to a handler. Knows nothing of correlation tracking or probes
// (ActivityCollector, activity.h, delivers).
#pragma once

#include <cupti.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "base/cupti_api.h"

namespace parcagpu {

// Fixed-size activity buffers with a cap on how many exist at once, reused through a free list
// of at most kKeepIdle; a buffer released beyond those goes back to the system (munmap). A burst
// (records outrunning their delivery on a busy machine) can take all max_buffers at once; kept
// idle for good, that high-water mark stayed resident: a soak's RSS stepped up 14 MB a minute in
// and never came down (issue 30). Buffers are mapped, not malloc'd, so that unmapping one does
// return it.
class BufferPool {
 public:
  static constexpr size_t kKeepIdle = 4;
  BufferPool(size_t buffer_bytes, uint32_t max_buffers) : bytes_(buffer_bytes), max_(max_buffers) {}
  ~BufferPool();
  uint8_t *acquire();  // nullptr at the cap
  void release(uint8_t *buf);
  size_t buffer_bytes() const { return bytes_; }
  size_t idle() const;  // buffers on the free list

 private:
  const size_t bytes_;
  const uint32_t max_;
  mutable std::mutex mu_;
  std::vector<uint8_t *> free_;
  uint32_t alive_ = 0;
};

// One kernel record (CONCURRENT_KERNEL or KERNEL) of a buffer: the fields delivery reads, and
// the record itself, which is ours until the buffer goes back to the pool (delivered as is).
struct KernelRecord {
  CUpti_Activity *record;
  const char *name;
  uint32_t correlation_id;
  uint32_t graph_id;
  uint64_t start, end;
  uint32_t device_id, stream_id;
  uint64_t graph_node_id;
  // Rewrites the correlation ID in the record itself (consumers read the record).
  void set_correlation_id(uint32_t id);
  // Points the record's name at `n` (a name a consumer can keep whole, consumer_names.h).
  void set_name(const char *n);
};

struct BufferWalk {
  uint64_t kernel_records = 0;  // handed to the handler
  // cuptiActivityGetNextRecord failed before the end of the buffer: the rest is unread.
  bool cut_short = false;
  CUptiResult error = CUPTI_SUCCESS;  // what it returned then
};

using KernelRecordHandler = void (*)(void *context, KernelRecord &record);

// Walks the valid_size bytes of a completed buffer with cuptiActivityGetNextRecord and calls
// handler for every kernel record, in the buffer's order; other kinds are skipped.
BufferWalk walk_kernel_records(const CuptiApi &cupti, uint8_t *buffer, size_t valid_size,
                               KernelRecordHandler handler, void *context);

// The same with any callable (a lambda): no allocation, one indirect call per record.
template <typename F>
BufferWalk walk_kernel_records(const CuptiApi &cupti, uint8_t *buffer, size_t valid_size,
                               F &&handler) {
  return walk_kernel_records(
      cupti, buffer, valid_size,
      [](void *f, KernelRecord &r) { (*static_cast<std::remove_reference_t<F> *>(f))(r); },
      static_cast<void *>(&handler));
}

}  // namespace parcagpu
