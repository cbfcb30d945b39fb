// decide_pc_step's pure parts (src/pc/pc_step.h) on hand-made events: where a due window opens
// after an episode that ended while its window waited, and which context goes first. The steps
// over whole episodes, carried out by the real code on a fake CUPTI table:
// pc_episode_steps_test.cc.
#include "pc/pc_step.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

constexpr uint64_t kSec = 1'000'000'000;

TEST(PcStep, AnEpisodeAfterOneEndedWhileItsWindowWaitedOpensAtOnce) {
  // A program that instantiates graphs all the time ends each episode before its window could
  // open (keep_graph_out): the next one does not wait again (the mock's graph-runtime loop got
  // 240 episodes and no window in 4 s).
  PcStepState st;
  PcStepEvent e;
  e.now_ns = 10 * kSec;
  e.launches_observed = e.may_enable = true;
  EXPECT_EQ(pc_scheduled_action(st, PcScheduler::Step::kEnable, e), PcAction::kEnable);
  e.here_enabled = true;
  st.skip_rng = 0x9E3779B97F4A7C15ull;  // draws a wait of more than one launch
  EXPECT_EQ(pc_scheduled_action(st, PcScheduler::Step::kStart, e), PcAction::kNone);
  ASSERT_GT(st.open_skip, 0);
  // The episode ends there; the next one begins 1 s later and opens at its first chance.
  e.now_ns += kSec;
  EXPECT_EQ(pc_scheduled_action(st, PcScheduler::Step::kEnable, e), PcAction::kEnable);
  EXPECT_EQ(pc_scheduled_action(st, PcScheduler::Step::kStart, e), PcAction::kStart);
  // And the one after that, its window having opened, waits again.
  e.now_ns += kSec;
  EXPECT_EQ(pc_scheduled_action(st, PcScheduler::Step::kEnable, e), PcAction::kEnable);
  EXPECT_EQ(pc_scheduled_action(st, PcScheduler::Step::kStart, e), PcAction::kNone);
}

TEST(PcStep, TheWindowGoesToTheEnabledContextWhoseLastWindowIsOldest) {
  PcStepState st;
  uint32_t waits = 0;
  EXPECT_TRUE(pc_older_goes_first(5, 3, true, waits));
  EXPECT_EQ(waits, 1u);
  EXPECT_FALSE(pc_older_goes_first(5, 3, /*may_wait=*/false, waits));
  EXPECT_EQ(waits, 0u);
  EXPECT_FALSE(pc_older_goes_first(3, 5, true, waits));
  EXPECT_FALSE(pc_older_goes_first(3, kNoOtherContext, true, waits));
  // A window due on a context that is not enabled: nothing (it is not the episode's).
  PcStepEvent e;
  e.now_ns = kSec;
  e.want = e.may_enable = e.launches_observed = e.any_enabled = true;
  EXPECT_EQ(pc_scheduled_action(st, PcScheduler::Step::kStart, e), PcAction::kNone);
  e.here_enabled = true;
  int skipped = 0;
  while (pc_scheduled_action(st, PcScheduler::Step::kStart, e) == PcAction::kNone) ++skipped;
  EXPECT_LT(skipped, static_cast<int>(kWindowOpenSpread));
  e.oldest_other_enabled_window = 0;
  e.here_last_window = 4;
  st.open_skip = 0;  // the dice let it open now
  EXPECT_EQ(pc_scheduled_action(st, PcScheduler::Step::kStart, e), PcAction::kNone);
  EXPECT_EQ(st.start_waits, 1u);
}

}  // namespace
}  // namespace parcagpu
