// The activity kinds the library collects, as one table: for each CUPTI activity kind, which
// consumers want it (so when it is enabled), which record family decodes it and which probe
// delivers it. A new kind is an entry here and a `case` in the buffer walk (activity_buffers.cc)
// with its decoder; enabling (ActivitySwitch) and delivery (ActivityCollector) follow the table.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>

#include "base/consumers.h"
#include "parcagpu/abi.h"

namespace parcagpu {

// How a kind's records are decoded and delivered.
enum class RecordFamily : uint8_t {
  Kernel,  // KernelRecord, activity_batch / kernel_executed
  Memory,  // MemoryRecord (copies and fills), memory_batch
};

struct ActivityKindEntry {
  CUpti_ActivityKind kind;
  const char *name;
  RecordFamily family;
};

inline constexpr ActivityKindEntry kActivityKinds[] = {
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL", RecordFamily::Kernel},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY", RecordFamily::Memory},
    {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET", RecordFamily::Memory},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2", RecordFamily::Memory},
};

// Whether the consumers attached now want a family's records.
constexpr bool family_wanted(RecordFamily f, const Consumers &c) {
  return f == RecordFamily::Kernel ? c.wants_kernels() : c.wants_memory();
}

// A bit per entry of kActivityKinds: the kinds a set of consumers wants.
using KindMask = uint32_t;
constexpr KindMask kind_bit(size_t entry) { return KindMask{1} << entry; }
constexpr KindMask wanted_kinds(const Consumers &c) {
  KindMask m = 0;
  for (size_t i = 0; i < sizeof kActivityKinds / sizeof kActivityKinds[0]; ++i)
    if (family_wanted(kActivityKinds[i].family, c)) m |= kind_bit(i);
  return m;
}
constexpr KindMask family_kinds(RecordFamily f) {
  KindMask m = 0;
  for (size_t i = 0; i < sizeof kActivityKinds / sizeof kActivityKinds[0]; ++i)
    if (kActivityKinds[i].family == f) m |= kind_bit(i);
  return m;
}

// A copy or fill as memory_batch delivers it: the probe ABI's own layout (abi.h,
// PARCAGPU_MREC_*), the same whatever CUPTI record it was decoded from.
struct MemoryRecord {
  uint32_t kind;
  uint8_t copy_kind, src_kind, dst_kind, flags;
  uint64_t bytes;
  uint64_t start, end;
  uint32_t device_id, stream_id;
  uint32_t correlation_id;
  uint32_t peer_device_id;
  // Not in CUPTI's record: the launch path's measure of the call, set at delivery
  // (MemoryDelivery, from CorrelationTracker's BlockedCopies).
  uint64_t cpu_blocked_ns = 0;
};
static_assert(sizeof(MemoryRecord) == PARCAGPU_MREC_SIZE);
static_assert(offsetof(MemoryRecord, copy_kind) == PARCAGPU_MREC_OFF_COPY_KIND);
static_assert(offsetof(MemoryRecord, flags) == PARCAGPU_MREC_OFF_FLAGS);
static_assert(offsetof(MemoryRecord, bytes) == PARCAGPU_MREC_OFF_BYTES);
static_assert(offsetof(MemoryRecord, start) == PARCAGPU_MREC_OFF_START);
static_assert(offsetof(MemoryRecord, end) == PARCAGPU_MREC_OFF_END);
static_assert(offsetof(MemoryRecord, device_id) == PARCAGPU_MREC_OFF_DEVICE_ID);
static_assert(offsetof(MemoryRecord, stream_id) == PARCAGPU_MREC_OFF_STREAM_ID);
static_assert(offsetof(MemoryRecord, correlation_id) == PARCAGPU_MREC_OFF_CORRELATION_ID);
static_assert(offsetof(MemoryRecord, peer_device_id) == PARCAGPU_MREC_OFF_PEER_DEVICE_ID);
static_assert(offsetof(MemoryRecord, cpu_blocked_ns) == PARCAGPU_MREC_OFF_CPU_BLOCKED);

// The decoders of the Memory family (activity_kinds.cc): false if `record` is not of that kind.
bool decode_memcpy(const CUpti_Activity *record, MemoryRecord *out);
bool decode_memcpy_peer(const CUpti_Activity *record, MemoryRecord *out);
bool decode_memset(const CUpti_Activity *record, MemoryRecord *out);

}  // namespace parcagpu
