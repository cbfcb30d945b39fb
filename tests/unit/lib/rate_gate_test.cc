#include "base/rate_gate.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace parcagpu {
namespace {

constexpr uint64_t kMs = 1000000ull;
constexpr uint64_t kSec = 1000 * kMs;

TEST(RateGate, SustainedRateOverTenSeconds) {
  RateGate g(20, 4 * kMs);
  int taken = 0;
  // 10 launches per ms for 10 s at 20/s: 200, give or take the first one.
  for (uint64_t t = 1 * kSec; t < 11 * kSec; t += kMs / 10) taken += g.try_take(t);
  EXPECT_GE(taken, 200);
  EXPECT_LE(taken, 201);
}

TEST(RateGate, NoBurstAtStartBeyondTheTolerance) {
  // The start must not look like a burst of a second's worth of launches (that pushed kernel
  // activity into its left-on mode): at 100/s with a 4 ms tolerance, one launch, not 100.
  RateGate g(100, 4 * kMs);
  int taken = 0;
  for (int i = 0; i < 1000; ++i) taken += g.try_take(5 * kSec);
  EXPECT_EQ(taken, 1);
  // At a rate the coarse clock cannot resolve, the tolerance lets a tick's worth through.
  RateGate fast(10000, 4 * kMs);  // 100 us interval
  taken = 0;
  for (int i = 0; i < 1000; ++i) taken += fast.try_take(5 * kSec);
  EXPECT_EQ(taken, 41);
}

TEST(RateGate, CoarseClockStillGivesTheRate) {
  // 10000/s with a clock that moves in 4 ms steps: 40 per step on average.
  RateGate g(10000, 4 * kMs);
  int taken = 0;
  for (uint64_t tick = 0; tick < 250; ++tick)  // 1 s
    for (int i = 0; i < 500; ++i) taken += g.try_take(kSec + tick * 4 * kMs);
  EXPECT_GE(taken, 10000);
  EXPECT_LE(taken, 10041);
}

TEST(RateGate, ZeroRateLetsNothingThrough) {
  RateGate z(0, 4 * kMs);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(z.try_take(kSec + i * kSec));
}

TEST(RateGate, ClockGoingBackwardsDoesNotMintLaunches) {
  RateGate g(1, 0);
  EXPECT_TRUE(g.try_take(10 * kSec));
  EXPECT_FALSE(g.try_take(9 * kSec));
  EXPECT_FALSE(g.try_take(10 * kSec));
  EXPECT_TRUE(g.try_take(11 * kSec));
}

TEST(RateGate, ReadySaysWhatTryTakeWouldDoAndTakesNothing) {
  // PcEpisodes' graph registrations: a burst of 3 (tolerance 2 intervals), then 2 a second.
  RateGate g(2, 1 * kSec);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(g.ready(10 * kSec));
    EXPECT_TRUE(g.ready(10 * kSec));  // asking again takes nothing
    EXPECT_TRUE(g.try_take(10 * kSec));
  }
  EXPECT_FALSE(g.ready(10 * kSec));
  EXPECT_FALSE(g.try_take(10 * kSec));
  EXPECT_TRUE(g.ready(10 * kSec + 500 * kMs));
  EXPECT_FALSE(RateGate(0, kSec).ready(10 * kSec));
}

TEST(RateGate, SharedByThreadsExactly) {
  // Eight threads hammering one gate at a frozen clock: exactly tolerance / interval + 1 pass.
  RateGate g(1000, 50 * kMs);
  std::atomic<int> taken{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) taken += g.try_take(kSec);
    });
  for (auto &th : threads) th.join();
  EXPECT_EQ(taken.load(), 51);
}

}  // namespace
}  // namespace parcagpu
