// PC sampling's pure parts: the window/rate controller, the stall-reason table, the record
// buffer handed to consumers.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "pc/pc_rate_controller.h"
#include "pc/pc_records.h"

namespace parcagpu {
namespace {

constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;

// ---- PcRateController ----

// Runs c's first window: opened at 0, closed at `end` after `launches` launches that yielded
// `samples` samples. Returns the length c opened it with (should_open(0)).
uint32_t run_first_window(PcRateController &c, uint64_t end, uint32_t launches, uint64_t samples) {
  const uint32_t opened = c.should_open(0);
  c.on_window_closed(0, end, launches);
  c.on_samples(samples, launches);
  return opened;
}

TEST(PcRateController, FirstWindowSpansTheShortestLength) {
  PcRateController c({}, 0, 1);
  EXPECT_EQ(c.should_open(0), PcRateController::Params{}.min_launches);
  PcRateController::Params p;
  p.min_launches = 1;
  PcRateController one(p, 0, 1);
  EXPECT_EQ(one.should_open(0), 1u);
}

TEST(PcRateController, AWindowSpansAWholeStepEvenWhenKernelsYieldMuch) {
  // An episode's fixed cost (~110 ms: buffer setup and Disable, P13) is paid per window, a
  // sampled launch ~1 ms (P5): a rich kernel gets a window of min_launches, paid for by a longer
  // pause, not a one-launch window soon (16 sampled launches a minute on the H100, and a
  // kernel of 23% of the GPU time never sampled).
  PcRateController::Params p;
  p.target_rate = 100;
  PcRateController c(p, 0, 1);
  const uint32_t first = c.should_open(0);
  ASSERT_EQ(first, p.min_launches);
  c.on_window_closed(0, 40 * kMs, first);
  c.on_samples(150 * first, first);  // 150 samples a launch: credit 100 - 4800
  EXPECT_EQ(c.should_open(30 * kSec), 0u);
  uint64_t t = 30 * kSec;
  while (c.should_open(t) == 0) t += 100 * kMs;
  EXPECT_NEAR(t / 1e9, 47.0, 1.0) << "the overdraft is paid back at the target rate";
  EXPECT_EQ(c.should_open(t), p.min_launches);
}

TEST(PcRateController, RichWindowIsPaidForByAPause) {
  PcRateController::Params p;
  p.target_rate = 100;
  p.min_launches = 1;
  PcRateController c(p, 0, 1);
  // credit 100 - 300 = -200: two seconds of target rate
  ASSERT_EQ(run_first_window(c, 1 * kMs, 1, 300), 1u);
  EXPECT_EQ(c.should_open(1 * kSec), 0u);
  EXPECT_EQ(c.should_open(2 * kSec - 10 * kMs), 0u);
  EXPECT_GT(c.should_open(2 * kSec + 10 * kMs), 0u);
}

TEST(PcRateController, WindowTimeStaysUnderTheDutyCap) {
  PcRateController::Params p;
  p.target_rate = 1e6;  // the sample budget never binds
  p.max_duty = 0.01;  // (2% by default)
  PcRateController c(p, 0, 7);
  // 10 ms inside: at least 0.5 * 990 ms outside
  ASSERT_GT(run_first_window(c, 10 * kMs, 10, 5), 0u);
  EXPECT_EQ(c.should_open(10 * kMs + 490 * kMs), 0u);
  EXPECT_GE(c.next_open_ns(), 10 * kMs + 495 * kMs);
  EXPECT_LE(c.next_open_ns(), 10 * kMs + 1485 * kMs);
}

TEST(PcRateController, AWindowOverrunningItsLengthIsChargedItsLengthOnly) {
  // A first window that lasted 1.3 s (CUPTI's first Start with the default 512 MB hardware
  // buffer, lazy loading) must not keep the next one a minute away: charged 1.25 max_window_ns,
  // the gap is 0.5..1.5 * 49 * that.
  PcRateController::Params p;
  p.target_rate = 1e6;
  PcRateController c(p, 0, 7);
  const uint64_t end = 1300 * kMs;
  ASSERT_GT(run_first_window(c, end, 1, 100), 0u);
  const double charged = 1.25 * p.max_window_ns;
  EXPECT_LE(c.next_open_ns(), end + static_cast<uint64_t>(1.5 * 49 * charged));
  EXPECT_GE(c.next_open_ns(), end + static_cast<uint64_t>(0.5 * 49 * charged));
}

TEST(PcRateController, WindowLengthFollowsSamplesPerLaunch) {
  PcRateController::Params p;
  p.target_rate = 100;
  p.min_launches = 1;
  PcRateController c(p, 0, 3);
  // 10 samples per launch; credit 90
  ASSERT_EQ(run_first_window(c, kMs, 1, 10), 1u);
  const uint64_t t = 3 * kSec;  // credit back to its cap of 100
  EXPECT_EQ(c.should_open(t), 10u);
}

TEST(PcRateController, WindowsThatYieldNothingGetTheLongestLength) {
  PcRateController::Params p;
  p.min_launches = 1;
  PcRateController c(p, 0, 3);
  ASSERT_EQ(run_first_window(c, kMs, 1, 0), 1u);
  EXPECT_EQ(c.should_open(10 * kSec), p.max_launches);
}

TEST(PcRateController, NoRateControlAtZero) {
  PcRateController::Params p;
  p.target_rate = 0;
  PcRateController c(p, 0, 3);
  // no credit to pay from: only the duty cap spaces windows
  ASSERT_GT(run_first_window(c, kMs, 1, 1'000'000), 0u);
  EXPECT_GT(c.should_open(10 * kSec), 0u);
}

// A simulated workload: one launch per millisecond, each launch in a window yields `per_launch`
// samples and costs `cost` of wall time. The controller's long-run rate is the target, and
// the time in windows stays under the duty cap, whatever the workload yields.
struct Simulated {
  double rate;      // samples per second achieved
  double duty;      // fraction of time inside windows
};
// min_launches 1: the window length follows the samples per launch alone.
Simulated simulate(double target, double per_launch, uint64_t cost, uint64_t seconds,
                   uint32_t min_launches = 1) {
  PcRateController::Params p;
  p.target_rate = target;
  p.min_launches = min_launches;
  PcRateController c(p, 0, 42);
  uint64_t t = 0, samples = 0, inside = 0;
  const uint64_t end = seconds * kSec;
  while (t < end) {
    const uint32_t n = c.should_open(t);
    if (n == 0) {
      t += kMs;
      continue;
    }
    const uint64_t start = t;
    t += n * (kMs + cost);
    c.on_window_closed(start, t, n);
    inside += t - start;
    const uint64_t got = static_cast<uint64_t>(per_launch * n);
    samples += got;
    c.on_samples(got, n);
  }
  return {samples / static_cast<double>(seconds), inside / static_cast<double>(end)};
}

// A launch inside a window costs ~1 ms more (H100): 2 ms per launch here.
TEST(PcRateController, LongRunRateIsTheTargetWhenKernelsYieldEnough) {
  for (double per_launch : {20.0, 80.0, 400.0, 5000.0}) {
    const Simulated s = simulate(100, per_launch, kMs, 600);
    EXPECT_NEAR(s.rate, 100, 10) << per_launch << " samples per launch";
    EXPECT_LT(s.duty, 0.025) << per_launch;
  }
}

TEST(PcRateController, LongRunRateIsTheTargetWithWholeStepWindows) {
  // The default windows (min_launches) overdraw the credit and pay it back with a longer pause:
  // over an hour the rate is still the target.
  const uint32_t n = PcRateController::Params{}.min_launches;
  for (double per_launch : {20.0, 80.0, 400.0}) {
    const Simulated s = simulate(100, per_launch, kMs, 3600, n);
    EXPECT_NEAR(s.rate, 100, 12) << per_launch << " samples per launch";
    EXPECT_LT(s.duty, 0.025) << per_launch;
  }
}

TEST(PcRateController, PoorKernelsAreCappedByTheDutyNotByTheRate) {
  for (double per_launch : {0.05, 2.0}) {
    const Simulated s = simulate(100, per_launch, kMs, 600);
    EXPECT_LT(s.rate, 90) << per_launch;
    EXPECT_LT(s.duty, 0.025) << per_launch;
    EXPECT_GT(s.duty, 0.01) << per_launch;  // it does sample, as much as the cap allows
  }
}

// ---- StallReasonTable ----

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

// ---- PcRecordBuffer ----

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
  EXPECT_EQ(static_cast<const CUpti_PCSamplingPCData *>(buf.ptrs()[0])->functionName,
            static_cast<const CUpti_PCSamplingPCData *>(buf.ptrs()[1])->functionName);
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
  EXPECT_EQ(static_cast<const CUpti_PCSamplingPCData *>(buf.ptrs()[0])->correlationId, 7u);
  EXPECT_EQ(static_cast<const CUpti_PCSamplingPCData *>(buf.ptrs()[1])->correlationId, 0u);
  EXPECT_EQ(static_cast<const CUpti_PCSamplingPCData *>(buf.ptrs()[2])->correlationId, 0u);
}

}  // namespace
}  // namespace parcagpu
