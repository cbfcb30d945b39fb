// The data side of PC sampling (pc_records.h): the stall-reason table a consumer is given (reasons
// proper only, names cut to the slot) and the buffer CUPTI's records are drained into and handed
// to pc_sample_batch from (our copy of each name, or its stand-in; every stall array ours and
// PARCAGPU_STALL_REASON_MAX long; IDs of launches not announced sent as 0; never more than the
// buffer holds).
#include "pc/pc_records.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace parcagpu {
namespace {

const CUpti_PCSamplingPCData &record(PcRecordBuffer &buf, size_t i) {
  return *static_cast<const CUpti_PCSamplingPCData *>(buf.ptrs()[i]);
}

// What CUPTI 13 offered on the H100 (a subset, in its order).
const uint32_t kIdx[] = {39, 37, 36, 30, 31, 14, 15, 0, 1, 28, 29, 16, 70};
const char *const kNames[] = {
    "smsp__pcsamp_warps_issue_stalled_warpgroup_arrive_not_issued",
    "smsp__pcsamp_warps_issue_stalled_wait_not_issued",
    "smsp__pcsamp_warps_issue_stalled_wait",
    "smsp__pcsamp_warps_issue_stalled_short_scoreboard",
    "smsp__pcsamp_warps_issue_stalled_short_scoreboard_not_issued",
    "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
    "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued",
    "smsp__pcsamp_sample_count",
    "smsp__pcsamp_samples_data_dropped",
    "smsp__pcsamp_warps_issue_stalled_selected",
    "smsp__pcsamp_warps_issue_stalled_selected_not_issued",
    "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle",
    "smsp__pcsamp_warps_issue_stalled_some_future_reason",  // index 70: past the blob
};

TEST(StallReasonTable, CollectsReasonsProperOnly) {
  StallReasonTable t;
  t.build(sizeof kIdx / sizeof kIdx[0], kIdx, kNames);
  EXPECT_EQ(t.offered(), 13u);
  EXPECT_EQ(t.collected(), (std::vector<uint32_t>{14, 16, 28, 30, 36}));
  EXPECT_EQ(t.unusable(), 1u);
  EXPECT_STREQ(t.blob() + 14 * PARCAGPU_STALL_REASON_NAME_LEN,
               "smsp__pcsamp_warps_issue_stalled_long_scoreboard");
  EXPECT_STREQ(t.blob() + 36 * PARCAGPU_STALL_REASON_NAME_LEN,
               "smsp__pcsamp_warps_issue_stalled_wait");
  // Twins and counters are not named: a consumer never sees samples for them.
  EXPECT_EQ(t.blob()[15 * PARCAGPU_STALL_REASON_NAME_LEN], '\0');
  EXPECT_EQ(t.blob()[0], '\0');
}

TEST(StallReasonTable, LongNamesAreTruncatedAndTerminated) {
  const std::string name = "smsp__pcsamp_warps_issue_stalled_" + std::string(100, 'x');
  const char *names[] = {name.c_str()};
  const uint32_t idx[] = {63};
  StallReasonTable t;
  t.build(1, idx, names);
  const char *slot = t.blob() + 63 * PARCAGPU_STALL_REASON_NAME_LEN;
  EXPECT_EQ(std::strlen(slot), PARCAGPU_STALL_REASON_NAME_LEN - 1u);
}

TEST(StallReasonTable, NoNameIsNoReasonAndARebuildForgetsTheOldTable) {
  EXPECT_FALSE(StallReasonTable::is_reason_proper(nullptr));
  EXPECT_FALSE(StallReasonTable::is_reason_proper(""));
  EXPECT_FALSE(StallReasonTable::is_reason_proper("_not_issued"));
  EXPECT_TRUE(StallReasonTable::is_reason_proper("smsp__pcsamp_warps_issue_stalled_wait"));
  StallReasonTable t;
  t.build(sizeof kIdx / sizeof kIdx[0], kIdx, kNames);
  ASSERT_FALSE(t.empty());
  // CUPTI gave indices but no names: nothing can be named, so nothing is collected.
  t.build(3, kIdx, nullptr);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.offered(), 3u);
  EXPECT_EQ(t.unusable(), 0u);
  for (size_t i = 0; i < PARCAGPU_STALL_REASON_MAX * PARCAGPU_STALL_REASON_NAME_LEN; ++i)
    ASSERT_EQ(t.blob()[i], '\0') << "byte " << i << " of the old table left in the blob";
}

TEST(PcRecordBuffer, RecordsAreWhatTheConsumerReads) {
  PcRecordBuffer buf(4);
  FunctionNames names;
  CUpti_PCSamplingData *d = buf.data();
  EXPECT_EQ(d->collectNumPcs, 4u);
  EXPECT_EQ(sizeof(CUpti_PCSamplingPCData), 64u);
  // As CUPTI fills them: a short name it owns, counts in the stall arrays we gave it.
  char short_name[] = "_Z1kPf";
  d->totalNumPcs = 2;
  for (int i = 0; i < 2; ++i) {
    CUpti_PCSamplingPCData &r = d->pPcData[i];
    EXPECT_EQ(r.size, sizeof(CUpti_PCSamplingPCData));
    r.functionName = short_name;
    r.stallReasonCount = 2;
    r.stallReason[0] = {14, 5};
    r.stallReason[1] = {28, 0};
    r.correlationId = 100 + i;
    r.pcOffset = 16 * i;
  }
  d->pPcData[1].stallReasonCount = 1000;  // never past the array
  const PcBatchTally t = buf.prepare(names);
  EXPECT_EQ(t.records, 2u);
  EXPECT_EQ(t.pairs, 1u + 1u);
  for (int i = 0; i < 2; ++i) {
    const auto *r = static_cast<const CUpti_PCSamplingPCData *>(buf.ptrs()[i]);
    EXPECT_EQ(r, &d->pPcData[i]);
    EXPECT_NE(r->functionName, short_name) << "our copy, not CUPTI's";
    EXPECT_STREQ(r->functionName, "_Z1kPf");
    for (size_t b = 7; b < kFunctionNameReadable; ++b) EXPECT_EQ(r->functionName[b], 0);
    EXPECT_LE(r->stallReasonCount, static_cast<size_t>(PARCAGPU_STALL_REASON_MAX));
    // The consumer copies 64 entries from every stall array: they are ours and that long.
    EXPECT_EQ(r->stallReason, d->pPcData[0].stallReason + i * PARCAGPU_STALL_REASON_MAX);
  }
  EXPECT_EQ(record(buf, 0).functionName,
            record(buf, 1).functionName);
  buf.reset();
  EXPECT_EQ(buf.data()->totalNumPcs, 0u);
  EXPECT_NE(buf.data()->pPcData[0].stallReason, nullptr);
}

TEST(PcRecordBuffer, ALongFunctionNameGoesOutAsItsStandIn) {
  PcRecordBuffer buf(2);
  FunctionNames names;
  std::string name = "_ZN" + std::string(300, 'q') + "1kEv";
  CUpti_PCSamplingData *d = buf.data();
  d->totalNumPcs = 1;
  d->pPcData[0].functionName = name.data();
  d->pPcData[0].stallReasonCount = 1;
  d->pPcData[0].stallReason[0] = {14, 5};
  buf.prepare(names);
  const auto *r = static_cast<const CUpti_PCSamplingPCData *>(buf.ptrs()[0]);
  EXPECT_EQ(std::strlen(r->functionName), size_t{PARCAGPU_PC_FUNCTION_NAME_MAX});
  unsigned long long hash = 0;
  EXPECT_TRUE(parcagpu_name_is_stand_in(r->functionName, std::strlen(r->functionName), &hash));
  EXPECT_EQ(hash, parcagpu_name_hash(name.c_str()));
}

TEST(PcRecordBuffer, RecordsOfLaunchesNotAnnouncedGoOutGpuOnly) {
  // Kernels still running when a window started are sampled too (P6), and launches inside a
  // window are announced only if the coin picks them: no stack will come for their IDs, so
  // they are published with ID 0 (the consumer's GPU-only stack) and counted, never left out.
  PcRecordBuffer buf(4);
  FunctionNames names;
  CUpti_PCSamplingData *d = buf.data();
  char name[] = "_Z1kPf";
  d->totalNumPcs = 3;
  const uint32_t ids[] = {7, 42, 0};  // 7 announced, 42 not, 0 uncorrelated
  for (int i = 0; i < 3; ++i) {
    CUpti_PCSamplingPCData &r = d->pPcData[i];
    r.functionName = name;
    r.stallReasonCount = 1;
    r.stallReason[0] = {14, static_cast<uint32_t>(10 * (i + 1))};
    r.correlationId = ids[i];
  }
  auto announced = [](const void *, uint32_t id) { return id == 7; };
  const PcBatchTally t = buf.prepare(names, announced, nullptr);
  EXPECT_EQ(t.records, 3u);
  EXPECT_EQ(t.gpu_only, 1u);
  EXPECT_EQ(t.gpu_only_samples, 20u);
  EXPECT_EQ(t.uncorrelated, 2u);
  EXPECT_EQ(t.samples, 10u + 20u + 30u);
  EXPECT_EQ(record(buf, 0).correlationId, 7u);
  EXPECT_EQ(record(buf, 1).correlationId, 0u);
  EXPECT_EQ(record(buf, 2).correlationId, 0u);
}


TEST(PcRecordBuffer, NeverMoreRecordsThanItHolds) {
  // totalNumPcs is CUPTI's word; the pointer array and the stall arrays hold `capacity`.
  PcRecordBuffer buf(2);
  FunctionNames names;
  char name[] = "_Z1kv";
  CUpti_PCSamplingData *d = buf.data();
  for (int i = 0; i < 2; ++i) d->pPcData[i].functionName = name;
  d->totalNumPcs = 5;
  EXPECT_EQ(buf.prepare(names).records, 2u);
  EXPECT_EQ(buf.capacity(), 2u);
}

TEST(PcRecordBuffer, ARecordWithNoNameGoesOutWithAnEmptyOneTheConsumerCanRead) {
  PcRecordBuffer buf(1);
  FunctionNames names;
  buf.data()->totalNumPcs = 1;
  buf.data()->pPcData[0].functionName = nullptr;
  ASSERT_EQ(buf.prepare(names).records, 1u);
  const char *name = record(buf, 0).functionName;
  ASSERT_NE(name, nullptr);
  for (size_t b = 0; b < kFunctionNameReadable; ++b) EXPECT_EQ(name[b], 0) << b;
}

TEST(PcRecordBuffer, ResetGivesCuptiEveryRecordAfresh) {
  PcRecordBuffer buf(3);
  FunctionNames names;
  CUpti_PCSamplingData *d = buf.data();
  CUpti_PCSamplingStallReason *const stall0 = d->pPcData[0].stallReason;
  char name[] = "_Z1kv";
  d->totalNumPcs = 3;
  for (int i = 0; i < 3; ++i) {
    d->pPcData[i].functionName = name;
    d->pPcData[i].correlationId = 9;
    d->pPcData[i].stallReasonCount = 1;
  }
  d->pPcData[2].stallReason = nullptr;  // whatever CUPTI left there
  d->remainingNumPcs = 4;
  buf.prepare(names);
  buf.reset();
  EXPECT_EQ(d, buf.data());
  EXPECT_EQ(d->size, sizeof(CUpti_PCSamplingData));
  EXPECT_EQ(d->collectNumPcs, 3u);
  EXPECT_EQ(d->totalNumPcs, 0u);
  EXPECT_EQ(d->remainingNumPcs, 0u);
  for (size_t i = 0; i < 3; ++i) {
    const CUpti_PCSamplingPCData &r = d->pPcData[i];
    EXPECT_EQ(r.size, sizeof(CUpti_PCSamplingPCData)) << "CUPTI fills correlationId only if it fits";
    EXPECT_EQ(r.correlationId, 0u);
    EXPECT_EQ(r.stallReasonCount, 0u);
    EXPECT_EQ(r.functionName, nullptr);
    EXPECT_EQ(r.stallReason, stall0 + i * PARCAGPU_STALL_REASON_MAX);
  }
}

}  // namespace
}  // namespace parcagpu
