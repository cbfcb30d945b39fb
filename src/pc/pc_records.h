// The data side of PC sampling, apart from the CUPTI calls (pc_sampling.h): the stall-reason
// table a consumer gets, and the buffer CUPTI's PC records are drained into and handed to
// consumers from. No CUPTI calls here; unit-tested in tests/unit/lib/pc_records_test.cc.
//
// The consumer's contract (docs/probe-abi.md, include/parcagpu/abi.h): pc_sample_batch carries
// pointers to CUpti_PCSamplingPCData records of CUPTI 12.4+ (60 bytes read, correlationId
// last); from each it reads up to 128 bytes of functionName and a fixed
// PARCAGPU_STALL_REASON_MAX * 8 bytes from stallReason. Every one of those reads must succeed or
// the rest of the firing is lost, so records live in our buffer, every stall-reason array has
// room for PARCAGPU_STALL_REASON_MAX entries, and functionName points at our own copy of the
// name with at least 128 readable bytes (a name longer than the consumer keeps: its stand-in,
// consumer_names.h).
#pragma once

#include <cupti_pcsampling.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/consumer_names.h"
#include "parcagpu/abi.h"

namespace parcagpu {

// The stall reasons CUPTI offers for a device, and which of them are collected.
//
// CUPTI 13 on an H100 offers 40 "reasons": 19 stall reasons proper (..._long_scoreboard,
// ..._selected, ...), a "_not_issued" twin of each (the same sample again when the warp was not
// issued) and two counters (smsp__pcsamp_sample_count, smsp__pcsamp_samples_data_dropped).
// A consumer adds up the samples of a PC over its reasons, so collecting the twins and counters
// would count each sample two or three times: only the reasons proper are collected.
class StallReasonTable {
 public:
  // From cuptiPCSamplingGetStallReasons' parallel arrays.
  void build(size_t count, const uint32_t *indices, const char *const *names);

  // PARCAGPU_STALL_REASON_MAX names of PARCAGPU_STALL_REASON_NAME_LEN bytes, NUL-padded,
  // indexed by stall-reason index; only collected reasons are named.
  const char *blob() const { return blob_; }
  // The indices to configure CUPTI with (CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON).
  const std::vector<uint32_t> &collected() const { return collected_; }
  size_t offered() const { return offered_; }
  // Offered but unusable: an index >= PARCAGPU_STALL_REASON_MAX (a consumer could not name it).
  size_t unusable() const { return unusable_; }
  bool empty() const { return collected_.empty(); }

  // Whether a reason of this name is collected (not a "_not_issued" twin nor a counter).
  static bool is_reason_proper(const char *name);

 private:
  char blob_[PARCAGPU_STALL_REASON_MAX * PARCAGPU_STALL_REASON_NAME_LEN] = {};
  std::vector<uint32_t> collected_;
  size_t offered_ = 0;
  size_t unusable_ = 0;
};

// What one drained buffer held.
struct PcBatchTally {
  size_t records = 0;
  uint64_t samples = 0;       // sum of the stall-reason sample counts
  uint64_t pairs = 0;         // (PC, stall reason) pairs with samples: what a consumer counts
  uint64_t uncorrelated = 0;  // records with correlationId 0 (gpu_only ones included)
  size_t gpu_only = 0;        // their launch was not announced: published with correlationId 0
  uint64_t gpu_only_samples = 0;
};

// A CUpti_PCSamplingData with room for `capacity` PC records, each with a stall-reason array
// of PARCAGPU_STALL_REASON_MAX entries, and the pointer array pc_sample_batch carries.
class PcRecordBuffer {
 public:
  explicit PcRecordBuffer(size_t capacity);
  PcRecordBuffer(const PcRecordBuffer &) = delete;
  PcRecordBuffer &operator=(const PcRecordBuffer &) = delete;

  // What cuptiPCSamplingGetData fills (collectNumPcs = capacity). reset() before each call.
  CUpti_PCSamplingData *data() { return &data_; }
  void reset();
  size_t capacity() const { return records_.size(); }

  // After a drain: points each record's functionName at an interned copy, fills ptrs() with the
  // records (at most capacity, so at most one firing of PARCAGPU_PC_SAMPLE_BATCH_MAX when
  // capacity is that) and adds them up.
  // Records whose correlation ID `announced` says no to get correlation ID 0 (counted): no
  // launch stack will come for them, and the consumer reports ID 0 at once as a GPU-only stack
  // where it would hold a nonzero ID and drop it. Nothing is left out.
  PcBatchTally prepare(FunctionNames &names, bool (*announced)(const void *ctx, uint32_t) = nullptr,
                       const void *ctx = nullptr);
  const void **ptrs() { return ptrs_.data(); }

 private:
  CUpti_PCSamplingData data_{};
  std::vector<CUpti_PCSamplingPCData> records_;
  std::vector<CUpti_PCSamplingStallReason> stall_;  // capacity * PARCAGPU_STALL_REASON_MAX
  std::vector<const void *> ptrs_;
};

static_assert(offsetof(CUpti_PCSamplingPCData, correlationId) + sizeof(uint32_t) ==
                  PARCAGPU_PC_SAMPLE_RECORD_SIZE,
              "the consumer reads 60 bytes ending with correlationId (CUPTI 12.4+ layout)");
static_assert(sizeof(CUpti_PCSamplingStallReason) * PARCAGPU_STALL_REASON_MAX == 512,
              "the consumer copies 512 bytes of stall reasons");

}  // namespace parcagpu
