// PcEpisodeTiming: when an episode must end, and what it is charged against the duty cap; on a
// fake clock.
#include "pc/pc_episode_timing.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;

PcEpisodeParams params() {
  PcEpisodeParams p;
  p.launch_budget = 1000;
  p.max_episode_ns = 500 * kMs;
  p.max_learning_ns = 30 * kSec;
  p.max_duty = 0.05;  // the next episode 19 times the charge later
  p.min_episode_charge_ns = 0;
  return p;
}

TEST(PcEpisodeTiming, AnEpisodeIsOverAtItsLaunchBudgetCountedOnceAsCut) {
  PcEpisodeTiming t(params());
  t.on_enabled(0);
  EXPECT_FALSE(t.over(kMs, 999, false));
  EXPECT_TRUE(t.over(kMs, 1000, false));
  EXPECT_TRUE(t.over(2 * kMs, 1001, false));
  t.on_disabled(3 * kMs, 0, false, false, 0);
  EXPECT_EQ(t.episodes_cut_by_budget(), 1u);
  t.on_enabled(kSec);
  EXPECT_TRUE(t.over(2 * kSec, 0, false)) << "its longest time";
  t.on_disabled(2 * kSec, 0, false, false, 0);
  EXPECT_EQ(t.episodes(), 2u);
  EXPECT_EQ(t.episodes_cut_by_budget(), 1u) << "over by time is not cut";
}

TEST(PcEpisodeTiming, ALearningEpisodeLastsAtMostMaxLearning) {
  PcEpisodeTiming t(params());
  t.on_enabled(kSec);
  EXPECT_FALSE(t.over(kSec + 499 * kMs, 1, false));
  EXPECT_TRUE(t.over(kSec + 500 * kMs, 1, false));
  EXPECT_FALSE(t.over(kSec + 500 * kMs, 1, true));
  EXPECT_TRUE(t.over(31 * kSec, 1, true));
}

TEST(PcEpisodeTiming, TheNextEpisodeComesAfterTheChargeOverTheDuty) {
  PcEpisodeTiming t(params());
  t.on_enabled(kSec);
  t.on_disabled(kSec + 100 * kMs, kSec + 50 * kMs, false, false, 0);
  EXPECT_EQ(t.scheduled_ns(), kSec + 100 * kMs + 19 * 100 * kMs) << "charged what it took";
  // Kept enabled for first uses for 3 s: charged up to its first window's drain, 30 ms.
  t.on_enabled(10 * kSec);
  t.on_disabled(13 * kSec, 10 * kSec + 30 * kMs, /*kept_learning=*/true, false, 0);
  EXPECT_EQ(t.scheduled_ns(), 13 * kSec + 19 * 30 * kMs);
  // Longer than max_episode_ns and nothing learned: charged max_episode_ns.
  t.on_enabled(20 * kSec);
  t.on_disabled(22 * kSec, 20 * kSec + kMs, false, false, 0);
  EXPECT_EQ(t.scheduled_ns(), 22 * kSec + 19 * 500 * kMs);
  // No sooner than the rate controller opens a window.
  t.on_enabled(40 * kSec);
  t.on_disabled(40 * kSec + kMs, 0, false, false, 90 * kSec);
  EXPECT_EQ(t.scheduled_ns(), 90 * kSec);
}

TEST(PcEpisodeTiming, AResumedEpisodeWithNoWindowIsChargedTheMinimum) {
  PcEpisodeParams p = params();
  p.min_episode_charge_ns = 20 * kMs;
  PcEpisodeTiming t(p);
  t.on_enabled(kSec);
  t.on_disabled(3 * kSec, 0, false, /*resumed=*/true, 0);
  EXPECT_EQ(t.scheduled_ns(), 3 * kSec + 19 * 20 * kMs);
}

}  // namespace
}  // namespace parcagpu
