// PcPublisher with a recorder for its pc_sample_batch probe and a fake PC Sampling API table for
// its drains: records go out in order, in firings of at most kPcFiringRecords (and never more
// than the consumer's PARCAGPU_PC_SAMPLE_BATCH_MAX), from a copy of CUPTI's buffer; records of
// launches not announced go out with ID 0; every record not fired is counted (no consumer, the
// last consumer gone while they waited, the queue full: said once); Get Data until CUPTI has no
// more, and a failed Get Data handed back, not thrown.
#include "pc/pc_publish.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "fake_pc_cupti.h"
#include "pc/pc_coverage.h"
#include "pc/pc_launch_state.h"
#include "pc/pc_records.h"
#include "pc/pc_session.h"
#include "pc/pc_stats.h"
#include "repeated_errors.h"

namespace parcagpu {
namespace {

constexpr const char kKernel[] = "_Z6kernelPf";

// What the probe was handed: each firing's count, and a copy of each record as the consumer
// reads it then (its name as a string, its first stall reason).
struct Fired {
  uint32_t correlation_id;
  uint64_t pc_offset;
  std::string name;
  uint32_t first_stall_samples;
};

struct BatchProbe {
  std::mutex mu;
  std::condition_variable cv;
  unsigned short consumers = 1;
  std::vector<uint32_t> counts;
  std::vector<Fired> records;
  bool hold = false;     // the next firing waits inside the probe until released
  bool holding = false;  // a firing waits now
};
BatchProbe *g_probe = nullptr;

unsigned short batch_consumers() {
  std::lock_guard<std::mutex> lock(g_probe->mu);
  return g_probe->consumers;
}

void fire_batch(const void **records, uint32_t count) {
  std::unique_lock<std::mutex> lock(g_probe->mu);
  g_probe->counts.push_back(count);
  for (uint32_t i = 0; i < count; ++i) {
    const auto *r = static_cast<const CUpti_PCSamplingPCData *>(records[i]);
    g_probe->records.push_back(
        {r->correlationId, r->pcOffset, r->functionName, r->stallReason[0].samples});
  }
  if (!g_probe->hold) return;
  g_probe->holding = true;
  g_probe->cv.notify_all();
  g_probe->cv.wait(lock, [] { return !g_probe->hold; });
  g_probe->holding = false;
}

// A buffer as CUPTI fills it: n records of `name`, PC offsets 16 apart, IDs from `first_id` (0:
// all uncorrelated), record i with i + 1 samples of one stall reason.
void fill(PcRecordBuffer &buf, size_t n, uint32_t first_id, const char *name = kKernel) {
  CUpti_PCSamplingData *d = buf.data();
  d->totalNumPcs = n;
  for (size_t i = 0; i < n; ++i) {
    CUpti_PCSamplingPCData &r = d->pPcData[i];
    r.functionName = const_cast<char *>(name);
    r.pcOffset = 16 * i;
    r.correlationId = first_id == 0 ? 0 : first_id + static_cast<uint32_t>(i);
    r.stallReasonCount = 1;
    r.stallReason[0] = {14, static_cast<uint32_t>(i + 1)};
  }
}

class PcPublishTest : public ::testing::Test {
 protected:
  void SetUp() override { g_probe = &probe_; }

  void publish(PcRecordBuffer &buf) { pub_.publish(buf, stats_); }
  // Waits until a firing is held inside the probe.
  void wait_held() {
    std::unique_lock<std::mutex> lock(probe_.mu);
    probe_.cv.wait(lock, [this] { return probe_.holding; });
  }
  void release(unsigned short consumers) {
    std::lock_guard<std::mutex> lock(probe_.mu);
    probe_.consumers = consumers;
    probe_.hold = false;
    probe_.cv.notify_all();
  }
  void set_consumers(unsigned short n) {
    std::lock_guard<std::mutex> lock(probe_.mu);
    probe_.consumers = n;
  }
  // Everything queued fired, the firing thread's counts added.
  void finish() {
    pub_.finish();
    pub_.add_firing_stats(stats_);
  }

  BatchProbe probe_;  // outlives pub_, whose firing thread calls it
  PcLaunchState state_;
  PcCoverage coverage_;
  PcStats stats_;
  PcPublisher pub_{state_, &coverage_, {&batch_consumers, &fire_batch}};
};

TEST_F(PcPublishTest, RecordsGoOutInOrderInFiringsOfAtMostOneSliceFromACopy) {
  static_assert(kPcFiringRecords <= PARCAGPU_PC_SAMPLE_BATCH_MAX);
  PcRecordBuffer buf(300);
  fill(buf, 300, 1000);
  for (uint32_t id = 1000; id < 1300; ++id) state_.note_announced(id);
  probe_.hold = true;
  publish(buf);
  wait_held();
  // The next Get Data reuses CUPTI's buffer while the records still wait to be fired.
  buf.reset();
  fill(buf, 300, 5000, "_Z5otherv");
  release(1);
  finish();
  EXPECT_EQ(probe_.counts, (std::vector<uint32_t>{128, 128, 44}));
  ASSERT_EQ(probe_.records.size(), 300u);
  for (uint32_t i = 0; i < 300; ++i) {
    const Fired &f = probe_.records[i];
    EXPECT_EQ(f.correlation_id, 1000 + i);
    EXPECT_EQ(f.pc_offset, 16u * i);
    EXPECT_EQ(f.name, kKernel);
    EXPECT_EQ(f.first_stall_samples, i + 1);
  }
  EXPECT_EQ(stats_.records, 300u);
  EXPECT_EQ(stats_.pairs, 300u);
  EXPECT_EQ(stats_.samples, 300u * 301 / 2);
  EXPECT_EQ(stats_.batches, 3u);
  EXPECT_EQ(stats_.uncorrelated + stats_.gpu_only + stats_.unpublished + stats_.unfired, 0u);
}

TEST_F(PcPublishTest, WithNoConsumerNothingIsFiredAndEveryRecordIsCounted) {
  set_consumers(0);
  PcRecordBuffer buf(50);
  fill(buf, 50, 0);
  publish(buf);
  EXPECT_EQ(stats_.unpublished, 50u) << "counted at once, not queued";
  EXPECT_EQ(stats_.records, 50u);
  finish();
  EXPECT_TRUE(probe_.counts.empty());
  EXPECT_EQ(stats_.batches, 0u);
  EXPECT_EQ(stats_.unpublished, 50u);
}

TEST_F(PcPublishTest, RecordsWaitingWhenTheLastConsumerLeavesAreCountedNotFired) {
  PcRecordBuffer buf(300);
  fill(buf, 300, 0);
  probe_.hold = true;
  publish(buf);
  wait_held();
  release(0);  // the consumer detaches during the first firing
  finish();
  EXPECT_EQ(probe_.counts, (std::vector<uint32_t>{128}));
  EXPECT_EQ(stats_.batches, 1u);
  EXPECT_EQ(stats_.unpublished, 300u - 128u);
}

TEST_F(PcPublishTest, AFullQueueCountsTheRecordsUnfiredAndSaysSoOnce) {
  const uint64_t before = repeated_error_count("PC records not fired: the firing queue was full");
  PcRecordBuffer big(kPcQueuedRecordsMax), small(10);
  fill(big, kPcQueuedRecordsMax, 0);
  fill(small, 10, 0);
  probe_.hold = true;
  publish(big);
  wait_held();  // the queue holds kPcQueuedRecordsMax records until this firing returns
  testing::internal::CaptureStderr();
  publish(small);
  publish(small);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(stats_.unfired, 20u);
  EXPECT_EQ(repeated_error_count("PC records not fired: the firing queue was full"), before + 20);
  EXPECT_EQ(lines_saying(said, "PC records not fired"), before == 0 ? 1 : 0) << said;
  // The rest of the queue goes out paced (~1.4 s at the agent's rate) to no consumer: counted.
  release(0);
  finish();
  EXPECT_EQ(stats_.records, kPcQueuedRecordsMax + 20);
  EXPECT_EQ(probe_.records.size() + stats_.unpublished + stats_.unfired, stats_.records)
      << "every record fired or counted";
}

TEST_F(PcPublishTest, RecordsOfLaunchesNotAnnouncedGoOutWithIdZeroAndCoverageIsTold) {
  coverage_.on_kernel(kKernel, 1'000'000);
  ASSERT_EQ(coverage_.targets(), 1u) << "a hot kernel with no samples yet";
  state_.note_announced(7);
  PcRecordBuffer buf(3);
  fill(buf, 3, 0);
  buf.data()->pPcData[0].correlationId = 7;
  buf.data()->pPcData[1].correlationId = 42;  // its launch was not announced
  publish(buf);
  finish();
  ASSERT_EQ(probe_.records.size(), 3u);
  EXPECT_EQ(probe_.records[0].correlation_id, 7u);
  EXPECT_EQ(probe_.records[1].correlation_id, 0u);
  EXPECT_EQ(stats_.gpu_only, 1u);
  EXPECT_EQ(stats_.gpu_only_samples, 2u);
  EXPECT_EQ(stats_.uncorrelated, 2u);
  EXPECT_EQ(coverage_.targets(), 0u) << "the kernel has samples now";
}

TEST_F(PcPublishTest, ALongFunctionNameGoesOutAsItsStandIn) {
  const std::string name = "_ZN" + std::string(300, 'q') + "1kEv";
  PcRecordBuffer buf(1);
  fill(buf, 1, 0, name.c_str());
  publish(buf);
  finish();
  ASSERT_EQ(probe_.records.size(), 1u);
  const std::string &out = probe_.records[0].name;
  EXPECT_EQ(out.size(), size_t{PARCAGPU_PC_FUNCTION_NAME_MAX});
  unsigned long long hash = 0;
  EXPECT_TRUE(parcagpu_name_is_stand_in(out.c_str(), out.size(), &hash)) << out;
  EXPECT_EQ(hash, parcagpu_name_hash(name.c_str()));
}

// ---- drain: Get Data on a fake PC Sampling API table (fake_pc_cupti.h) ----

class PcDrainTest : public PcPublishTest {
 protected:
  void SetUp() override {
    PcPublishTest::SetUp();
    fake_pc::g_fake = &fake_;
    api_.cuptiPCSamplingGetData = &fake_pc::fake_get_data;
    api_.cuptiPCSamplingSetConfigurationAttribute = &fake_pc::fake_set;
    api_.cuptiPCSamplingGetConfigurationAttribute = &fake_pc::fake_get;
    uint32_t factor = 0;
    ASSERT_TRUE(session_.configure({14}, {}, &factor).ok());  // makes the session's buffers
  }
  void TearDown() override { fake_pc::g_fake = nullptr; }
  long get_data_calls() const {
    return std::count(fake_.calls.begin(), fake_.calls.end(), "GetData");
  }

  fake_pc::FakePc fake_;
  CuptiApi api_;
  PcSession session_{api_, reinterpret_cast<CUcontext>(0x77), 16};
};

TEST_F(PcDrainTest, GetDataUntilCuptiHasNoMoreEachBufferPublishedAndItsLossesCounted) {
  fake_.passes = {{16, 20, 3, 100}, {16, 4, 0, 0}, {4, 0, 2, 50}};
  const PcResult r = pub_.drain(session_, stats_);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(get_data_calls(), 3) << "none after CUPTI said nothing remains";
  EXPECT_EQ(stats_.drains, 1u);
  EXPECT_EQ(stats_.records, 36u);
  EXPECT_EQ(stats_.dropped_samples, 5u);
  EXPECT_EQ(stats_.nonuser_samples, 150u);
  finish();
  EXPECT_EQ(probe_.counts, (std::vector<uint32_t>{16, 16, 4}));
}

TEST_F(PcDrainTest, AnEmptyBufferEndsTheDrainItsLossesStillCounted) {
  fake_.passes = {{0, 0, 5, 7}, {16, 0}};
  EXPECT_TRUE(pub_.drain(session_, stats_).ok());
  EXPECT_EQ(get_data_calls(), 1);
  EXPECT_EQ(stats_.records, 0u);
  EXPECT_EQ(stats_.dropped_samples, 5u);
  EXPECT_EQ(stats_.nonuser_samples, 7u);
  finish();
  EXPECT_TRUE(probe_.counts.empty());
}

TEST_F(PcDrainTest, AFailedGetDataIsHandedBackAndWhatCameBeforeIsKept) {
  fake_pc::GetDataPass failing;
  failing.result = CUPTI_ERROR_INVALID_OPERATION;
  fake_.passes = {{16, 5}, failing, {5, 0}};
  PcResult r;
  EXPECT_NO_THROW(r = pub_.drain(session_, stats_));
  EXPECT_EQ(r.result, CUPTI_ERROR_INVALID_OPERATION);
  EXPECT_STREQ(r.call, "cuptiPCSamplingGetData");
  EXPECT_EQ(get_data_calls(), 2) << "no call after the failure";
  EXPECT_EQ(stats_.records, 16u);
  finish();
  EXPECT_EQ(probe_.records.size(), 16u) << "what the first Get Data gave is fired";
}

}  // namespace
}  // namespace parcagpu
