// The watcher's side of the launch callbacks (LaunchSwitch) on a fake CUPTI table
// (fake_launch_cupti.h): the plans of subscription_plan.h carried out. The launch cbids go on when
// a consumer comes, off when it leaves, once the announced launches in their call have ended (or
// one stuck past kAbandonAfterNs is given up); a consumer back before that keeps the epoch.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "base/clock.h"
#include "fake_launch_cupti.h"

namespace parcagpu::fake_launch {
namespace {

using LaunchSwitchTest = LaunchFixture;

// An application thread inside a launch call (cuLaunchKernel) until told to leave it.
class ThreadInLaunch {
 public:
  ThreadInLaunch(LaunchFixture *f, uint32_t corr, bool exits = true)
      : thread_([this, f, corr, exits] {
          f->enter(CbDomain::Driver, 307, corr);
          {
            std::unique_lock<std::mutex> lock(mu_);
            entered_ = true;
            cv_.notify_all();
            cv_.wait(lock, [this] { return leave_; });
          }
          if (exits) f->exit(CbDomain::Driver, 307, corr);
        }) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return entered_; });
  }
  ~ThreadInLaunch() { leave(); }
  void leave() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      leave_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false, leave_ = false;
  std::thread thread_;  // last: started once the rest is built
};

// From process start only the callbacks that are no launches are on: with nobody listening the
// library is never called on a launch.
TEST_F(LaunchSwitchTest, NoLaunchCbidIsOnUntilAConsumerComes) {
  build();
  EXPECT_TRUE(fake_.subscribed);
  EXPECT_FALSE(switch_->from_start().empty());
  EXPECT_FALSE(fake_.enabled.empty());
  EXPECT_FALSE(any_launch_cbid_on());
  switch_->on_tick(monotonic_ns());
  EXPECT_FALSE(any_launch_cbid_on()) << "nobody wants launches";
  EXPECT_EQ(phase(), RolePhase::kOff);
}

TEST_F(LaunchSwitchTest, AConsumerTurnsEveryLaunchCbidOnAndItsLeavingOffAfterTheDrain) {
  build();
  switch_->on_consumers(launch_consumer(), {});
  EXPECT_TRUE(launch_cbids_on());
  EXPECT_EQ(phase(), RolePhase::kContinuous);
  EXPECT_EQ(epoch(), 1u);
  // The consumer leaves: drained first (kDraining, cbids still on), off at the next look.
  switch_->on_consumers({}, launch_consumer());
  EXPECT_EQ(phase(), RolePhase::kDraining);
  EXPECT_TRUE(launch_cbids_on());
  switch_->on_tick(monotonic_ns());
  expect_off();
  // And on again, in a new epoch, when one comes back.
  switch_->on_consumers(launch_consumer(), {});
  EXPECT_TRUE(launch_cbids_on());
  EXPECT_EQ(epoch(), 2u);
}

// An announced launch keeps the callbacks on until its EXIT (which announces it), then they go.
TEST_F(LaunchSwitchTest, ADrainWaitsForTheAnnouncedLaunchInItsCall) {
  build_attached();
  ThreadInLaunch t(this, 61);
  EXPECT_EQ(inflight(), 1);
  switch_->on_consumers({}, launch_consumer());
  const uint64_t next = switch_->on_tick(monotonic_ns());
  EXPECT_EQ(phase(), RolePhase::kDraining);
  EXPECT_TRUE(launch_cbids_on()) << "not off under an admitted launch";
  EXPECT_LE(next, monotonic_ns() + kLookSoonNs) << "looked at again soon";
  t.leave();
  EXPECT_EQ(stats().announced_eager.load(), 1u);
  switch_->on_tick(monotonic_ns());
  expect_off();
  EXPECT_EQ(stats().abandoned.load(), 0u);
}

// One that never leaves its call cannot hold the callbacks on: after kAbandonAfterNs they go off
// all the same, and it is counted given up.
TEST_F(LaunchSwitchTest, ALaunchStuckInItsCallIsGivenUpAfterKAbandonAfterNs) {
  build_attached();
  { ThreadInLaunch t(this, 71, /*exits=*/false); }
  switch_->on_consumers({}, launch_consumer());
  const uint64_t now = monotonic_ns();
  switch_->on_tick(now);
  EXPECT_EQ(phase(), RolePhase::kDraining);
  switch_->on_tick(now + kAbandonAfterNs + kLookSoonNs);
  expect_off();
  EXPECT_EQ(stats().abandoned.load(), 1u);
}

// A consumer back before the drain ended: the cbids never went off, the epoch stays (threads
// inside a launch call keep what they knew).
TEST_F(LaunchSwitchTest, AConsumerBackBeforeTheDrainEndedKeepsTheEpoch) {
  build_attached();
  ThreadInLaunch t(this, 81);
  switch_->on_consumers({}, launch_consumer());
  EXPECT_EQ(phase(), RolePhase::kDraining);
  switch_->on_consumers(launch_consumer(), {});
  EXPECT_EQ(phase(), RolePhase::kContinuous);
  EXPECT_EQ(epoch(), 1u);
  EXPECT_EQ(fake_.launch_disables, 0);
  t.leave();
  EXPECT_EQ(stats().announced_eager.load(), 1u);
}

// Unsubscribing turns every callback off, the launch cbids included, then unsubscribes.
TEST_F(LaunchSwitchTest, UnsubscribeTurnsEveryCallbackOff) {
  build_attached();
  EXPECT_TRUE(launch_cbids_on());
  switch_->unsubscribe();
  EXPECT_TRUE(fake_.enabled.empty());
  EXPECT_FALSE(fake_.subscribed);
  EXPECT_EQ(phase(), RolePhase::kOff);
}

// The launch rate is learned while the coin's mean is 1; once measured the mean meets the rate
// limit (inclusion_mean), and launches are announced from then on.
TEST_F(LaunchSwitchTest, TheLaunchRateIsLearnedThenTheMeanMeetsTheLimit) {
  config_.eager_rate_limit = 100;
  config_.graph_rate_limit = 20;
  build_attached();
  EXPECT_FALSE(callbacks_->role().rate_learned.load());
  on_new_thread([&] {
    for (uint32_t i = 1; i <= 2 * kLearnLaunches; ++i) driver_launch(i);
  });
  EXPECT_EQ(announced(), 0u);
  const uint64_t now = monotonic_ns() + kLearnNs;
  switch_->on_tick(now);
  EXPECT_TRUE(callbacks_->role().rate_learned.load());
  // 200 launches in at most the time since the callbacks went on: the mean is the launch rate
  // over the eager limit.
  EXPECT_GE(callbacks_->role().coin.mean(), 2);
}

}  // namespace
}  // namespace parcagpu::fake_launch
