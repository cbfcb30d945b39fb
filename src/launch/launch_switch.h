// The watcher's side of the launch callbacks: subscribing, whether the launch cbids should be on
// (want), getting them there (reconcile: on while anybody wants launches, drained of announced
// launches before they go off), the coin's mean from the launches counted, and enabling or
// disabling the cbids. What it decides is subscription_plan.h (plan_role, drain_step, with their
// constants); this class loads the state, takes the toggle lock, compares-and-swaps and makes the
// calls. It moves the LaunchRole the launch path (LaunchCallbacks) reads on every launch.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "base/consumers.h"
#include "launch/callback_subscription.h"
#include "launch/launch_forward.h"
#include "launch/launch_gate.h"
#include "launch/subscription_plan.h"
#include "parcagpu/cbid_table.h"

namespace parcagpu {

class LaunchSwitch : public ConsumerWatcher::Client {
 public:
  // pc may be null (no PC sampling).
  LaunchSwitch(const CuptiApi &cupti, const Config &config, LaunchCallbacks &callbacks,
               PcSampler *pc);

  // Subscribes LaunchCallbacks::on_callback and enables the callbacks needed from process start
  // (less the operator's PARCAGPU_DISABLE_CBIDS). False if CUPTI refused the subscription: the
  // library stays inert.
  bool subscribe();
  // Disables every callback the library may have enabled, then unsubscribes.
  void unsubscribe();

  // ConsumerWatcher::Client: launch callbacks follow the cuda_correlation consumers and PC
  // sampling's needs.
  void on_consumers(const Consumers &now, const Consumers &before) override;
  uint64_t on_tick(uint64_t now_ns) override;

  // Between these, the library is starting inside InitializeInjection (or the LD_PRELOAD
  // constructor): no thread can be inside a launch call yet, so callbacks enabled now start an
  // epoch in which every thread's nesting is known from its first callback.
  void set_starting(bool starting) { starting_ = starting; }

  const std::vector<SubscribedCallback> &from_start() const { return sub_.from_start(); }

 private:
  // A role's phase (role_state.h), unqualified in the member functions: kOff, kContinuous, ...
  using enum RolePhase;
  SubscriptionWant want() const;
  // Moves the launch callbacks towards what is wanted now; returns when to look again.
  uint64_t reconcile(uint64_t now_ns);
  // reconcile's stages, each deciding by subscription_plan.h and applying it: a drain settled
  // (false: look again at *next_ns), the plan's action carried out.
  bool settle_draining(SubscriptionWant w, uint64_t now_ns, uint64_t *next_ns);
  uint64_t apply_plan(const RolePlan &plan, uint64_t now_ns);
  void enable_continuous();
  void start_coin(uint64_t now_ns);  // the callbacks going on: the mean from what is known
  void adapt_coin(uint64_t now_ns);  // the coin's mean from the launches counted
  void tell_pc_whether_observed();

  const Config &config_;
  LaunchCallbacks &callbacks_;
  LaunchRole &role_;
  LaunchStats &stats_;
  PcSampler *const pc_;
  CallbackSubscription sub_;               // cuptiSubscribe, the callbacks from start, toggling
  std::vector<SubscribedCallback> cbids_;  // every launch cbid; driver ones first (subscribe)
  std::mutex toggle_mu_;                   // enabling and disabling never interleave
  bool launch_consumers_ = false;
  bool starting_ = false;
  // Draining (subscription_plan.h), each kind's launch-rate estimate (per second; < 0: none yet)
  // with when it was last updated, and the launches counted since.
  WatcherRoleState plan_;
  double launch_rate_[kGateRoles] = {-1, -1};
  uint64_t rate_at_ns_ = 0;
  uint64_t counted_[kGateRoles] = {0, 0};
};

}  // namespace parcagpu
