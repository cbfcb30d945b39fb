#include "pc/pc_records.h"

#include <algorithm>
#include <cstring>

namespace parcagpu {

bool StallReasonTable::is_reason_proper(const char *name) {
  if (!name || !*name) return false;
  static const char kTwin[] = "_not_issued";
  const size_t n = std::strlen(name), t = sizeof(kTwin) - 1;
  if (n >= t && std::strcmp(name + n - t, kTwin) == 0) return false;
  // The counters are not reasons: every sample, and the dropped ones.
  return std::strstr(name, "pcsamp_sample_count") == nullptr &&
         std::strstr(name, "samples_data_dropped") == nullptr;
}

void StallReasonTable::build(size_t count, const uint32_t *indices, const char *const *names) {
  std::memset(blob_, 0, sizeof blob_);
  collected_.clear();
  offered_ = count;
  unusable_ = 0;
  for (size_t i = 0; i < count; ++i) {
    const char *name = names ? names[i] : nullptr;
    if (!is_reason_proper(name)) continue;
    if (indices[i] >= PARCAGPU_STALL_REASON_MAX) {
      unusable_++;
      continue;
    }
    char *slot = blob_ + indices[i] * PARCAGPU_STALL_REASON_NAME_LEN;
    std::strncpy(slot, name, PARCAGPU_STALL_REASON_NAME_LEN - 1);
    collected_.push_back(indices[i]);
  }
  std::sort(collected_.begin(), collected_.end());
}

PcRecordBuffer::PcRecordBuffer(size_t capacity)
    : records_(capacity), stall_(capacity * PARCAGPU_STALL_REASON_MAX), ptrs_(capacity) {
  reset();
}

void PcRecordBuffer::reset() {
  data_ = CUpti_PCSamplingData{};
  data_.size = sizeof(CUpti_PCSamplingData);
  data_.collectNumPcs = records_.size();
  data_.pPcData = records_.data();
  for (size_t i = 0; i < records_.size(); ++i) {
    CUpti_PCSamplingPCData &r = records_[i];
    r = CUpti_PCSamplingPCData{};
    r.size = sizeof(CUpti_PCSamplingPCData);  // CUPTI fills correlationId only if it fits
    r.stallReason = &stall_[i * PARCAGPU_STALL_REASON_MAX];
  }
}

PcBatchTally PcRecordBuffer::prepare(FunctionNames &names,
                                     bool (*announced)(const void *ctx, uint32_t),
                                     const void *ctx) {
  PcBatchTally t;
  const size_t n = std::min(data_.totalNumPcs, records_.size());
  size_t kept = 0;
  for (size_t i = 0; i < n; ++i) {
    CUpti_PCSamplingPCData &r = records_[i];
    r.functionName = const_cast<char *>(names.intern(r.functionName));
    // CUPTI writes at most as many reasons as were configured, never more than the array holds;
    // a count past it would make the consumer use garbage.
    if (r.stallReasonCount > PARCAGPU_STALL_REASON_MAX)
      r.stallReasonCount = PARCAGPU_STALL_REASON_MAX;
    r.stallReason = &stall_[i * PARCAGPU_STALL_REASON_MAX];
    uint64_t pairs = 0, samples = 0;
    for (size_t s = 0; s < r.stallReasonCount; ++s) {
      if (r.stallReason[s].samples == 0) continue;
      pairs++;
      samples += r.stallReason[s].samples;
    }
    if (announced && r.correlationId != 0 && !announced(ctx, r.correlationId)) {
      // No CPU stack will come for this ID: published with ID 0, which the consumer reports at
      // once as a GPU-only stack, where a nonzero ID never announced would be held and dropped.
      r.correlationId = 0;
      t.gpu_only++;
      t.gpu_only_samples += samples;
    }
    t.pairs += pairs;
    t.samples += samples;
    if (r.correlationId == 0) t.uncorrelated++;
    ptrs_[kept++] = &r;
  }
  t.records = kept;
  return t;
}

}  // namespace parcagpu
