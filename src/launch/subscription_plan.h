// What the launch callbacks' subscription should do next: the decisions of
// LaunchSwitch::reconcile (the watcher thread: the launch cbids on while anybody wants launches,
// the coin's mean kept at the rate limits, subscriptions drained before their cbids go off) and
// of AnnouncedLaunches::admit (a launch the coin picked: counted in flight under the safety cap),
// as pure functions of the role's phase (role_state.h), what is wanted, the watcher's own state
// and the clock. No CUPTI, no atomics, no lock: LaunchSwitch and AnnouncedLaunches load the
// state, take the toggle lock and compare-and-swap where the phase may have moved meanwhile, and
// make the cuptiEnableCallback calls. Unit-tested on a fake clock in
// tests/unit/lib/subscription_plan_test.cc, and as applied in launch_switch_test.cc.
//
// From process start only the non-launch entries of kSubscribedCallbacks are enabled (graph
// resources: what must be seen before any consumer comes). The launch callbacks are enabled
// only while a consumer listens to cuda_correlation (or PC sampling needs launches), so with
// nobody listening the library is never called on a launch. While they are on, every launch
// tosses one coin (launch_gate.h), the same for eager and graph launches: which launches are
// announced depends on their count alone, never on when they come (the consumer sums the GPU
// time of what it is told about and cannot be told a weight). The watcher sets the coin's mean
// every kCoinTickNs from each kind's launches counted, so that no kind's announcements exceed
// its rate limit (inclusion_mean: the kind furthest over its limit sets the one probability); a
// RateGate per kind at kSafetyCapFactor x its limit only caps the moment a launch rate jumps.
//
// Why no sampling windows (callbacks on for a moment, a few times a second, as before issue 41).
// A window opens at a time point, so the launches it can pick are those after time points: a
// launch preceded by a long CPU stretch (cuBLAS choosing a GEMM, Python between steps, a
// synchronize) and its next neighbours were picked more often, and a graph replay after a burst
// of eager launches less. On an H200 the PyTorch eager training loop read 11-12 points off
// torch.profiler's GPU time by kernel with windows and 1.8 with every launch tossing the coin,
// which cost no more than the windows there (x1.013 against x1.012 of no library; measurements
// in docs/measurements/). The windows' only gain, launches between windows that reach no
// callback, is given up.
#pragma once

#include <algorithm>
#include <cstdint>

#include "launch/role_state.h"

namespace parcagpu {

// The safety cap on picks: kSafetyCapFactor times the sum of the rate limits, one cap over every
// pick whatever its kind, and its burst (ns of it). One cap, not one per kind: when it binds (the
// launch rate jumped before the coin's mean followed) it chooses by time, but takes from every
// kind in proportion to its picks; a cap per kind took the eager picks of a jump and left the
// graph ones (the mock's CpuStretches under CPU load read the graph side 2.3-3.0 points high).
inline constexpr double kSafetyCapFactor = 4;
inline constexpr uint64_t kSafetyCapBurstNs = 50000000ull;
inline double safety_cap_rate(double eager_limit, double graph_limit) {
  return kSafetyCapFactor * (std::max(eager_limit, 0.0) + std::max(graph_limit, 0.0));
}
// The time constant of the launch-rate estimate the coin's mean is set from.
inline constexpr double kRateSmoothingNs = 500000000.0;
// Learning the launch rate. When the callbacks go on, nothing is known of the launch rate, so
// no mean can meet the limits: a guess too low would have the safety cap choose the announced
// launches, by time (the mock's loop of 22 launches at ~100,000 a second, started at a mean of
// 16: 217 picks over the cap in its first 100 ms, and each eager launch 0.82x as likely to be
// announced as a graph launch over a 10 s run). So the coin starts at mean 1 (every launch adds
// itself to the shared count, so the watcher sees the rate) and no launch is announced until
// the rate was measured over at least kLearnNs / 2 and kLearnLaunches launches (or
// kLearnLongestNs with fewer: a slow launcher, whose mean is 1 anyway); then the mean is set
// from the rate and launches are announced. (Ended at the first launch seen, a program that
// attached before its loop learned a rate of a few launches a second and had its loop's first
// 100 ms chosen by the cap.) Where a rate limit is above kLowRateLimit per
// second (an operator who wants every launch) mean 1 is right from the start: nothing to learn.
inline constexpr double kLowRateLimit = 1000;
inline constexpr uint64_t kLearnNs = 20000000ull;  // 20 ms
inline constexpr uint64_t kLearnLaunches = 100;
inline constexpr uint64_t kLearnLongestNs = 1000000000ull;  // 1 s

// An announced launch still inside its API call after this long is abandoned by the watcher, so
// one stuck thread cannot hold a detach forever.
inline constexpr uint64_t kAbandonAfterNs = 1000000000ull;
// How often the watcher sets the coin's mean from the launches counted.
inline constexpr uint64_t kCoinTickNs = 100000000ull;
// The watcher looks again this soon while a drain is awaited, and "never" is this far away.
inline constexpr uint64_t kLookSoonNs = 1000000;  // 1 ms
inline constexpr uint64_t kLookNeverNs = 1ull << 62;

// Whether the launch rate must be learned before a launch is announced (kLearnNs says why).
inline bool must_learn_rate(double eager_limit, double graph_limit) {
  return eager_limit <= kLowRateLimit && graph_limit <= kLowRateLimit;
}
// Learning: whether `counted` launches over dt_ns tell the launch rate well enough.
inline bool launch_rate_known(uint64_t counted, uint64_t dt_ns) {
  return counted >= kLearnLaunches || (counted > 0 && dt_ns >= kLearnLongestNs);
}
// The coin's mean is adapted once this long has passed since it last was.
inline uint64_t coin_interval_ns(bool rate_learned) {
  return rate_learned ? kCoinTickNs / 2 : kLearnNs / 2;
}

// A kind's launch-rate estimate (per second; < 0: none yet) once `seen` per second were counted
// over dt_ns: up at once (a rise would otherwise be picked at the old mean, up to the safety
// cap), down smoothly.
inline double updated_launch_rate(double rate, double seen, uint64_t dt_ns) {
  if (rate < 0 || seen > 2 * rate) return seen;
  return rate + std::min(1.0, static_cast<double>(dt_ns) / kRateSmoothingNs) * (seen - rate);
}

// What the launch callbacks should be doing.
enum class SubscriptionWant : uint8_t { kNone, kContinuous };

// From what the watcher knows: subscribed with launch cbids to toggle; PC sampling wants every
// launch (or must still be torn down at one); a cuda_correlation consumer listens.
inline SubscriptionWant subscription_want(bool subscribed, bool pc_needs_launches,
                                          bool launch_consumers) {
  if (!subscribed) return SubscriptionWant::kNone;
  return pc_needs_launches || launch_consumers ? SubscriptionWant::kContinuous
                                               : SubscriptionWant::kNone;
}

// The watcher's own state of the role (watcher thread only).
struct WatcherRoleState {
  uint64_t draining_since_ns = 0;  // when kDraining was marked
};

// kDraining, with the toggle lock held: what becomes of it.
enum class DrainStep : uint8_t {
  kBackToContinuous,  // wanted again before the cbids went off: same epoch
  kWait,              // announced launches still in their call: look again soon
  kOff,               // none left: the cbids go off
  kOffAbandoning,     // one never came back (kAbandonAfterNs): off all the same, counted
};

inline DrainStep drain_step(SubscriptionWant w, int32_t inflight, uint64_t now_ns,
                            uint64_t draining_since_ns) {
  if (w == SubscriptionWant::kContinuous) return DrainStep::kBackToContinuous;
  const bool stuck = now_ns - draining_since_ns > kAbandonAfterNs;
  if (inflight > 0 && !stuck) return DrainStep::kWait;
  return stuck ? DrainStep::kOffAbandoning : DrainStep::kOff;
}

// What the watcher does to the role now (once draining is settled).
enum class RoleAction : uint8_t {
  kNone,
  kEnableContinuous,  // kOff -> kContinuous: cbids on, a new epoch, in-flight 0, coin started
                      // (the launch rate learned first: look again after kLearnNs)
  kAdaptCoin,         // kContinuous: the coin's mean from the launches counted
  kDrain,             // kContinuous -> kDraining (then off)
};

struct RolePlan {
  RoleAction action = RoleAction::kNone;
  uint64_t next_ns = 0;  // when to look again (monotonic ns)
};

// The watcher's step for the role, from the phase found after draining was settled. Watcher
// thread; `s` is its own state.
inline RolePlan plan_role(WatcherRoleState &s, SubscriptionWant w, RolePhase phase,
                          uint64_t now_ns) {
  if (w == SubscriptionWant::kContinuous) {
    if (phase == RolePhase::kOff) return {RoleAction::kEnableContinuous, now_ns + kLearnNs};
    const RoleAction a =
        phase == RolePhase::kContinuous ? RoleAction::kAdaptCoin : RoleAction::kNone;
    return {a, now_ns + kCoinTickNs};
  }
  if (phase == RolePhase::kContinuous) {
    s.draining_since_ns = now_ns;
    return {RoleAction::kDrain, now_ns + kLookSoonNs};
  }
  return {RoleAction::kNone, now_ns + kLookNeverNs};
}

// A launch the coin picked, at its ENTER: whether it may be admitted (announced). Picked by the
// coin is the one probability every launch has; a launch PC sampling samples is no exception.
enum class Admission : uint8_t {
  kRefused,   // this kind is never announced (limit <= 0), the callbacks are going off, or the
              // consumer left (the watcher follows)
  kLearning,  // the launch rate is still being learned (kLearnNs): not announced, counted
  kAdmit,     // the safety cap, then counted in flight
};

inline Admission admission(double kind_limit, RolePhase phase, bool correlation_consumers,
                           bool rate_learned) {
  if (kind_limit <= 0) return Admission::kRefused;  // the operator's: never announced
  if (phase != RolePhase::kContinuous) return Admission::kRefused;
  if (!correlation_consumers) return Admission::kRefused;
  return rate_learned ? Admission::kAdmit : Admission::kLearning;
}

}  // namespace parcagpu
