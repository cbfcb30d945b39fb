// One thread's NVTX events waiting for their nvtx_event_batch firing: the 56-byte records of the
// probe ABI (include/parcagpu/abi.h, PARCAGPU_NVTX_*), the pointer array the probe hands over,
// and the library's own copy of each message. The application may free or overwrite its string
// as soon as its NVTX call returns, and the batch fires later (when full, before the thread's
// next announced launch, ...): a record's message points at the copy, which stays as it is until
// the batch is cleared after its firing. Pure: no clock, no probe, no thread of its own.
#pragma once

#include <cstdint>

#include "parcagpu/abi.h"

namespace parcagpu {

// The record as consumers read it (upstream aec9dd5's struct nvtx_event).
struct NvtxEventRecord {
  uint64_t timestamp_ns;
  uint32_t tid;
  uint32_t correlation_id;
  uint32_t domain_id;
  uint16_t kind;
  uint16_t flags;
  uint32_t color;
  uint32_t device_id;
  uint64_t payload;
  uint64_t range_id;
  const char *message;
};
static_assert(sizeof(NvtxEventRecord) == PARCAGPU_NVTX_REC_SIZE);
static_assert(offsetof(NvtxEventRecord, tid) == PARCAGPU_NVTX_OFF_TID);
static_assert(offsetof(NvtxEventRecord, correlation_id) == PARCAGPU_NVTX_OFF_CORRELATION_ID);
static_assert(offsetof(NvtxEventRecord, domain_id) == PARCAGPU_NVTX_OFF_DOMAIN_ID);
static_assert(offsetof(NvtxEventRecord, kind) == PARCAGPU_NVTX_OFF_KIND);
static_assert(offsetof(NvtxEventRecord, flags) == PARCAGPU_NVTX_OFF_FLAGS);
static_assert(offsetof(NvtxEventRecord, color) == PARCAGPU_NVTX_OFF_COLOR);
static_assert(offsetof(NvtxEventRecord, device_id) == PARCAGPU_NVTX_OFF_DEVICE_ID);
static_assert(offsetof(NvtxEventRecord, payload) == PARCAGPU_NVTX_OFF_PAYLOAD);
static_assert(offsetof(NvtxEventRecord, range_id) == PARCAGPU_NVTX_OFF_RANGE_ID);
static_assert(offsetof(NvtxEventRecord, message) == PARCAGPU_NVTX_OFF_MESSAGE);

// A message as NVTX gave it: an ASCII (UTF-8) string, a wide one (wchar_t, UTF-32 here), or one
// the library cannot read (a registered string handle, an unknown message type): then empty.
struct NvtxText {
  const char *ascii = nullptr;
  const wchar_t *wide = nullptr;
  bool unreadable = false;
};

class NvtxBatch {
 public:
  static constexpr uint32_t kCapacity = PARCAGPU_NVTX_BATCH_MAX;
  static constexpr uint32_t kMessageBytes = PARCAGPU_NVTX_MESSAGE_MAX + 1;  // with the NUL

  // What add() did to the message.
  enum class Copied : uint8_t { kWhole, kTruncated };

  // Appends `rec` (its message pointer is set here, to the batch's copy of `text`). The batch
  // must not be full. *copied says whether the message was cut to PARCAGPU_NVTX_MESSAGE_MAX bytes.
  void add(const NvtxEventRecord &rec, const NvtxText &text, Copied *copied);

  bool full() const { return count_ == kCapacity; }
  bool empty() const { return count_ == 0; }
  uint32_t count() const { return count_; }
  // The first pending event's timestamp (empty: 0).
  uint64_t oldest_ns() const { return count_ ? records_[0].timestamp_ns : 0; }
  // The probe's argument: count() pointers, each at a record.
  const void **pointers() { return pointers_; }
  const NvtxEventRecord &record(uint32_t i) const { return records_[i]; }
  // After the firing: the records and copies may be overwritten from now on.
  void clear() { count_ = 0; }

  // Copies `text` into `out` (kMessageBytes), NUL-terminated; wide text as UTF-8. False if cut.
  static bool copy_text(const NvtxText &text, char *out);

 private:
  uint32_t count_ = 0;
  NvtxEventRecord records_[kCapacity];
  const void *pointers_[kCapacity];
  char messages_[kCapacity][kMessageBytes];
};

}  // namespace parcagpu
