// subscription_plan.h: what the watcher does to the launch callbacks' subscription (windows,
// continuous, draining, claims abandoned) and how a picked launch is admitted, on a fake clock
// and fake launch sequences. The phase is moved here as LaunchCallbacks moves it (no CUPTI).
#include "subscription_plan.h"

#include <gtest/gtest.h>

#include <ostream>

namespace parcagpu {

// Failures name the values (gtest finds these by ADL).
static std::ostream &operator<<(std::ostream &os, SubscriptionWant w) {
  static const char *const names[] = {"kNone", "kWindows", "kContinuous"};
  return os << names[static_cast<int>(w)];
}
static std::ostream &operator<<(std::ostream &os, DrainStep d) {
  static const char *const names[] = {"kBackToContinuous", "kWait", "kOff", "kOffAbandoning"};
  return os << names[static_cast<int>(d)];
}
static std::ostream &operator<<(std::ostream &os, RoleAction a) {
  static const char *const names[] = {
      "kNone",  "kEnableContinuous", "kWindowsToContinuous", "kAdaptCoin",
      "kDrain", "kOpenWindow",       "kSaturated",           "kCloseWindow"};
  return os << names[static_cast<int>(a)];
}
static std::ostream &operator<<(std::ostream &os, Admission a) {
  static const char *const names[] = {"kRefused", "kClaim", "kContinuous"};
  return os << names[static_cast<int>(a)];
}

namespace {

constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;
using W = SubscriptionWant;
using P = RolePhase;

TEST(SubscriptionPlan, WhatIsWanted) {
  EXPECT_EQ(subscription_want(false, true, true, true, false), W::kNone);        // not subscribed
  EXPECT_EQ(subscription_want(true, true, false, true, false), W::kContinuous);  // PC sampling
  EXPECT_EQ(subscription_want(true, false, false, true, false), W::kNone);
  EXPECT_EQ(subscription_want(true, false, true, true, false), W::kWindows);
  EXPECT_EQ(subscription_want(true, false, true, false, false), W::kContinuous);  // high limits
  EXPECT_EQ(subscription_want(true, false, true, true, true), W::kContinuous);    // saturated
}

TEST(SubscriptionPlan, ADrainWaitsForTheAnnouncedLaunchesInFlightThenGoesOff) {
  const uint64_t since = 5 * kSec;
  EXPECT_EQ(drain_step(W::kContinuous, 3, since + kMs, since), DrainStep::kBackToContinuous);
  EXPECT_EQ(drain_step(W::kNone, 1, since + kMs, since), DrainStep::kWait);
  EXPECT_EQ(drain_step(W::kWindows, 1, since + kMs, since), DrainStep::kWait);
  EXPECT_EQ(drain_step(W::kNone, 0, since + kMs, since), DrainStep::kOff);
  // One that never comes back is given up, and counted.
  EXPECT_EQ(drain_step(W::kNone, 1, since + kAbandonAfterNs + 1, since), DrainStep::kOffAbandoning);
  EXPECT_EQ(drain_step(W::kNone, 1, since + kAbandonAfterNs, since), DrainStep::kWait);
}

TEST(SubscriptionPlan, AClaimIsAbandonedOnlyPastTheLimit) {
  EXPECT_FALSE(claim_abandoned(P::kClaimed, kSec + kAbandonAfterNs, kSec));
  EXPECT_TRUE(claim_abandoned(P::kClaimed, kSec + kAbandonAfterNs + 1, kSec));
  EXPECT_FALSE(claim_abandoned(P::kOpen, kSec + 2 * kAbandonAfterNs, kSec));
}

TEST(SubscriptionPlan, ContinuousFromEveryPhase) {
  WatcherRoleState s;
  const uint64_t t = kSec;
  EXPECT_EQ(plan_role(s, W::kContinuous, P::kOff, 0, t).action, RoleAction::kEnableContinuous);
  EXPECT_EQ(plan_role(s, W::kContinuous, P::kOpen, 0, t).action, RoleAction::kWindowsToContinuous);
  const RolePlan p = plan_role(s, W::kContinuous, P::kContinuous, 0, t);
  EXPECT_EQ(p.action, RoleAction::kAdaptCoin);
  EXPECT_EQ(p.next_ns, t + kCoinTickNs);
  EXPECT_FALSE(p.wake_by_phase);
  // A claimed or closing window is its claimant's to close, whatever is wanted.
  for (W w : {W::kNone, W::kWindows, W::kContinuous})
    for (P ph : {P::kClaimed, P::kClosing}) {
      const RolePlan c = plan_role(s, w, ph, 10 * kMs, t);
      EXPECT_EQ(c.action, RoleAction::kNone);
      EXPECT_EQ(c.next_ns, t + kLookSoonNs);
    }
}

TEST(SubscriptionPlan, NobodyListeningDrainsContinuousAndClosesAnOpenWindow) {
  WatcherRoleState s;
  const RolePlan d = plan_role(s, W::kNone, P::kContinuous, 0, 7 * kSec);
  EXPECT_EQ(d.action, RoleAction::kDrain);
  EXPECT_EQ(d.next_ns, 7 * kSec + kLookSoonNs);
  EXPECT_EQ(s.draining_since_ns, 7 * kSec);
  EXPECT_EQ(plan_role(s, W::kNone, P::kOpen, 0, 8 * kSec).action, RoleAction::kCloseWindow);
  const RolePlan off = plan_role(s, W::kNone, P::kOff, 0, 8 * kSec);
  EXPECT_EQ(off.action, RoleAction::kNone);
  EXPECT_EQ(off.next_ns, 8 * kSec + kLookNeverNs);
  // Windows wanted while continuous: drained first, then off, then windows.
  EXPECT_EQ(plan_role(s, W::kWindows, P::kContinuous, 10 * kMs, 9 * kSec).action,
            RoleAction::kDrain);
}

// The watcher and one launching thread, windowed: the watcher opens a window when it is due, a
// launch claims it and its EXIT closes it. Returns the windows opened from t0 to t_end, with a
// launch every launch_gap_ns (0: none).
struct WindowedRole {
  WatcherRoleState s;
  P phase = P::kOff;
  uint64_t interval = 10 * kMs;
  uint64_t opened = 0;

  // One watcher tick at `now`: applies the plan as LaunchCallbacks::apply_plan does; when to tick
  // again.
  uint64_t tick(uint64_t now) {
    const RolePlan p = plan_role(s, W::kWindows, phase, interval, now);
    if (p.action == RoleAction::kOpenWindow) {
      phase = P::kOpen;
      ++opened;
      window_opened(s, interval, now);
    }
    if (p.action == RoleAction::kSaturated) phase = P::kOpen;  // left as it is: continuous next
    return p.wake_by_phase ? next_window_look(phase, s, interval, now) : p.next_ns;
  }
  // A launch the coin picked: claims an open window and closes it at its EXIT.
  void launch() {
    if (admission(1000, phase, true) == Admission::kClaim) phase = P::kOff;
  }
};

TEST(SubscriptionPlan, WindowsOpenOncePerIntervalWhileLaunchesClaimThem) {
  WindowedRole r;
  uint64_t next_tick = 0;
  for (uint64_t t = 0; t < kSec; t += kMs / 4) {
    if (t >= next_tick) next_tick = r.tick(t);
    r.launch();
  }
  EXPECT_GE(r.opened, 99u);
  EXPECT_LE(r.opened, 101u);
  EXPECT_FALSE(r.s.low_rate);
}

TEST(SubscriptionPlan, WindowsNobodyClaimsSaturateAndTheRoleGoesContinuous) {
  WindowedRole r;
  uint64_t t = 0, next_tick = 0;
  for (; t < kSec && !r.s.low_rate; t += kMs)
    if (t >= next_tick) next_tick = r.tick(t);
  ASSERT_TRUE(r.s.low_rate);
  EXPECT_EQ(r.opened, 1u);
  // First window at 0, still open when due at 10 ms, 20 ms, 30 ms: the third time.
  EXPECT_EQ(t, 30 * kMs + kMs);
  EXPECT_EQ(subscription_want(true, false, true, true, r.s.low_rate), W::kContinuous);
}

TEST(SubscriptionPlan, WindowsOpenedInWaitsTurnTheRoleContinuousForAWhile) {
  WatcherRoleState s;
  uint64_t t = kSec;
  // A launch-bound thread: the first launch comes microseconds after each window opens.
  for (uint32_t i = 0; i < 3 * kIdleJudgedWindows; ++i, t += 10 * kMs)
    EXPECT_FALSE(window_judged(s, t, t + 5'000, t + kMs));
  EXPECT_FALSE(s.windows_unfit());
  // Waiting 2 windows in 20 is not enough; a verdict clears the counts.
  for (uint32_t i = 0; i < kIdleJudgedWindows; ++i, t += 10 * kMs)
    EXPECT_FALSE(window_judged(s, t, t + (i < 2 ? 5 * kMs : 5'000), t + kMs));
  // The thread waits on the GPU: 18 windows of 20 open in the wait (the other two just at the
  // bound, which is not a wait), the 20th gives the verdict.
  bool verdict = false;
  for (uint32_t i = 0; i < kIdleJudgedWindows; ++i, t += 10 * kMs) {
    EXPECT_FALSE(verdict);
    const uint64_t first = i < 18 ? t + kIdleOpenNs + 1 : t + kIdleOpenNs;
    verdict = window_judged(s, t, first, t + kMs);
  }
  EXPECT_TRUE(verdict);
  EXPECT_TRUE(s.idle);
  EXPECT_EQ(subscription_want(true, false, true, true, s.windows_unfit()), W::kContinuous);
  // Held for kIdleHoldNs, then back to windows to be judged again.
  const uint64_t verdict_at = t - 10 * kMs + kMs;
  EXPECT_FALSE(idle_hold_over(s, verdict_at + kIdleHoldNs - 1));
  EXPECT_TRUE(idle_hold_over(s, verdict_at + kIdleHoldNs));
  EXPECT_FALSE(s.windows_unfit());
  EXPECT_FALSE(idle_hold_over(s, verdict_at + 2 * kIdleHoldNs));
  // 17 of 20 is not a verdict.
  for (uint32_t i = 0; i < kIdleJudgedWindows; ++i, t += 10 * kMs)
    EXPECT_FALSE(window_judged(s, t, t + (i < 17 ? 5 * kMs : 5'000), t + kMs));
  EXPECT_FALSE(s.idle);
}

TEST(SubscriptionPlan, NoWindowsWhileTheIntervalIsUnknown) {
  WatcherRoleState s;
  const RolePlan p = plan_role(s, W::kWindows, P::kOff, 0, kSec);
  EXPECT_EQ(p.action, RoleAction::kNone);
  EXPECT_EQ(p.next_ns, kSec + kLookNeverNs);
}

TEST(SubscriptionPlan, AdmissionOfAPickedLaunch) {
  EXPECT_EQ(admission(100, P::kOpen, true), Admission::kClaim);
  EXPECT_EQ(admission(100, P::kContinuous, true), Admission::kContinuous);
  EXPECT_EQ(admission(0, P::kOpen, true), Admission::kRefused);     // never announced
  EXPECT_EQ(admission(100, P::kOpen, false), Admission::kRefused);  // the consumer left
  for (P ph : {P::kOff, P::kClaimed, P::kClosing, P::kDraining})
    EXPECT_EQ(admission(100, ph, true), Admission::kRefused);
}

TEST(SubscriptionPlan, LaunchRatesGoUpAtOnceAndDownSmoothly) {
  EXPECT_EQ(updated_launch_rate(-1, 500, kCoinTickNs), 500);   // none yet
  EXPECT_EQ(updated_launch_rate(100, 201, kCoinTickNs), 201);  // more than doubled: at once
  // Down: a fifth of the way per 100 ms tick (time constant 500 ms), all of it after 500 ms.
  EXPECT_DOUBLE_EQ(updated_launch_rate(100, 0, kCoinTickNs), 80);
  EXPECT_DOUBLE_EQ(updated_launch_rate(100, 0, 2 * static_cast<uint64_t>(kRateSmoothingNs)), 0);
}

TEST(SubscriptionPlan, WindowsTheLimitsAllow) {
  EXPECT_TRUE(rate_allows_windows(kMaxWindowRate, 10));
  EXPECT_FALSE(rate_allows_windows(kMaxWindowRate + 1, 10));
  EXPECT_EQ(window_interval_ns(100), 10 * kMs);
  EXPECT_EQ(window_interval_ns(1e9), 1'000'000u);  // at most kMaxWindowRate a second
  EXPECT_EQ(window_interval_ns(0), 0u);
  EXPECT_DOUBLE_EQ(smoothed_window_count(0, 16), 1);
  EXPECT_DOUBLE_EQ(smoothed_window_count(16, 16), 16);
  // Saturated windows go back once launches come kBackToWindowsFactor x a window's mean span
  // x the window rate (3 x 16 x 100 = 4800 a second).
  const double back = kBackToWindowsFactor * kWindowMeanLaunches * 100;
  EXPECT_FALSE(back_to_windows(back, 100));
  EXPECT_TRUE(back_to_windows(back + 1, 100));
}

}  // namespace
}  // namespace parcagpu
