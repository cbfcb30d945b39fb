// The watcher's side of the launch callbacks: whether they should be on (want), getting them
// there (reconcile: on while anybody wants launches, drained of announced launches before their
// cbids go off), the coin's mean, and enabling or disabling the cbids. The launch path's side of
// the same state (admissions, in-flight counts) is in announced_launches.cc; the header says how
// the two meet.
#include <algorithm>
#include <mutex>

#include "base/clock.h"
#include "base/log.h"
#include "launch/launch_callbacks.h"
#include "pc/pc_sampling.h"

namespace parcagpu {

void LaunchCallbacks::set_cbids_locked(Role &r, bool on) { sub_.set_enabled(r.cbids, on); }

// ---- What each role should be in, and getting it there (watcher thread) ----

SubscriptionWant LaunchCallbacks::want(const Role &r) const {
  return subscription_want(sub_.subscribed() && !r.cbids.empty(),
                           pc_needs_launches_.load(std::memory_order_relaxed), launch_consumers_);
}

void LaunchCallbacks::on_consumers(const Consumers &now, const Consumers &) {
  launch_consumers_ = now.wants_launches();
  const uint64_t t = monotonic_ns();
  pc_needs_launches_.store(pc_ && pc_->needs_launches(t));
  reconcile(role_, t);
  tell_pc_whether_observed();
}

// PC sampling counts and gates launches at their ENTER (its windows span launches, and no Stop
// or Disable may run while one is in its call): an episode may begin only once every launch
// reaches the callbacks.
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

void LaunchCallbacks::start_coin(Role &r, uint64_t now) {
  for (int k = 0; k < kGateRoles; ++k) {
    r.coin.take_counted(k);
    r.counted[k] = 0;
  }
  r.rate_at_ns = now;
  // A rate known from the last time the callbacks were on is good enough to start with.
  const bool known = r.launch_rate[kEagerRole] > 0 || r.launch_rate[kGraphRole] > 0;
  r.coin.set_mean(known ? inclusion_mean(r.limit, r.launch_rate) : 1);
  r.rate_learned.store(known || !must_learn_rate(r.limit[kEagerRole], r.limit[kGraphRole]),
                       std::memory_order_relaxed);
}

void LaunchCallbacks::adapt_coin(Role &r, uint64_t now) {
  if (now < r.rate_at_ns) return;
  const uint64_t dt = now - r.rate_at_ns;
  const bool learned = r.rate_learned.load(std::memory_order_relaxed);
  if (dt < coin_interval_ns(learned)) return;
  for (int k = 0; k < kGateRoles; ++k) r.counted[k] += r.coin.take_counted(k);
  const uint64_t total = r.counted[kEagerRole] + r.counted[kGraphRole];
  if (!learned && !launch_rate_known(total, dt)) {
    if (total == 0) r.rate_at_ns = now;  // nothing launched yet: the rate is measured from now
    return;
  }
  for (int k = 0; k < kGateRoles; ++k) {
    const double seen = static_cast<double>(r.counted[k]) * 1e9 / static_cast<double>(dt);
    r.launch_rate[k] = updated_launch_rate(r.launch_rate[k], seen, dt);
    r.counted[k] = 0;
  }
  r.rate_at_ns = now;
  r.coin.set_mean(inclusion_mean(r.limit, r.launch_rate));
  // The mean first, then the launches admitted (a launch that sees learned sees the new mean's
  // generation at its next toss at the latest).
  if (!learned) r.rate_learned.store(true, std::memory_order_release);
}

uint64_t LaunchCallbacks::reconcile(Role &r, uint64_t now) {
  const SubscriptionWant w = want(r);
  uint64_t next = 0;
  if (!settle_draining(r, w, now, &next)) return next;
  const RolePlan plan = plan_role(r.plan, w, r.state.load().phase(), now);
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
      *next = now + kCoinTickNs;
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
    case RoleAction::kAdaptCoin:
      adapt_coin(r, now);
      break;
    case RoleAction::kDrain:
      r.state.store(r.state.load().with(kDraining));
      break;
  }
  return plan.next_ns;
}

void LaunchCallbacks::enable_continuous(Role &r) {
  std::lock_guard<std::mutex> lock(r.toggle_mu);
  const RoleState s = r.state.load();
  if (s.phase() != kOff) return;
  set_cbids_locked(r, true);
  r.inflight.store(0);  // late EXITs of an abandoned epoch don't count against this one
  start_coin(r, monotonic_ns());
  if (starting_) r.clean_epoch.store(s.epoch() + 1);
  r.state.store(s.next_epoch(kContinuous));
}

}  // namespace parcagpu
