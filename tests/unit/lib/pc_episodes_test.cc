// PcEpisodes, the episodes' entry points under their mutex, on the fake PC Sampling API table and
// a fake clock: a context destroyed, shutdown, the first failed call, another process holding the
// GPU, and the episodes that resume off schedule (a context created, a module loaded). The steps
// of each launch: pc_episode_steps_test.cc; graphs: pc_graph_registration_test.cc.
#include <gtest/gtest.h>

#include <algorithm>

#include "pc/pc_device_lock.h"
#include "pc_episodes_fixture.h"

namespace parcagpu {
namespace {

using namespace fake_pc;

using PcEpisodesTest = EpisodesFixture;

size_t count(const std::vector<std::string> &calls, const char *call) {
  return std::count(calls.begin(), calls.end(), call);
}

TEST_F(PcEpisodesTest, AContextDestroyedEndsItsEpisodeAndIsForgotten) {
  build();
  ASSERT_EQ(launch(0), PcAction::kEnable);
  ASSERT_TRUE(activity_.held_on);
  episodes_->on_context_destroy(context(0));
  EXPECT_EQ(fake_.calls.back(), "Disable");
  EXPECT_EQ(fake_.contexts.back(), context(0));
  EXPECT_FALSE(state_.any_enabled.load());
  EXPECT_FALSE(activity_.held_on) << "kernel activity let go with the last enabled context";
  EXPECT_FALSE(schedule_->in_episode());
  // Its GPU's lock given back: another process may take it now.
  PcDeviceLocks other(lock_dir_);
  EXPECT_EQ(other.try_acquire("any"), PcDeviceLocks::Result::kAcquired);
  other.release("any");
  // Forgotten: a new context at its address is new (never enabled, joins at once).
  g_now += 100 * kSec;
  ASSERT_EQ(launch(1), PcAction::kEnable);
  g_now += kMs;
  EXPECT_EQ(launch(0), PcAction::kJoin);
  // A context never seen: nothing.
  episodes_->on_context_destroy(context(7));
}

TEST_F(PcEpisodesTest, ShutdownEndsEveryEpisodeAndLeavesPcSamplingUnusable) {
  build();
  ASSERT_EQ(launch(0), PcAction::kEnable);
  g_now += kMs;
  ASSERT_EQ(launch(1), PcAction::kJoin);
  episodes_->shutdown();
  EXPECT_EQ(count(fake_.calls, "Disable"), 2u);
  EXPECT_FALSE(state_.any_enabled.load());
  EXPECT_FALSE(state_.usable.load());
  const size_t calls = fake_.calls.size();
  g_now += 100 * kSec;
  EXPECT_EQ(launch(0), PcAction::kNone);
  EXPECT_EQ(fake_.calls.size(), calls);
  EXPECT_EQ(episodes_->stats().disables, 2u);
}

TEST_F(PcEpisodesTest, AFailedCallTurnsPcSamplingOffForTheProcess) {
  build();
  ASSERT_EQ(launch(0), PcAction::kEnable);
  g_now += kMs;
  ASSERT_EQ(launch(1), PcAction::kJoin);
  fake_.failing = "Start";
  for (int i = 0; i < 2000 && state_.usable.load(); ++i, g_now += kMs) launch(0);
  EXPECT_FALSE(state_.usable.load());
  EXPECT_TRUE(episodes_->stats().failed);
  // Both contexts disabled, nothing left enabled or held.
  EXPECT_EQ(count(fake_.calls, "Disable"), 2u);
  EXPECT_FALSE(state_.any_enabled.load());
  EXPECT_FALSE(enabled(0));
  EXPECT_FALSE(enabled(1));
  EXPECT_FALSE(state_.window_open.load());
  EXPECT_FALSE(activity_.held_on);
  // Nothing more is asked of CUPTI.
  fake_.failing.clear();
  const size_t calls = fake_.calls.size();
  g_now += 100 * kSec;
  EXPECT_EQ(launch(0), PcAction::kNone);
  EXPECT_EQ(fake_.calls.size(), calls);
}

TEST_F(PcEpisodesTest, AFailedEnableLeavesNothingHeld) {
  build();
  fake_.failing = "Enable";
  launch(0);
  EXPECT_FALSE(state_.usable.load());
  EXPECT_EQ(episodes_->stats().episodes, 0u);
  EXPECT_FALSE(state_.any_enabled.load());
  EXPECT_FALSE(activity_.held_on);
  PcDeviceLocks other(lock_dir_);
  EXPECT_EQ(other.try_acquire("any"), PcDeviceLocks::Result::kAcquired) << "GPU lock kept";
}

TEST_F(PcEpisodesTest, AnEpisodeWaitsWhileAnotherProcessSamplesTheGpu) {
  build();
  PcDeviceLocks other(lock_dir_);
  ASSERT_EQ(other.try_acquire("any"), PcDeviceLocks::Result::kAcquired);
  EXPECT_EQ(launch(0), PcAction::kNone);
  EXPECT_EQ(count(fake_.calls, "Enable"), 0u);
  EXPECT_EQ(episodes_->stats().put_off_for_other_process, 1u);
  // The schedule put off too: no launch comes to ask before the lock may be asked again.
  EXPECT_EQ(schedule_->next_episode_ns(), g_now + PcGpuLocks::kOtherProcessRetryNs);
  other.release("any");
  g_now += PcGpuLocks::kOtherProcessRetryNs;
  EXPECT_EQ(launch(0), PcAction::kEnable);
}

TEST_F(PcEpisodesTest, AContextCreatedBeginsAnEpisodeAtOnce) {
  build();
  run_first_episode(0, kMs);
  ASSERT_EQ(launch(0), PcAction::kNone) << "the duty cap's gap";
  EXPECT_TRUE(episodes_->learn_again());
  EXPECT_EQ(launch(0), PcAction::kEnable);
}

TEST_F(PcEpisodesTest, AModuleLoadedBetweenEpisodesBeginsOneAtOnce) {
  build();
  EXPECT_FALSE(episodes_->resume_for_module()) << "before the first episode, which learns anyway";
  run_first_episode(0, kMs);
  ASSERT_EQ(launch(0), PcAction::kNone) << "the duty cap's gap";
  EXPECT_TRUE(episodes_->resume_for_module());
  EXPECT_EQ(episodes_->stats().module_resumes, 1u);
  EXPECT_EQ(launch(0), PcAction::kEnable);
}

}  // namespace
}  // namespace parcagpu
