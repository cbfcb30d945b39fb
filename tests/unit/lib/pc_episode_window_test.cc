// PcEpisodeWindow: an episode's window planned, open until its limit or deadline, drained after
// the delay; on a fake clock.
#include "pc/pc_episode_window.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(PcEpisodeWindow, OpenUntilItsLaunchLimitOrItsDeadline) {
  PcEpisodeWindow w(250 * kMs, 120 * kMs);
  w.plan(32);
  EXPECT_TRUE(w.pending());
  w.on_started(10 * kMs);
  EXPECT_FALSE(w.pending());
  EXPECT_EQ(w.limit(), 32u);
  EXPECT_EQ(w.started_ns(), 10 * kMs);
  EXPECT_EQ(w.deadline_ns(), 260 * kMs);
  EXPECT_FALSE(w.full(259 * kMs, 31));
  EXPECT_TRUE(w.full(259 * kMs, 32));
  EXPECT_TRUE(w.full(260 * kMs, 0));
}

TEST(PcEpisodeWindow, DrainedAfterTheDelayTheFirstDrainRemembered) {
  PcEpisodeWindow w(250 * kMs, 120 * kMs);
  w.on_episode_enabled(false);
  w.plan(32);
  w.on_started(0);
  w.on_stopped(10 * kMs);
  EXPECT_FALSE(w.drain_due(129 * kMs));
  EXPECT_TRUE(w.drain_due(130 * kMs));
  EXPECT_FALSE(w.done());
  w.on_drained(130 * kMs);
  EXPECT_TRUE(w.done());
  w.plan(32);
  w.on_started(200 * kMs);
  w.on_stopped(210 * kMs);
  w.on_drained(330 * kMs);
  EXPECT_EQ(w.first_drained_ns(), 130 * kMs) << "the first window's drain";
  w.on_episode_over();
  EXPECT_FALSE(w.done());
  w.on_episode_enabled(false);
  EXPECT_EQ(w.first_drained_ns(), 0u);
}

TEST(PcEpisodeWindow, AResumedEpisodeWithNoWindowPlannedGoesOnAsIfOneWereDone) {
  PcEpisodeWindow w(250 * kMs, 120 * kMs);
  w.plan(0);  // the rate controller lets none open now
  EXPECT_FALSE(w.pending());
  w.on_episode_enabled(/*resumed=*/true);
  EXPECT_TRUE(w.done());
  w.on_episode_over();
  w.plan(32);
  w.on_episode_enabled(true);
  EXPECT_FALSE(w.done()) << "its window opens first";
  w.on_episode_over();
  EXPECT_FALSE(w.pending());
}

}  // namespace
}  // namespace parcagpu
