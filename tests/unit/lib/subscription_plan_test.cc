// subscription_plan.h: what the watcher does to the launch callbacks' subscription (on while
// anybody wants launches, the coin's mean kept, drained before going off) and how a picked launch
// is admitted, on a fake clock. The phase is moved here as LaunchCallbacks moves it (no CUPTI).
#include "launch/subscription_plan.h"

#include <gtest/gtest.h>

#include <ostream>

namespace parcagpu {

// Failures name the values (gtest finds these by ADL).
static std::ostream &operator<<(std::ostream &os, SubscriptionWant w) {
  static const char *const names[] = {"kNone", "kContinuous"};
  return os << names[static_cast<int>(w)];
}
static std::ostream &operator<<(std::ostream &os, DrainStep d) {
  static const char *const names[] = {"kBackToContinuous", "kWait", "kOff", "kOffAbandoning"};
  return os << names[static_cast<int>(d)];
}
static std::ostream &operator<<(std::ostream &os, RoleAction a) {
  static const char *const names[] = {"kNone", "kEnableContinuous", "kAdaptCoin", "kDrain"};
  return os << names[static_cast<int>(a)];
}
static std::ostream &operator<<(std::ostream &os, Admission a) {
  static const char *const names[] = {"kRefused", "kLearning", "kAdmit"};
  return os << names[static_cast<int>(a)];
}

namespace {

constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;
using W = SubscriptionWant;
using P = RolePhase;

// Whoever listens, every launch reaches the coin: there is no mode in which launches are picked
// by when they come (issue 41).
TEST(SubscriptionPlan, WhatIsWanted) {
  EXPECT_EQ(subscription_want(false, true, true), W::kNone);        // not subscribed
  EXPECT_EQ(subscription_want(true, true, false), W::kContinuous);  // PC sampling
  EXPECT_EQ(subscription_want(true, false, true), W::kContinuous);  // a launch consumer
  EXPECT_EQ(subscription_want(true, true, true), W::kContinuous);
  EXPECT_EQ(subscription_want(true, false, false), W::kNone);  // nobody: nothing subscribed
}

TEST(SubscriptionPlan, ADrainWaitsForTheAnnouncedLaunchesInFlightThenGoesOff) {
  const uint64_t since = 5 * kSec;
  EXPECT_EQ(drain_step(W::kContinuous, 3, since + kMs, since), DrainStep::kBackToContinuous);
  EXPECT_EQ(drain_step(W::kNone, 1, since + kMs, since), DrainStep::kWait);
  EXPECT_EQ(drain_step(W::kNone, 0, since + kMs, since), DrainStep::kOff);
  // One that never comes back is given up, and counted.
  EXPECT_EQ(drain_step(W::kNone, 1, since + kAbandonAfterNs + 1, since), DrainStep::kOffAbandoning);
  EXPECT_EQ(drain_step(W::kNone, 1, since + kAbandonAfterNs, since), DrainStep::kWait);
}

TEST(SubscriptionPlan, WantedTurnsTheCallbacksOnThenKeepsTheCoinsMean) {
  WatcherRoleState s;
  const uint64_t t = 7 * kSec;
  RolePlan p = plan_role(s, W::kContinuous, P::kOff, t);
  EXPECT_EQ(p.action, RoleAction::kEnableContinuous);
  EXPECT_EQ(p.next_ns, t + kLearnNs);  // the launch rate learned by then
  p = plan_role(s, W::kContinuous, P::kContinuous, t);
  EXPECT_EQ(p.action, RoleAction::kAdaptCoin);
  EXPECT_EQ(p.next_ns, t + kCoinTickNs);
  // Draining is settled before the plan (drain_step): nothing more to do here.
  EXPECT_EQ(plan_role(s, W::kContinuous, P::kDraining, t).action, RoleAction::kNone);
}

TEST(SubscriptionPlan, NobodyListeningDrainsThenStaysOff) {
  WatcherRoleState s;
  RolePlan p = plan_role(s, W::kNone, P::kContinuous, 8 * kSec);
  EXPECT_EQ(p.action, RoleAction::kDrain);
  EXPECT_EQ(s.draining_since_ns, 8 * kSec);
  EXPECT_EQ(p.next_ns, 8 * kSec + kLookSoonNs);  // soon: the drain is awaited
  p = plan_role(s, W::kNone, P::kOff, 9 * kSec);
  EXPECT_EQ(p.action, RoleAction::kNone);
  EXPECT_EQ(p.next_ns, 9 * kSec + kLookNeverNs);
}

TEST(SubscriptionPlan, AdmissionOfAPickedLaunch) {
  EXPECT_EQ(admission(100, P::kContinuous, true, true), Admission::kAdmit);
  EXPECT_EQ(admission(0, P::kContinuous, true, true), Admission::kRefused);     // never announced
  EXPECT_EQ(admission(100, P::kContinuous, false, true), Admission::kRefused);  // consumer left
  for (P ph : {P::kOff, P::kDraining})
    EXPECT_EQ(admission(100, ph, true, true), Admission::kRefused);
  // While the launch rate is learned, no pick is announced (the safety cap would choose by time).
  EXPECT_EQ(admission(100, P::kContinuous, true, false), Admission::kLearning);
  EXPECT_EQ(admission(0, P::kContinuous, true, false), Admission::kRefused);
}

TEST(SubscriptionPlan, LaunchRatesGoUpAtOnceAndDownSmoothly) {
  EXPECT_EQ(updated_launch_rate(-1, 500, kCoinTickNs), 500);   // none yet
  EXPECT_EQ(updated_launch_rate(100, 201, kCoinTickNs), 201);  // more than doubled: at once
  // Down: a fifth of the way per 100 ms tick (time constant 500 ms), all of it after 500 ms.
  EXPECT_DOUBLE_EQ(updated_launch_rate(100, 0, kCoinTickNs), 80);
  EXPECT_DOUBLE_EQ(updated_launch_rate(100, 0, 2 * static_cast<uint64_t>(kRateSmoothingNs)), 0);
}

// The launch rate is learned first at the rate limits where the coin must be below 1 to meet
// them; an operator who wants every launch (limits above kLowRateLimit) needs no learning.
TEST(SubscriptionPlan, TheLaunchRateIsLearnedFirstAtLowLimits) {
  EXPECT_TRUE(must_learn_rate(100, 20));  // the defaults
  EXPECT_TRUE(must_learn_rate(kLowRateLimit, kLowRateLimit));
  EXPECT_FALSE(must_learn_rate(kLowRateLimit + 1, 20));
  EXPECT_FALSE(must_learn_rate(100, 1e9));
  // Learned once enough launches were seen, or a while with a few (a slow launcher).
  EXPECT_FALSE(launch_rate_known(0, 10 * kSec));
  EXPECT_FALSE(launch_rate_known(kLearnLaunches - 1, kLearnNs));
  EXPECT_TRUE(launch_rate_known(kLearnLaunches, kLearnNs / 2));
  EXPECT_TRUE(launch_rate_known(1, kLearnLongestNs));
  EXPECT_EQ(coin_interval_ns(false), kLearnNs / 2);
  EXPECT_EQ(coin_interval_ns(true), kCoinTickNs / 2);
}

// One cap over every pick, of either kind: when it binds it takes from each kind in proportion.
TEST(SubscriptionPlan, OneSafetyCapForEveryKind) {
  EXPECT_DOUBLE_EQ(safety_cap_rate(100, 20), kSafetyCapFactor * 120);
  EXPECT_DOUBLE_EQ(safety_cap_rate(100, 0), kSafetyCapFactor * 100);  // graph never announced
  EXPECT_DOUBLE_EQ(safety_cap_rate(-1, 20), kSafetyCapFactor * 20);
}

}  // namespace
}  // namespace parcagpu
