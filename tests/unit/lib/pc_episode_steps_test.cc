// PcEpisodeSteps, driven through PcEpisodes as PcSampler drives it, on the fake PC Sampling API
// table and a fake clock: the step each launch takes (read off the calls it made), over whole
// episodes, windows and several contexts. decide_pc_step's pure parts: pc_step_test.cc.
#include <gtest/gtest.h>

#include <vector>

#include "pc_episodes_fixture.h"

namespace parcagpu {
namespace {

using namespace fake_pc;

using PcEpisodeSteps = EpisodesFixture;

// Launches 20 us apart (a launch-bound loop): the count decides, not the time bound.
constexpr uint64_t kLaunchGap = 20'000;

TEST_F(PcEpisodeSteps, AWholeEpisodeOnOneContextInOrder) {
  build();
  run_first_episode();
  EXPECT_EQ(launch(0), PcAction::kEnable);
  EXPECT_TRUE(enabled(0));
  EXPECT_GE(launches_until(0, PcAction::kStart), 0);
  EXPECT_TRUE(state_.window_open.load());
  // The launch that opened it is the window's first: window_limit() launches in all.
  const int limit = static_cast<int>(schedule_->window_limit());
  g_now += kMs;
  EXPECT_EQ(launches_until(0, PcAction::kStop), limit - 1);
  EXPECT_FALSE(state_.window_open.load());
  g_now += kMs;
  EXPECT_EQ(launch(0), PcAction::kDrain);
  g_now += kMs;
  EXPECT_EQ(launch(0), PcAction::kDisable);
  EXPECT_FALSE(state_.any_enabled.load());
  EXPECT_FALSE(enabled(0));
  // The next episode only when the duty cap allows: not at the next launch.
  g_now += kMs;
  EXPECT_EQ(launch(0), PcAction::kNone);
  const PcStats s = episodes_->stats();
  EXPECT_EQ(s.episodes, 2u);
  EXPECT_EQ(s.enables, s.disables);
}

TEST_F(PcEpisodeSteps, NoConsumerEndsTheEpisodeUnderWayAndAsksNothingElse) {
  build();
  EXPECT_EQ(launch(0, true, /*want=*/false), PcAction::kNone);
  EXPECT_FALSE(schedule_->in_episode()) << "the scheduler was asked with no consumer";
  EXPECT_EQ(launch(0), PcAction::kEnable);
  g_now += kMs;
  EXPECT_EQ(launch(0, true, /*want=*/false), PcAction::kEndForNoConsumer);
  EXPECT_FALSE(state_.any_enabled.load());
  EXPECT_EQ(fake_.calls.back(), "Disable");
}

TEST_F(PcEpisodeSteps, AnEpisodeBeginsOnlyWhereEveryLaunchIsSeenAndItMayEnable) {
  build();
  state_.launches_observed = false;
  EXPECT_EQ(launch(0), PcAction::kNone);
  state_.launches_observed = true;
  // A graph's first launch (PARCAGPU_PC_GRAPHS=0) is uploaded with PC sampling off.
  EXPECT_EQ(launch(0, /*may_enable=*/false), PcAction::kNone);
  EXPECT_FALSE(schedule_->in_episode());
  EXPECT_EQ(launch(0), PcAction::kEnable);
}

TEST_F(PcEpisodeSteps, TheWindowOpensAtAUniformCountOfLaunchesAfterItIsDue) {
  // Before, 0..7 launches after the launch that found it due, which in a loop that synchronizes
  // is nearly always the step's first: a kernel 300 launches into the step was never sampled.
  build();
  run_first_episode();
  std::vector<int> skips;
  for (int episode = 0; episode < 200; ++episode) {
    ASSERT_GE(launches_until(0, PcAction::kEnable, 100000, kLaunchGap), 0) << episode;
    const int skipped = launches_until(0, PcAction::kStart, 1000, kLaunchGap);
    ASSERT_GE(skipped, 0);
    ASSERT_LT(skipped, static_cast<int>(kWindowOpenSpread));
    skips.push_back(skipped);
    ASSERT_GE(launches_until(0, PcAction::kDisable, 1000, kLaunchGap), 0);
    g_now += 10 * kSec;  // past the duty cap's gap
  }
  // Uniform in [0, 512): each quarter holds about 50 of 200 (binomial: 30..70 at 4.6 sigma).
  int quarter[4] = {};
  for (int k : skips) ++quarter[k * 4 / kWindowOpenSpread];
  for (int q = 0; q < 4; ++q) EXPECT_GT(quarter[q], 30) << "quarter " << q;
}

TEST_F(PcEpisodeSteps, TheWindowOpensAtTheFirstLaunchOfAHotKernelWithNoSamples) {
  build();
  run_first_episode();
  episodes_->coverage().on_kernel("hot", kSec);  // all the GPU time, no PC sample yet
  int opened_by_count = 0;
  for (int episode = 0; episode < 50; ++episode) {
    ASSERT_GE(launches_until(0, PcAction::kEnable, 100000, kLaunchGap), 0);
    // Two launches of a kernel that is not hot: the window opens at one only where the count
    // drawn is below 2 (p = 2/512).
    PcAction a = PcAction::kNone;
    for (int i = 0; i < 2 && a == PcAction::kNone; ++i) a = launch(0, true, true, "cold");
    if (a == PcAction::kStart) {
      ++opened_by_count;
    } else {
      EXPECT_EQ(a, PcAction::kNone) << "episode " << episode;
      g_now += kLaunchGap;
      EXPECT_EQ(launch(0, true, true, "hot"), PcAction::kStart) << "episode " << episode;
    }
    ASSERT_GE(launches_until(0, PcAction::kDisable, 1000, kLaunchGap), 0);
    g_now += 10 * kSec;
  }
  EXPECT_LE(opened_by_count, 3);
}

TEST_F(PcEpisodeSteps, TheWaitForTheWindowIsBoundedInTime) {
  // A program that launches every 10 ms: 512 launches would keep the episode enabled 5 s.
  build();
  run_first_episode();
  for (int episode = 0; episode < 20; ++episode) {
    ASSERT_GE(launches_until(0, PcAction::kEnable, 100000, 10 * kMs), 0);
    const int skipped = launches_until(0, PcAction::kStart, 1000, 10 * kMs);
    ASSERT_GE(skipped, 0);
    EXPECT_LE(skipped, static_cast<int>(kWindowOpenWaitNs / (10 * kMs)) + 1);
    ASSERT_GE(launches_until(0, PcAction::kDisable, 1000, 10 * kMs), 0);
    g_now += 10 * kSec;
  }
}

TEST_F(PcEpisodeSteps, AContextThatLaunchesDuringAnEpisodeJoinsIt) {
  build();
  EXPECT_EQ(launch(0), PcAction::kEnable);
  // Never enabled: it joins (enabled, not started), whether learning or not.
  g_now += kMs;
  EXPECT_EQ(launch(1), PcAction::kJoin);
  EXPECT_TRUE(enabled(1));
  EXPECT_EQ(fake_.contexts.back(), context(1));
}

TEST_F(PcEpisodeSteps, AContextDoesNotJoinAtAGraphsFirstLaunch) {
  build();
  EXPECT_EQ(launch(0), PcAction::kEnable);
  g_now += kMs;
  EXPECT_EQ(launch(1, /*may_enable=*/false), PcAction::kNone);
  EXPECT_FALSE(enabled(1));
}

TEST_F(PcEpisodeSteps, AContextEnabledBeforeJoinsAgainOnlyWhileKernelsAreFirstUsed) {
  build();
  // The first episode: context 1 joins it, and is disabled with it.
  ASSERT_EQ(launch(0), PcAction::kEnable);
  g_now += kMs;
  ASSERT_EQ(launch(1), PcAction::kJoin);
  ASSERT_GE(launches_until(0, PcAction::kDisable, 100000), 0);
  ASSERT_FALSE(enabled(1));
  // An episode that learns (a kernel first used now, as PcSampler::on_kernel_record says), on
  // context 1 (never sampled, it goes first): context 0, enabled before, joins again.
  g_now += 100 * kSec;
  state_.last_first_use_ns = g_now;
  ASSERT_EQ(launch(1), PcAction::kEnable);
  g_now += kMs;
  EXPECT_EQ(launch(0), PcAction::kJoin);
  ASSERT_GE(launches_until(1, PcAction::kDisable, 100000), 0);
  // One that does not learn (nothing first used for 100 s), on context 0 (its last window the
  // older now): context 1, enabled before, does not join.
  g_now += 100 * kSec;
  ASSERT_EQ(launch(0), PcAction::kEnable);
  g_now += kMs;
  EXPECT_EQ(launch(1), PcAction::kNone);
  EXPECT_FALSE(enabled(1));
}

// Context 0 had a window, context 1 joined the episode and had none; an episode is due again.
void sample_context_0_only(EpisodesFixture &f) {
  ASSERT_EQ(f.launch(0), PcAction::kEnable);
  g_now += kMs;
  ASSERT_EQ(f.launch(1), PcAction::kJoin);
  ASSERT_GE(f.launches_until(0, PcAction::kDisable, 100000), 0);
  g_now += 100 * kSec;
}

// How many launches on c take no step before one does (-1: none in `limit`).
int waited_on(EpisodesFixture &f, size_t c, int limit = 2 * kUnsampledWaitLaunches) {
  for (int waited = 0; waited < limit; ++waited, g_now += 1000)
    if (f.launch(c) != PcAction::kNone) return waited;
  return -1;
}

TEST_F(PcEpisodeSteps, AnEpisodeWaitsForAContextNeverSampledThenGoesAnyway) {
  build();
  sample_context_0_only(*this);
  EXPECT_EQ(waited_on(*this, 0), static_cast<int>(kUnsampledWaitLaunches));
  EXPECT_TRUE(enabled(0));
  EXPECT_EQ(episodes_->stats().episodes, 2u);
}

TEST_F(PcEpisodeSteps, ALaunchOnTheContextNeverSampledGoesFirstAtOnce) {
  build();
  sample_context_0_only(*this);
  EXPECT_EQ(launch(0), PcAction::kNone);
  g_now += 1000;
  EXPECT_EQ(launch(1), PcAction::kEnable);
  // Context 1's window, then the next episode: context 0's last window is now the older, and a
  // launch on context 1 waits for it the whole count again (the wait was reset when context 1
  // went).
  ASSERT_GE(launches_until(1, PcAction::kDisable, 100000), 0);
  g_now += 100 * kSec;
  EXPECT_EQ(waited_on(*this, 1), static_cast<int>(kUnsampledWaitLaunches));
}

}  // namespace
}  // namespace parcagpu
