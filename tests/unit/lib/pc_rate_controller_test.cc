// PcRateController on a fake clock (every time is given in): when a window opens, how many
// launches it spans, the sample credit and the duty cap that space windows, the jittered gap.
#include <gtest/gtest.h>

#include <algorithm>

#include "pc/pc_rate_controller.h"

namespace parcagpu {
namespace {

constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;

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

TEST(PcRateController, NextOpenIsExactlyWhenShouldOpenFirstSaysYes) {
  // The launch path reads next_open_ns() without the lock and calls should_open() only from
  // then on: the two must agree to the nanosecond.
  PcRateController::Params p;
  p.target_rate = 1e6;  // the credit never binds
  PcRateController c(p, 0, 5);
  ASSERT_GT(run_first_window(c, 10 * kMs, 32, 50), 0u);
  const uint64_t at = c.next_open_ns();
  ASSERT_GT(at, 10 * kMs);
  EXPECT_EQ(c.should_open(at - 1), 0u);
  EXPECT_EQ(c.next_open_ns(), at) << "a no before the time changes nothing";
  EXPECT_GT(c.should_open(at), 0u);
}

TEST(PcRateController, CreditGrowsAtTheTargetRateUpToOneBurst) {
  PcRateController::Params p;
  p.target_rate = 100;
  PcRateController c(p, 0, 1);
  EXPECT_DOUBLE_EQ(c.credit(), 100) << "a full burst at start: the first launch opens a window";
  ASSERT_EQ(run_first_window(c, 10 * kMs, 32, 150), 32u);
  EXPECT_DOUBLE_EQ(c.credit(), -50);
  EXPECT_GT(c.should_open(1 * kSec), 0u);  // past the gap, and -50 + 100 s^-1 * 1 s > 0
  EXPECT_NEAR(c.credit(), 50, 1e-6);
  c.should_open(100 * kSec);
  EXPECT_DOUBLE_EQ(c.credit(), 100) << "100 s idle buys one second's worth, not 100";
}

TEST(PcRateController, TheGapIsSpreadOverHalfToOneAndAHalfTimesTheDutysGap) {
  // A window of 10 ms at a 2% duty is followed by 490 ms on average; the jitter (seeded) keeps a
  // periodic workload from being sampled at one phase.
  PcRateController::Params p;
  p.target_rate = 1e6;
  const double base = 10.0 * kMs * (1 / p.max_duty - 1);
  double lo = 1e18, hi = 0, sum = 0;
  const int n = 400;
  for (int seed = 1; seed <= n; ++seed) {
    PcRateController c(p, 0, seed);
    run_first_window(c, 10 * kMs, 32, 1);
    const double gap = static_cast<double>(c.next_open_ns() - 10 * kMs);
    lo = std::min(lo, gap);
    hi = std::max(hi, gap);
    sum += gap;
  }
  EXPECT_GE(lo, 0.5 * base - 1);
  EXPECT_LT(hi, 1.5 * base);
  EXPECT_LT(lo, 0.6 * base) << "the gaps are spread, not one value";
  EXPECT_GT(hi, 1.4 * base);
  EXPECT_NEAR(sum / n / base, 1.0, 0.05);
  PcRateController a(p, 0, 77), b(p, 0, 77);
  run_first_window(a, 10 * kMs, 32, 1);
  run_first_window(b, 10 * kMs, 32, 1);
  EXPECT_EQ(a.next_open_ns(), b.next_open_ns()) << "one seed, one schedule";
}

TEST(PcRateController, AnEmptyWindowStillWaitsTheMinimumGap) {
  PcRateController::Params p;
  p.target_rate = 1e6;
  PcRateController c(p, 0, 9);
  ASSERT_GT(run_first_window(c, 0, 1, 0), 0u);
  EXPECT_GE(c.next_open_ns(), p.min_gap_ns / 2);
  EXPECT_LT(c.next_open_ns(), p.min_gap_ns * 3 / 2);
}

TEST(PcRateController, SamplesPerLaunchIsAMovingAverageAndAnEmptyWindowPaysOnly) {
  PcRateController::Params p;
  p.target_rate = 100;
  PcRateController c(p, 0, 1);
  EXPECT_LT(c.samples_per_launch(), 0) << "nothing measured yet";
  c.on_samples(100, 10);
  EXPECT_DOUBLE_EQ(c.samples_per_launch(), 10) << "the first window's own figure";
  c.on_samples(0, 10);
  EXPECT_DOUBLE_EQ(c.samples_per_launch(), 7);
  c.on_samples(40, 0);  // samples drained with no launch counted: paid, not averaged
  EXPECT_DOUBLE_EQ(c.samples_per_launch(), 7);
  EXPECT_DOUBLE_EQ(c.credit(), 100 - 100 - 0 - 40);
}

TEST(PcRateController, AWindowIsNeverLongerThanMaxLaunches) {
  PcRateController::Params p;
  p.target_rate = 100;
  p.min_launches = 1;
  p.max_launches = 8;
  PcRateController c(p, 0, 3);
  ASSERT_EQ(run_first_window(c, kMs, 4, 2), 1u);  // half a sample a launch: 200 launches wanted
  EXPECT_EQ(c.should_open(10 * kSec), 8u);
}

}  // namespace
}  // namespace parcagpu
