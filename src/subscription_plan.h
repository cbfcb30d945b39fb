// What the launch callbacks' subscription should do next: the decisions of
// LaunchCallbacks::reconcile (the watcher thread: windows opened on time, continuous subscriptions
// drained before their cbids go off, claims abandoned) and of LaunchCallbacks::admit (a launch the
// coin picked: claim the window, or count in flight under the safety cap), as pure functions of
// the role's phase (role_state.h), what is wanted, the watcher's own state and the clock. No
// CUPTI, no atomics, no lock: LaunchCallbacks (launch_roles.cc, launch_callbacks.cc) loads the
// state, takes toggle_mu and compares-and-swaps where the phase may have moved meanwhile, and
// makes the cuptiEnableCallback calls. Unit-tested on a fake clock and fake launch sequences in
// tests/unit/lib/subscription_plan_test.cc.
//
// From process start only the non-launch entries of kSubscribedCallbacks are enabled (graph
// resources: what must be seen before any consumer comes). The launch callbacks are enabled
// only while a consumer listens to cuda_correlation, so with nobody listening the library is
// never called on a launch; and even then not on every launch. Which launches are announced is
// decided by launch count, never by time (launch_gate.h says why): each candidate launch is
// picked by one coin, the same for eager and graph launches, so every launch has the same
// probability of being announced at any moment (the consumer sums the GPU time of what it is
// told about and cannot be told a weight). Each kind's rate limit (eager, graph) caps that one
// probability; it never starves one kind against the other:
//
//  - Windowed (both rate limits at most kMaxWindowRate per second; the defaults are), while
//    launches come fast enough for windows to pay: the watcher enables every launch cbid
//    window_rate() times a second (the most windows that keep each kind within its limit, from
//    each kind's share of the launches counted in windows); launches inside the window toss the
//    coin of mean kWindowMeanLaunches (each thread's first launch in the window is not a
//    candidate); the first one picked, eager or graph, claims the window, is announced, and its
//    own EXIT closes the window. So a window spans ~kWindowMeanLaunches launches and the one it
//    announces is nearly uniform among them, not the one after the idle stretch the window
//    opened in. Launches between windows cost what no subscriber costs.
//  - Continuous: above kMaxWindowRate (e.g. "announce everything"), while PC sampling wants
//    every launch (its windows open and close at launch entries, on application threads) or
//    still has to be torn down at one (PcSampler::needs_launch_path()), and while windows would
//    be open most of the time anyway (launches come at less than about kWindowMeanLaunches x
//    the window rate: windows still open when the next is due, kSaturatedWindows times in a
//    row). The cbids stay on while a consumer listens; each launch tosses the coin, whose mean
//    the watcher sets from each kind's launches counted (inclusion_mean: the kind furthest over
//    its limit sets it); a RateGate per kind at kSafetyCapFactor x its limit is only a cap for
//    the moment a launch rate jumps. A launch inside a PC sampling window is announced only if
//    the coin picks it; the samples of the others go out GPU-only (correlation ID 0).
#pragma once

#include <algorithm>
#include <cstdint>

#include "role_state.h"

namespace parcagpu {

// Sampling windows serve rate limits up to this many announced launches per second per role;
// above it the role's callbacks stay on (toggling would cost more than leaving them on).
// Measured on an H100: see docs/measurements/history.md, "Where the attached cost goes".
inline constexpr double kMaxWindowRate = 1000;
// Windowed: launches a window spans on average before one is picked (each thread's first one
// not counted). The larger, the nearer to uniform the announced launch's position in a periodic
// loop (a window opened in the idle stretch before launch 0 of a loop of P launches claims
// launch i with weight (1 - 1/mean)^i: for P = 3, 35/33/31% at 16, 38/33/29% at 8) and the
// more launches pay the callbacks (about 17 per announced launch). At 8, a GPU-bound loop of
// three launches that synchronizes each step read its second kernel's GPU time 1.5 to 5 points
// high (16.7% true; the mock, test_unbiased_sample MixedEagerAndGraph: 18.1-21.8% in 4 runs,
// one in CI past its 5-point bound); at 16, 16.0-19.9% in 6. A window's callbacks cost about
// 0.5 us each on the H100 (a subscriber of every launch: 1.19-1.27x an eager launch): 17 of them
// at the default ~120 windows a second are ~1 ms a second of one launching thread.
inline constexpr double kWindowMeanLaunches = 16;
// Continuous because windows saturated: back to windows above this many times
// kWindowMeanLaunches x the rate limit (launches per second).
inline constexpr double kBackToWindowsFactor = 3;
// Continuous: the safety cap on picks, times the rate limit, and its burst (ns of it).
inline constexpr double kSafetyCapFactor = 4;
inline constexpr uint64_t kSafetyCapBurstNs = 50000000ull;
// Continuous: the time constant of the launch-rate estimate the coin's mean is set from.
inline constexpr double kRateSmoothingNs = 500000000.0;

// Windows opened while the launching threads wait. A window opens at a time point; in a loop that
// waits for the GPU each step (a synchronize, a full launch queue) most time points fall in the
// wait, so most windows find the loop's head next, and the coin (mean kWindowMeanLaunches) claims
// one of its first launches: in the mock's GPU-bound loop of 24 launches the profile was 18.7
// points off the truth (half the sum of absolute differences), of 96 launches 53 points (the first
// ones 4-8x their share, the last ones nearly never). Continuous callbacks toss the coin on every
// launch wherever it sits. They cost each launch a callback (~0.5 us on the H100), which a thread
// that waits most of the time has room for (waiting on the GPU: hidden; waiting on other work: at
// most the launch time's share of the wall time, small by this very test, times the callback's
// share of a launch). So: a window whose first launch came more than kIdleOpenNs after it opened
// was opened in a wait; when kIdleShareOfWindows of kIdleJudgedWindows windows in a row were, the
// role goes continuous for kIdleHoldNs, then back to windows to judge again.
inline constexpr uint64_t kIdleOpenNs = 100'000;  // far above a launch call's length
inline constexpr uint32_t kIdleJudgedWindows = 20;
inline constexpr double kIdleShareOfWindows = 0.9;
inline constexpr uint64_t kIdleHoldNs = 10'000'000'000ull;

// An announced launch still inside its API call after this long is abandoned by the watcher, so
// one stuck thread cannot hold a window (or a detach) forever.
inline constexpr uint64_t kAbandonAfterNs = 1000000000ull;
// Windows still open when the next is due this many times in a row: the role goes continuous.
inline constexpr uint32_t kSaturatedWindows = 3;
// Continuous: how often the watcher sets the coin's mean from the launches counted.
inline constexpr uint64_t kCoinTickNs = 100000000ull;
// The watcher looks again this soon while a claimant or a drain is awaited, and "never" is this
// far away.
inline constexpr uint64_t kLookSoonNs = 1000000;  // 1 ms
inline constexpr uint64_t kLookNeverNs = 1ull << 62;

// Windows may serve the rate limits (each kind's, per second): none above kMaxWindowRate.
inline bool rate_allows_windows(double eager_limit, double graph_limit) {
  return eager_limit <= kMaxWindowRate && graph_limit <= kMaxWindowRate;
}

// Windowed: between window openings, from the windows a second the limits allow (window_rate,
// launch_gate.h), at most kMaxWindowRate; 0: none known.
inline uint64_t window_interval_ns(double windows_per_s) {
  const double rate = std::min(windows_per_s, kMaxWindowRate);
  return rate > 0 ? static_cast<uint64_t>(1e9 / rate) : 0;
}

// Windowed: a kind's share of the candidates the windows counted, smoothed over about the last
// kShareWindows windows' worth (the next count given `counted` candidates since the last window).
inline double smoothed_window_count(double count, uint64_t counted) {
  constexpr double kShareWindows = 16;
  return count + (static_cast<double>(counted) - count) / kShareWindows;
}

// Continuous: a kind's launch-rate estimate (per second; < 0: none yet) once `seen` per second
// were counted over dt_ns: up at once (a rise would otherwise be picked at the old mean, up to
// the safety cap), down smoothly.
inline double updated_launch_rate(double rate, double seen, uint64_t dt_ns) {
  if (rate < 0 || seen > 2 * rate) return seen;
  return rate + std::min(1.0, static_cast<double>(dt_ns) / kRateSmoothingNs) * (seen - rate);
}

// Continuous because windows saturated: back to windows once launches (all kinds, per second)
// come this fast for the windows a second the limits allow (each spans ~kWindowMeanLaunches).
inline bool back_to_windows(double total_launch_rate, double windows_per_s) {
  return total_launch_rate > kBackToWindowsFactor * kWindowMeanLaunches * windows_per_s;
}

// What the launch callbacks should be doing.
enum class SubscriptionWant : uint8_t { kNone, kWindows, kContinuous };

// From what the watcher knows: subscribed with launch cbids to toggle; PC sampling wants every
// launch (or must still be torn down at one); a cuda_correlation consumer listens; every rate
// limit is low enough for windows; windows were found saturated or opened in waits
// (WatcherRoleState::windows_unfit).
inline SubscriptionWant subscription_want(bool subscribed, bool pc_needs_launches,
                                          bool launch_consumers, bool rate_allows_windows,
                                          bool windows_unfit) {
  if (!subscribed) return SubscriptionWant::kNone;
  if (pc_needs_launches) return SubscriptionWant::kContinuous;
  if (!launch_consumers) return SubscriptionWant::kNone;
  return rate_allows_windows && !windows_unfit ? SubscriptionWant::kWindows
                                               : SubscriptionWant::kContinuous;
}

// The watcher's own state of the role (watcher thread only).
struct WatcherRoleState {
  uint64_t next_open_ns = 0;       // windowed: when the next window is due
  uint32_t saturated = 0;          // windows found still open when the next was due, in a row
  bool low_rate = false;           // continuous because windows saturated
  uint64_t draining_since_ns = 0;  // when kDraining was marked
  // Windows judged since the last verdict, those of them opened in a wait, and whether the role
  // is continuous for that (until idle_until_ns).
  uint32_t judged = 0;
  uint32_t opened_idle = 0;
  bool idle = false;
  uint64_t idle_until_ns = 0;
  bool windows_unfit() const { return low_rate || idle; }
};

// A claimed window, closed: opened_ns when its cbids were all on, first_enter_ns when the first
// launch entered it. True when the role goes continuous for windows opened in waits (then
// s.idle until kIdleHoldNs from now).
inline bool window_judged(WatcherRoleState &s, uint64_t opened_ns, uint64_t first_enter_ns,
                          uint64_t now_ns) {
  ++s.judged;
  if (first_enter_ns > opened_ns + kIdleOpenNs) ++s.opened_idle;
  if (s.judged < kIdleJudgedWindows) return false;
  const bool idle = s.opened_idle >= kIdleShareOfWindows * kIdleJudgedWindows;
  s.judged = s.opened_idle = 0;
  if (!idle) return false;
  s.idle = true;
  s.idle_until_ns = now_ns + kIdleHoldNs;
  return true;
}

// Continuous for windows opened in waits: true once the hold is over (back to windows, judged
// again).
inline bool idle_hold_over(WatcherRoleState &s, uint64_t now_ns) {
  if (!s.idle || now_ns < s.idle_until_ns) return false;
  s.idle = false;
  return true;
}

// kDraining, with toggle_mu held: what becomes of it.
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

// A claimed window whose claimant has been inside its call too long: abandoned by the watcher.
inline bool claim_abandoned(RolePhase phase, uint64_t now_coarse_ns, uint64_t claimed_at_ns) {
  return phase == RolePhase::kClaimed && now_coarse_ns - claimed_at_ns > kAbandonAfterNs;
}

// What the watcher does to the role now (once draining, stale claims and closings are settled).
enum class RoleAction : uint8_t {
  kNone,
  kEnableContinuous,     // kOff -> kContinuous: cbids on, a new epoch, in-flight 0, coin started
  kWindowsToContinuous,  // kOpen -> kContinuous: coin started, the epoch goes on
  kAdaptCoin,            // kContinuous: the coin's mean from the launches counted
  kDrain,                // kContinuous -> kDraining (then off)
  kOpenWindow,           // kOff -> kOpen: coin at the window mean, windows adapted, cbids on
  kSaturated,            // windows stay open: the role goes continuous (low_rate)
  kCloseWindow,          // kOpen -> kOff: nobody wants launches
};

struct RolePlan {
  RoleAction action = RoleAction::kNone;
  // When to look again (monotonic ns); for kOpenWindow and kNone in windows, see wake_by_phase.
  uint64_t next_ns = 0;
  // Windowed: look again by the phase found after the action (next_window_look).
  bool wake_by_phase = false;
};

// Windowed: when to look again. Closed: open the next one on time. Open: an interval later (a
// window nobody claims costs nothing; one claimed and closed meanwhile reopens then).
inline uint64_t next_window_look(RolePhase phase_now, const WatcherRoleState &s,
                                 uint64_t interval_ns, uint64_t now_ns) {
  return phase_now == RolePhase::kOff ? std::max(s.next_open_ns, now_ns) : now_ns + interval_ns;
}

inline RolePlan plan_windows(WatcherRoleState &s, RolePhase phase, uint64_t interval_ns,
                             uint64_t now_ns) {
  if (phase == RolePhase::kContinuous) {
    s.draining_since_ns = now_ns;
    return {RoleAction::kDrain, now_ns + kLookSoonNs, false};  // then off, then windows
  }
  if (interval_ns == 0) return {RoleAction::kNone, now_ns + kLookNeverNs, false};
  if (now_ns < s.next_open_ns) return {RoleAction::kNone, 0, true};
  if (phase == RolePhase::kOff) {
    s.saturated = 0;
    return {RoleAction::kOpenWindow, 0, true};  // next_open_ns: window_opened
  }
  if (++s.saturated >= kSaturatedWindows) {
    // Still open when the next is due, again and again: the role launches too rarely for windows
    // to save anything, and they would announce fewer launches than the limit.
    s.low_rate = true;
    s.saturated = 0;
    return {RoleAction::kSaturated, now_ns, false};
  }
  s.next_open_ns = now_ns + interval_ns;
  return {RoleAction::kNone, 0, true};
}

// A window was opened (kOpenWindow applied, interval_ns adapted to the launches counted): the
// next is due an interval from now.
inline void window_opened(WatcherRoleState &s, uint64_t interval_ns, uint64_t now_ns) {
  s.next_open_ns = now_ns + interval_ns;
}

// The watcher's step for the role, from the phase found after draining, stale claims and
// closings were settled. Watcher thread; `s` is its own state.
inline RolePlan plan_role(WatcherRoleState &s, SubscriptionWant w, RolePhase phase,
                          uint64_t interval_ns, uint64_t now_ns) {
  if (phase == RolePhase::kClosing || phase == RolePhase::kClaimed)
    return {RoleAction::kNone, now_ns + kLookSoonNs, false};  // its claimant closes it
  switch (w) {
    case SubscriptionWant::kContinuous: {
      const RoleAction a = phase == RolePhase::kOff          ? RoleAction::kEnableContinuous
                           : phase == RolePhase::kOpen       ? RoleAction::kWindowsToContinuous
                           : phase == RolePhase::kContinuous ? RoleAction::kAdaptCoin
                                                             : RoleAction::kNone;
      return {a, now_ns + kCoinTickNs, false};
    }
    case SubscriptionWant::kWindows:
      return plan_windows(s, phase, interval_ns, now_ns);
    case SubscriptionWant::kNone:
      if (phase == RolePhase::kContinuous) {
        s.draining_since_ns = now_ns;
        return {RoleAction::kDrain, now_ns + kLookSoonNs, false};
      }
      // An open window goes; a claimed one is closed by its claimant, who sees the consumer gone.
      return {phase == RolePhase::kOpen ? RoleAction::kCloseWindow : RoleAction::kNone,
              now_ns + kLookNeverNs, false};
  }
  return {RoleAction::kNone, now_ns + kLookNeverNs, false};
}

// A launch the coin picked, at its ENTER: how it may be admitted (announced). Picked by the coin
// is the one probability every launch has; a launch PC sampling samples is no exception.
enum class Admission : uint8_t {
  kRefused,     // this kind is never announced (limit <= 0), no window or subscription, or the
                // consumer left (the watcher follows)
  kClaim,       // windowed: claim the open window (compare-and-swap of the phase seen)
  kContinuous,  // continuous: the safety cap, then counted in flight
};

inline Admission admission(double kind_limit, RolePhase phase, bool correlation_consumers) {
  if (kind_limit <= 0) return Admission::kRefused;  // the operator's: never announced
  if (phase != RolePhase::kOpen && phase != RolePhase::kContinuous) return Admission::kRefused;
  if (!correlation_consumers) return Admission::kRefused;
  return phase == RolePhase::kOpen ? Admission::kClaim : Admission::kContinuous;
}

}  // namespace parcagpu
