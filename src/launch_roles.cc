// The watcher's side of the launch callbacks: which phase each role should be in (want), moving
// it there (reconcile: windows opened on time, continuous subscriptions drained before their
// cbids go off, claims abandoned), the coin's mean, and enabling or disabling a role's cbids.
// The launch path's side of the same state (claims, in-flight counts, a claimant closing its
// window) is in launch_callbacks.cc; the header says how the two meet.
#include <algorithm>
#include <mutex>

#include "clock.h"
#include "launch_callbacks.h"
#include "log.h"
#include "pc_sampling.h"

namespace parcagpu {
// ---- Toggling (watcher thread, and a claimant closing its window), with toggle_mu held ----

void LaunchCallbacks::set_cbids_locked(Role &r, bool on) { sub_.set_enabled(r.cbids, on); }

void LaunchCallbacks::open_window(Role &r) {
  {
    std::lock_guard<std::mutex> lock(r.toggle_mu);
    const RoleState s = r.state.load();
    if (s.phase() != kOff) return;
    // Still kOff while the cbids go on: what threads see meanwhile is judged against the old
    // epoch and is stale once the new one starts, with every cbid of the role on.
    set_cbids_locked(r, true);
    if (starting_) r.clean_epoch.store(s.epoch() + 1);
    // Before the phase: a launch that sees kOpen sees these reset.
    r.window_first_enter_ns.store(0, std::memory_order_relaxed);
    r.window_opened_ns.store(monotonic_ns(), std::memory_order_relaxed);
    r.state.store(s.next_epoch(kOpen));
    stats_.windows.fetch_add(1, std::memory_order_relaxed);
  }
  close_if_requested(r);
}

// ---- What each role should be in, and getting it there (watcher thread) ----

SubscriptionWant LaunchCallbacks::want(const Role &r) const {
  return subscription_want(sub_.subscribed() && !r.cbids.empty(),
                           pc_needs_launches_.load(std::memory_order_relaxed), launch_consumers_,
                           r.rate_allows_windows, r.plan.windows_unfit());
}

void LaunchCallbacks::on_consumers(const Consumers &now, const Consumers &) {
  const bool attach = now.wants_launches() && !launch_consumers_;
  launch_consumers_ = now.wants_launches();
  const uint64_t t = monotonic_ns();
  pc_needs_launches_.store(pc_ && pc_->needs_launches(t));
  if (attach) role_.plan.next_open_ns = 0;  // the first window at once
  reconcile(role_, t);
  tell_pc_whether_observed();
}

// PC sampling counts and gates launches at their ENTER (its windows span launches, and no Stop
// or Disable may run while one is in its call): an episode may begin only once every launch
// reaches the callbacks (continuous).
void LaunchCallbacks::tell_pc_whether_observed() {
  if (!pc_) return;
  pc_->set_launches_observed(role_.cbids.empty() || role_.state.load().phase() == kContinuous);
}

uint64_t LaunchCallbacks::on_tick(uint64_t now) {
  // PC sampling's needs change without a semaphore changing: an episode falls due, or ends at
  // some launch.
  pc_needs_launches_.store(pc_ && pc_->needs_launches(now));
  uint64_t next = reconcile(role_, now);
  tell_pc_whether_observed();
  // Back when the next episode is due, to turn the launch callbacks on for it.
  if (pc_ && !pc_needs_launches_.load(std::memory_order_relaxed))
    if (const uint64_t due = pc_->next_episode_ns(); due != 0)
      next = std::min(next, std::max(due, now + 1000000));
  return next;
}

void LaunchCallbacks::start_coin(Role &r) {
  r.rate_at_ns = 0;
  if (r.launch_rate[kEagerRole] >= 0 || r.launch_rate[kGraphRole] >= 0)
    r.coin.set_mean(inclusion_mean(r.limit, r.launch_rate));
  else
    r.coin.set_mean(r.rate_allows_windows ? kWindowMeanLaunches : 1);
}

void LaunchCallbacks::adapt_coin(Role &r, uint64_t now) {
  if (r.rate_at_ns == 0 || now < r.rate_at_ns) {
    for (int k = 0; k < kGateRoles; ++k) r.coin.take_counted(k);
    r.rate_at_ns = now;
    return;
  }
  const uint64_t dt = now - r.rate_at_ns;
  if (dt < kCoinTickNs / 2) return;
  double total = 0;
  for (int k = 0; k < kGateRoles; ++k) {
    const double seen = static_cast<double>(r.coin.take_counted(k)) * 1e9 / static_cast<double>(dt);
    r.launch_rate[k] = updated_launch_rate(r.launch_rate[k], seen, dt);
    total += r.launch_rate[k];
  }
  r.rate_at_ns = now;
  r.coin.set_mean(inclusion_mean(r.limit, r.launch_rate));
  if (r.plan.low_rate && back_to_windows(total, window_rate(r.limit, r.launch_rate))) {
    r.plan.low_rate = false;
    debug_log("launches at %.0f/s: back to sampling windows", total);
  }
}

void LaunchCallbacks::adapt_windows(Role &r) {
  // Each kind's share of the candidates the windows counted sets how many windows a second the
  // limits allow.
  for (int k = 0; k < kGateRoles; ++k)
    r.window_counts[k] = smoothed_window_count(r.window_counts[k], r.coin.take_counted(k));
  r.interval_ns = window_interval_ns(window_rate(r.limit, r.window_counts));
}

void LaunchCallbacks::judge_closed_window(Role &r, uint64_t now) {
  if (idle_hold_over(r.plan, now)) debug_log("back to sampling windows, to judge them again");
  if (r.state.load().phase() != kOff) return;
  const uint64_t opened = r.window_opened_ns.exchange(0, std::memory_order_relaxed);
  const uint64_t first = r.window_first_enter_ns.load(std::memory_order_relaxed);
  // Not opened since last judged, or closed with no launch in it (the consumer left).
  if (opened == 0 || first == 0) return;
  if (window_judged(r.plan, opened, first, now)) {
    stats_.idle_spells.fetch_add(1, std::memory_order_relaxed);
    debug_log(
        "sampling windows open while the launching threads wait (%u of %u): launch "
        "callbacks on continuously for %.0f s",
        static_cast<unsigned>(kIdleShareOfWindows * kIdleJudgedWindows),
        static_cast<unsigned>(kIdleJudgedWindows), kIdleHoldNs / 1e9);
  }
}

uint64_t LaunchCallbacks::reconcile(Role &r, uint64_t now) {
  judge_closed_window(r, now);
  const SubscriptionWant w = want(r);
  uint64_t next = 0;
  if (!settle_draining(r, w, now, &next)) return next;
  RoleState s = r.state.load();
  if (claim_abandoned(s.phase(), coarse_ns(), r.claimed_at_ns.load(std::memory_order_relaxed))) {
    // Its thread never came back.
    abandon(r, s.epoch(), r.claim_corr.load(), true, r.claim_holds_activity.load());
  }
  if (r.state.load().phase() == kClosing) close_if_requested(r);
  const RolePlan plan = plan_role(r.plan, w, r.state.load().phase(), r.interval_ns, now);
  return apply_plan(r, plan, now);
}

// A role marked kDraining, under toggle_mu: back to continuous, still waiting for announced
// launches in their call (false, look again at *next), or off.
bool LaunchCallbacks::settle_draining(Role &r, SubscriptionWant w, uint64_t now, uint64_t *next) {
  if (r.state.load().phase() != kDraining) return true;
  std::lock_guard<std::mutex> lock(r.toggle_mu);
  RoleState s = r.state.load();
  if (s.phase() != kDraining) return true;
  // seq_cst pairs with admit(): a launch counted in flight after the kDraining mark backs off,
  // and one counted before it is seen here. One that never comes back is given up.
  switch (drain_step(w, r.inflight.load(), now, r.plan.draining_since_ns)) {
    case DrainStep::kBackToContinuous:
      r.state.store(s.with(kContinuous));  // never went off: same epoch
      *next = now + kLookNeverNs;
      return false;
    case DrainStep::kWait:
      *next = now + kLookSoonNs;
      return false;
    case DrainStep::kOff:
      if (r.state.compare_exchange_strong(s, s.with(kOff))) set_cbids_locked(r, false);
      return true;
    case DrainStep::kOffAbandoning:
      if (r.state.compare_exchange_strong(s, s.with(kOff))) {
        set_cbids_locked(r, false);
        stats_.abandoned.fetch_add(1, std::memory_order_relaxed);
      }
      return true;
  }
  return true;
}

uint64_t LaunchCallbacks::apply_plan(Role &r, const RolePlan &plan, uint64_t now) {
  switch (plan.action) {
    case RoleAction::kNone:
      break;
    case RoleAction::kEnableContinuous:
      enable_continuous(r);
      break;
    case RoleAction::kWindowsToContinuous: {
      // Windows to continuous: the cbids are all on already, the epoch goes on.
      RoleState s = r.state.load();
      start_coin(r);
      if (s.phase() == kOpen) r.state.compare_exchange_strong(s, s.with(kContinuous));
      break;
    }
    case RoleAction::kAdaptCoin:
      adapt_coin(r, now);
      break;
    case RoleAction::kDrain:
      r.state.store(r.state.load().with(kDraining));
      break;
    case RoleAction::kOpenWindow:
      if (r.coin.mean() != kWindowMeanLaunches) r.coin.set_mean(kWindowMeanLaunches);
      adapt_windows(r);
      open_window(r);
      window_opened(r.plan, r.interval_ns, now);
      break;
    case RoleAction::kSaturated:
      debug_log("sampling windows stay open; launch callbacks on continuously");
      break;
    case RoleAction::kCloseWindow:
      close_open_window(r);
      break;
  }
  return plan.wake_by_phase ? next_window_look(r.state.load().phase(), r.plan, r.interval_ns, now)
                            : plan.next_ns;
}

void LaunchCallbacks::enable_continuous(Role &r) {
  std::lock_guard<std::mutex> lock(r.toggle_mu);
  const RoleState s = r.state.load();
  if (s.phase() != kOff) return;
  set_cbids_locked(r, true);
  r.inflight.store(0);  // late EXITs of an abandoned epoch don't count against this one
  start_coin(r);
  if (starting_) r.clean_epoch.store(s.epoch() + 1);
  r.state.store(s.next_epoch(kContinuous));
}

// An open window goes; a claimed one is closed by its claimant, who sees the consumer gone.
void LaunchCallbacks::close_open_window(Role &r) {
  std::lock_guard<std::mutex> lock(r.toggle_mu);
  RoleState open = r.state.load();
  if (open.phase() == kOpen && r.state.compare_exchange_strong(open, open.with(kOff)))
    set_cbids_locked(r, false);
}

}  // namespace parcagpu
