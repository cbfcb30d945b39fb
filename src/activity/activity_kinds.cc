#include "activity/activity_kinds.h"

#include <cupti_activity.h>

namespace parcagpu {
namespace {

// The fields every copy and fill record has, at the same offsets in every CUPTI version the
// library supports (CUpti_ActivityMemcpy5/6, MemcpyPtoP3/4, Memset3/4 share their heads); the
// rest differs by kind and comes from the decoder.
template <typename CuptiRecord>
MemoryRecord memory_record(uint32_t kind, const CuptiRecord &r, uint8_t copy_kind, uint8_t src,
                           uint8_t dst, bool async, uint32_t peer) {
  return MemoryRecord{kind,
                      copy_kind,
                      src,
                      dst,
                      static_cast<uint8_t>(async ? PARCAGPU_MREC_FLAG_ASYNC : 0),
                      r.bytes,
                      r.start,
                      r.end,
                      r.deviceId,
                      r.streamId,
                      r.correlationId,
                      peer};
}

}  // namespace

bool decode_memcpy(const CUpti_Activity *record, MemoryRecord *out) {
  if (record->kind != CUPTI_ACTIVITY_KIND_MEMCPY) return false;
  const auto &r = *reinterpret_cast<const CUpti_ActivityMemcpy6 *>(record);
  *out = memory_record(PARCAGPU_KIND_MEMCPY, r, r.copyKind, r.srcKind, r.dstKind,
                       r.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC, r.deviceId);
  return true;
}

// A copy between two GPUs: the peer is whichever end is not the device that reports it.
bool decode_memcpy_peer(const CUpti_Activity *record, MemoryRecord *out) {
  if (record->kind != CUPTI_ACTIVITY_KIND_MEMCPY2) return false;
  const auto &r = *reinterpret_cast<const CUpti_ActivityMemcpyPtoP4 *>(record);
  const uint32_t peer = r.srcDeviceId == r.deviceId ? r.dstDeviceId : r.srcDeviceId;
  *out = memory_record(PARCAGPU_KIND_MEMCPY2, r, r.copyKind, r.srcKind, r.dstKind,
                       r.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC, peer);
  return true;
}

// A fill has one memory: it is both the source and the destination kind, and no copy kind.
bool decode_memset(const CUpti_Activity *record, MemoryRecord *out) {
  if (record->kind != CUPTI_ACTIVITY_KIND_MEMSET) return false;
  const auto &r = *reinterpret_cast<const CUpti_ActivityMemset4 *>(record);
  const auto memory = static_cast<uint8_t>(r.memoryKind);
  *out = memory_record(PARCAGPU_KIND_MEMSET, r, 0, memory, memory,
                       r.flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC, r.deviceId);
  return true;
}

}  // namespace parcagpu
