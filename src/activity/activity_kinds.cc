#include "activity/activity_kinds.h"

#include <cupti_activity.h>

namespace parcagpu {

// The fields read below sit at the same offsets in every CUPTI version the library supports
// (CUpti_ActivityMemcpy5/6, MemcpyPtoP3/4, Memset3/4 share their heads).
bool decode_memcpy(const CUpti_Activity *record, MemoryRecord *out) {
  if (record->kind != CUPTI_ACTIVITY_KIND_MEMCPY) return false;
  const auto *r = reinterpret_cast<const CUpti_ActivityMemcpy6 *>(record);
  *out =
      MemoryRecord{PARCAGPU_KIND_MEMCPY,
                   r->copyKind,
                   r->srcKind,
                   r->dstKind,
                   static_cast<uint8_t>(
                       r->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC ? PARCAGPU_MREC_FLAG_ASYNC : 0),
                   r->bytes,
                   r->start,
                   r->end,
                   r->deviceId,
                   r->streamId,
                   r->correlationId,
                   r->deviceId};
  return true;
}

bool decode_memcpy_peer(const CUpti_Activity *record, MemoryRecord *out) {
  if (record->kind != CUPTI_ACTIVITY_KIND_MEMCPY2) return false;
  const auto *r = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4 *>(record);
  const uint32_t peer = r->srcDeviceId == r->deviceId ? r->dstDeviceId : r->srcDeviceId;
  *out =
      MemoryRecord{PARCAGPU_KIND_MEMCPY2,
                   r->copyKind,
                   r->srcKind,
                   r->dstKind,
                   static_cast<uint8_t>(
                       r->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC ? PARCAGPU_MREC_FLAG_ASYNC : 0),
                   r->bytes,
                   r->start,
                   r->end,
                   r->deviceId,
                   r->streamId,
                   r->correlationId,
                   peer};
  return true;
}

bool decode_memset(const CUpti_Activity *record, MemoryRecord *out) {
  if (record->kind != CUPTI_ACTIVITY_KIND_MEMSET) return false;
  const auto *r = reinterpret_cast<const CUpti_ActivityMemset4 *>(record);
  const auto memory = static_cast<uint8_t>(r->memoryKind);
  *out =
      MemoryRecord{PARCAGPU_KIND_MEMSET,
                   0,
                   memory,
                   memory,
                   static_cast<uint8_t>(
                       r->flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC ? PARCAGPU_MREC_FLAG_ASYNC : 0),
                   r->bytes,
                   r->start,
                   r->end,
                   r->deviceId,
                   r->streamId,
                   r->correlationId,
                   r->deviceId};
  return true;
}

}  // namespace parcagpu
