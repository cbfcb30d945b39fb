// pc_step_due (src/pc/pc_step_due.h): which launches go to the episodes for a step, from the
// lock-free launch state and the schedule's hint, on a fake clock.
#include "pc/pc_step_due.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;

CUcontext ctx(uintptr_t i) { return reinterpret_cast<CUcontext>(0x1000 + i); }

class PcStepDue : public ::testing::Test {
 protected:
  void SetUp() override {
    state_.usable = true;
    state_.launches_observed = true;
    state_.launch_budget = 1000;
  }
  // PC sampling enabled on context 0, as an episode leaves it.
  void enable() {
    state_.any_enabled = true;
    state_.mark_enabled(ctx(0), true);
  }

  PcLaunchState state_;
  PcScheduler schedule_{PcScheduler::Params{}, {}, 0, 1};
};

TEST_F(PcStepDue, WithNoConsumerOnlyALaunchThatCanEndTheEpisodeGoes) {
  EXPECT_FALSE(pc_step_due(state_, schedule_, ctx(0), /*want=*/false, 10 * kSec));
  enable();
  EXPECT_TRUE(pc_step_due(state_, schedule_, ctx(0), false, 10 * kSec));
  EXPECT_TRUE(pc_step_due(state_, schedule_, ctx(1), false, 10 * kSec));
}

TEST_F(PcStepDue, NothingEnabledALaunchGoesWhenAnEpisodeIsDueAndEveryLaunchIsSeen) {
  schedule_.put_off(0, kSec);  // the next episode due at 1 s
  const uint64_t due = schedule_.next_episode_ns();
  ASSERT_EQ(due, kSec);
  EXPECT_FALSE(pc_step_due(state_, schedule_, ctx(0), true, due - 1));
  EXPECT_TRUE(pc_step_due(state_, schedule_, ctx(0), true, due));
  state_.launches_observed = false;
  EXPECT_FALSE(pc_step_due(state_, schedule_, ctx(0), true, due));
}

TEST_F(PcStepDue, DuringAnEpisodeALaunchOnAnotherContextGoes) {
  enable();
  state_.drain_pending = true;  // nothing due on context 0 ...
  state_.drain_due_ns = 5 * kSec;
  EXPECT_FALSE(pc_step_due(state_, schedule_, ctx(0), true, kSec));
  EXPECT_TRUE(pc_step_due(state_, schedule_, ctx(1), true, kSec)) << "it may have to join";
}

TEST_F(PcStepDue, ALaunchGoesOnceTheBudgetIsSpent) {
  enable();
  state_.window_open = true;
  state_.window_limit = 32;
  state_.window_deadline_ns = 5 * kSec;
  EXPECT_FALSE(pc_step_due(state_, schedule_, ctx(0), true, kSec));
  state_.episode_launches = 1000;
  EXPECT_TRUE(pc_step_due(state_, schedule_, ctx(0), true, kSec));
}

TEST_F(PcStepDue, AnOpenWindowClosesAtItsLimitOrDeadline) {
  enable();
  state_.window_open = true;
  state_.window_limit = 32;
  state_.window_launches = 31;
  state_.window_deadline_ns = 5 * kSec;
  EXPECT_FALSE(pc_step_due(state_, schedule_, ctx(0), true, kSec));
  state_.window_launches = 32;
  EXPECT_TRUE(pc_step_due(state_, schedule_, ctx(0), true, kSec));
  state_.window_launches = 0;
  EXPECT_TRUE(pc_step_due(state_, schedule_, ctx(0), true, 5 * kSec));
}

TEST_F(PcStepDue, ADrainGoesWhenDueAndAnEnabledContextWithNoWindowAlways) {
  enable();
  state_.drain_pending = true;
  state_.drain_due_ns = 2 * kSec;
  EXPECT_FALSE(pc_step_due(state_, schedule_, ctx(0), true, 2 * kSec - kMs));
  EXPECT_TRUE(pc_step_due(state_, schedule_, ctx(0), true, 2 * kSec));
  state_.drain_pending = false;
  EXPECT_TRUE(pc_step_due(state_, schedule_, ctx(0), true, 0)) << "a window may open";
}

TEST(PcLaunchStateCount, ALaunchIsCountedForTheEpisodeAndTheOpenWindow) {
  PcLaunchState s;
  s.launch_budget = 4;
  EXPECT_FALSE(s.count_launch());
  EXPECT_EQ(s.window_launches.load(), 0u);
  s.window_open = true;
  EXPECT_FALSE(s.count_launch());
  EXPECT_TRUE(s.count_launch()) << "the third spends half the budget (2 before it)";
  EXPECT_FALSE(s.count_launch());
  EXPECT_EQ(s.episode_launches.load(), 4u);
  EXPECT_EQ(s.window_launches.load(), 3u);
}

}  // namespace
}  // namespace parcagpu
