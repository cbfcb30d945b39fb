// The watcher's side of the launch callbacks (launch_switch.h). The launch path's side of the
// same state (admissions, in-flight counts) is AnnouncedLaunches; launch_role.h says how the two
// meet.
#include "launch/launch_switch.h"

#include <algorithm>
#include <mutex>

#include "base/clock.h"
#include "base/config.h"
#include "base/log.h"
#include "launch/launch_callbacks.h"
#include "launch/launch_role.h"
#include "pc/pc_sampling.h"

namespace parcagpu {

LaunchSwitch::LaunchSwitch(const CuptiApi &cupti, const Config &config, LaunchCallbacks &callbacks,
                           PcSampler *pc)
    : config_(config),
      callbacks_(callbacks),
      role_(callbacks.role()),
      stats_(callbacks.stats()),
      pc_(pc),
      sub_(cupti, config) {}

bool LaunchSwitch::subscribe() {
  if (!sub_.subscribe(&LaunchCallbacks::on_callback, &callbacks_)) return false;
  cbids_ = sub_.launch_cbids();
  if (!sub_.enable_from_start()) return false;
  debug_log(
      "subscribed: %zu callbacks from the start; %zu launch callbacks while a consumer "
      "listens; rate limits: eager %g/s, graph %g/s",
      sub_.from_start().size(), cbids_.size(), config_.eager_rate_limit, config_.graph_rate_limit);
  return true;
}

void LaunchSwitch::unsubscribe() {
  if (!sub_.subscribed()) return;
  {
    std::lock_guard<std::mutex> lock(toggle_mu_);
    const RoleState s = role_.state.exchange(role_.state.load().with(kOff));
    if (s.phase() != kOff) sub_.set_enabled(cbids_, false);  // kOff: they are off already
  }
  sub_.unsubscribe();
}

// ---- What the launch callbacks should be in, and getting them there (watcher thread) ----

SubscriptionWant LaunchSwitch::want() const {
  return subscription_want(sub_.subscribed() && !cbids_.empty(),
                           role_.pc_needs_launches.load(std::memory_order_relaxed),
                           launch_consumers_);
}

void LaunchSwitch::on_consumers(const Consumers &now, const Consumers &) {
  launch_consumers_ = now.wants_launches();
  {
    // NVTX callbacks only while an NVTX probe listens: with none, nothing per NVTX call.
    std::lock_guard<std::mutex> lock(toggle_mu_);
    if (sub_.subscribed()) sub_.set_nvtx_enabled(now.wants_nvtx());
  }
  const uint64_t t = monotonic_ns();
  role_.pc_needs_launches.store(pc_ && pc_->needs_launches(t));
  reconcile(t);
  tell_pc_whether_observed();
}

// PC sampling counts and gates launches at their ENTER (its windows span launches, and no Stop
// or Disable may run while one is in its call): an episode may begin only once every launch
// reaches the callbacks.
void LaunchSwitch::tell_pc_whether_observed() {
  if (!pc_) return;
  pc_->set_launches_observed(cbids_.empty() || role_.state.load().phase() == kContinuous);
}

uint64_t LaunchSwitch::on_tick(uint64_t now) {
  // PC sampling's needs change without a semaphore changing: an episode falls due, or ends at
  // some launch.
  role_.pc_needs_launches.store(pc_ && pc_->needs_launches(now));
  uint64_t next = reconcile(now);
  tell_pc_whether_observed();
  // Back when the next episode is due, to turn the launch callbacks on for it.
  if (pc_ && !role_.pc_needs_launches.load(std::memory_order_relaxed))
    if (const uint64_t due = pc_->next_episode_ns(); due != 0)
      next = std::min(next, std::max(due, now + 1000000));
  return next;
}

void LaunchSwitch::start_coin(uint64_t now) {
  for (int k = 0; k < kGateRoles; ++k) {
    role_.coin.take_counted(k);
    counted_[k] = 0;
  }
  rate_at_ns_ = now;
  // A rate known from the last time the callbacks were on is good enough to start with.
  const bool known = launch_rate_[kEagerRole] > 0 || launch_rate_[kGraphRole] > 0;
  role_.coin.set_mean(known ? inclusion_mean(role_.limit, launch_rate_) : 1);
  role_.rate_learned.store(
      known || !must_learn_rate(role_.limit[kEagerRole], role_.limit[kGraphRole]),
      std::memory_order_relaxed);
}

void LaunchSwitch::adapt_coin(uint64_t now) {
  if (now < rate_at_ns_) return;
  const uint64_t dt = now - rate_at_ns_;
  const bool learned = role_.rate_learned.load(std::memory_order_relaxed);
  if (dt < coin_interval_ns(learned)) return;
  for (int k = 0; k < kGateRoles; ++k) counted_[k] += role_.coin.take_counted(k);
  const uint64_t total = counted_[kEagerRole] + counted_[kGraphRole];
  if (!learned && !launch_rate_known(total, dt)) {
    if (total == 0) rate_at_ns_ = now;  // nothing launched yet: the rate is measured from now
    return;
  }
  for (int k = 0; k < kGateRoles; ++k) {
    const double seen = static_cast<double>(counted_[k]) * 1e9 / static_cast<double>(dt);
    launch_rate_[k] = updated_launch_rate(launch_rate_[k], seen, dt);
    counted_[k] = 0;
  }
  rate_at_ns_ = now;
  role_.coin.set_mean(inclusion_mean(role_.limit, launch_rate_));
  // The mean first, then the launches admitted (a launch that sees learned sees the new mean's
  // generation at its next toss at the latest).
  if (!learned) role_.rate_learned.store(true, std::memory_order_release);
}

uint64_t LaunchSwitch::reconcile(uint64_t now) {
  const SubscriptionWant w = want();
  uint64_t next = 0;
  if (!settle_draining(w, now, &next)) return next;
  const RolePlan plan = plan_role(plan_, w, role_.state.load().phase(), now);
  return apply_plan(plan, now);
}

// Marked kDraining, under toggle_mu_: back to continuous, still waiting for announced launches
// in their call (false, look again at *next), or off.
bool LaunchSwitch::settle_draining(SubscriptionWant w, uint64_t now, uint64_t *next) {
  if (role_.state.load().phase() != kDraining) return true;
  std::lock_guard<std::mutex> lock(toggle_mu_);
  RoleState s = role_.state.load();
  if (s.phase() != kDraining) return true;
  // seq_cst pairs with AnnouncedLaunches::admit: a launch counted in flight after the kDraining
  // mark backs off, and one counted before it is seen here. One that never comes back is given
  // up.
  switch (drain_step(w, role_.inflight.load(), now, plan_.draining_since_ns)) {
    case DrainStep::kBackToContinuous:
      role_.state.store(s.with(kContinuous));  // never went off: same epoch
      *next = now + kCoinTickNs;
      return false;
    case DrainStep::kWait:
      *next = now + kLookSoonNs;
      return false;
    case DrainStep::kOff:
      if (role_.state.compare_exchange_strong(s, s.with(kOff))) sub_.set_enabled(cbids_, false);
      return true;
    case DrainStep::kOffAbandoning:
      if (role_.state.compare_exchange_strong(s, s.with(kOff))) {
        sub_.set_enabled(cbids_, false);
        stats_.abandoned.fetch_add(1, std::memory_order_relaxed);
      }
      return true;
  }
  return true;
}

uint64_t LaunchSwitch::apply_plan(const RolePlan &plan, uint64_t now) {
  switch (plan.action) {
    case RoleAction::kNone:
      break;
    case RoleAction::kEnableContinuous:
      enable_continuous();
      break;
    case RoleAction::kAdaptCoin:
      adapt_coin(now);
      break;
    case RoleAction::kDrain:
      role_.state.store(role_.state.load().with(kDraining));
      break;
  }
  return plan.next_ns;
}

void LaunchSwitch::enable_continuous() {
  std::lock_guard<std::mutex> lock(toggle_mu_);
  const RoleState s = role_.state.load();
  if (s.phase() != kOff) return;
  sub_.set_enabled(cbids_, true);
  role_.inflight.store(0);  // late EXITs of an abandoned epoch don't count against this one
  start_coin(monotonic_ns());
  if (starting_) role_.clean_epoch.store(s.epoch() + 1);
  role_.state.store(s.next_epoch(kContinuous));
}

}  // namespace parcagpu
