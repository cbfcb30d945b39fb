// CUPTI's callback API: which callbacks are enabled when, and what the library does inside them.
// The launch path reads: subscription (which cbids are on), gate (launch_gate.h: is this
// callback an outermost launch, and is it picked), path (announce it: tracker, kernel activity,
// the probe at its EXIT).
// One class in four files: launch_callbacks.cc (subscribing, the launch path's hot part: the
// gate, PC sampling's launch hooks), announced_launches.cc (a picked launch admitted, the
// announced launch's work at ENTER and EXIT, abandoning one), launch_roles.cc (the watcher: the
// launch callbacks' phase, toggling their cbids, the coin's mean) and resource_callbacks.cc (graph,
// module and context resources, stream capture, graph uploads). The phase and epoch: role_state.h;
// what the watcher and an admitted launch decide: subscription_plan.h; the CUPTI subscription
// itself: callback_subscription.h; the per-thread launch state and the cbid index: launch_path.h.
//
// From process start only the non-launch entries of kSubscribedCallbacks are enabled (graph
// resources: what must be seen before any consumer comes). The launch callbacks are enabled
// only while a consumer listens to cuda_correlation (or PC sampling needs launches), and then
// every launch tosses the coin: the policy, with its constants, is subscription_plan.h; which
// launches are announced, launch_gate.h.
//
// Enabling callbacks while launches are in flight means the first callback a thread sees may be
// the driver call nested in a runtime launch whose ENTER came before the enable: announcing it
// would report the driver cbid for a runtime launch. Each enabling starts a new epoch once every
// launch cbid is on; a thread's first launch ENTER in an epoch is never a candidate,
// whatever its API (launch_gate.h). An announced launch keeps the
// callbacks on until its EXIT: the subscription is drained of announced launches before its
// cbids go off. If the EXIT does not come as
// expected (an ID that differs from the ENTER's, or a thread that never returns), the launch is
// abandoned, not announced: its tracker entry and its share of kernel activity are released by
// whoever notices first (its thread's next callback of the role, or the watcher after
// kAbandonAfterNs).
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/config.h"
#include "base/consumers.h"
#include "base/cupti_api.h"
#include "base/rate_gate.h"
#include "launch/callback_subscription.h"
#include "launch/launch_gate.h"
#include "launch/role_state.h"
#include "launch/subscription_plan.h"
#include "parcagpu/cbid_table.h"

namespace parcagpu {

class ActivityCollector;
class CorrelationTracker;
class GraphTracker;
class GraphCompletion;
class PcSampler;
struct ThreadLaunch;  // launch_path.h

struct LaunchStats {
  std::atomic<uint64_t> announced_eager{0};
  std::atomic<uint64_t> announced_graph{0};
  std::atomic<uint64_t> rate_limited{0};      // picked, over the safety cap
  std::atomic<uint64_t> learning{0};          // picked while the launch rate was learned
  std::atomic<uint64_t> captured{0};          // launches recorded into a graph: not executions
  std::atomic<uint64_t> left_unannounced{0};  // admitted, but the consumer left before EXIT
  std::atomic<uint64_t> abandoned{0};         // admitted, EXIT not as expected: not announced
  std::atomic<uint64_t> callback_errors{0};
};

class LaunchCallbacks : public ConsumerWatcher::Client {
 public:
  // pc may be null (no PC sampling); completion too (no libcuda: kernel activity then goes off
  // at the end of every announced launch call, graph ones included).
  LaunchCallbacks(const CuptiApi &cupti, const Config &config, CorrelationTracker &tracker,
                  GraphTracker &graphs, ActivityCollector &activity, PcSampler *pc,
                  GraphCompletion *completion);

  // Subscribes and enables the callbacks needed from process start (less the operator's
  // PARCAGPU_DISABLE_CBIDS). False if CUPTI refused the subscription: the library stays inert.
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
  const LaunchStats &stats() const { return stats_; }

 private:
  // A role's phase (role_state.h), unqualified in the member functions: kOff, kContinuous, ...
  using enum RolePhase;
  // Every launch cbid, eager and graph, is in the one Role: one epoch, one phase, one coin
  // (launch_gate.h: one inclusion probability for every launch), with each kind's rate limit.
  struct Role {
    std::vector<SubscribedCallback> cbids;  // driver ones first: see subscribe
    // Epoch and phase in one atomic word (role_state.h says why). The epoch grows each time the
    // cbids are all enabled.
    alignas(64) AtomicRoleState state;
    std::atomic<int32_t> inflight{0};  // announced launches inside their API call
    // The epoch begun while starting (see set_starting): clean, in launch_gate.h's terms.
    std::atomic<uint64_t> clean_epoch{0};
    LaunchCoin coin;  // which launches are picked (launch_gate.h)
    // The coin's mean meets the limits (false while the launch rate is learned, kLearnNs).
    std::atomic<bool> rate_learned{false};
    // A cap on every pick, whatever its kind (safety_cap_rate).
    RateGate safety_cap;
    std::mutex toggle_mu;  // enabling and disabling never interleave
    // Watcher thread only: draining (subscription_plan.h), each kind's rate limit, each kind's
    // launch-rate estimate (per second; < 0: none yet) with when it was last updated.
    WatcherRoleState plan;
    double limit[kGateRoles];
    double launch_rate[kGateRoles] = {-1, -1};
    uint64_t rate_at_ns = 0;
    uint64_t counted[kGateRoles] = {0, 0};  // launches counted since rate_at_ns
    Role(double eager_limit, double graph_limit, uint64_t tolerance_ns)
        : safety_cap{safety_cap_rate(eager_limit, graph_limit), tolerance_ns},
          limit{eager_limit, graph_limit} {}
  };
  // The watcher's side (launch_roles.cc).
  SubscriptionWant want(const Role &r) const;
  // The coin's mean from the launches counted (watcher thread).
  void adapt_coin(Role &r, uint64_t now_ns);
  void start_coin(Role &r, uint64_t now_ns);  // the callbacks going on: the mean from what is known
  // Moves the launch callbacks towards what is wanted now (watcher thread); returns when to
  // look again.
  uint64_t reconcile(Role &r, uint64_t now_ns);
  // reconcile's stages, each deciding by subscription_plan.h and applying it: a drain settled
  // (false: look again at *next_ns), the plan's action carried out.
  bool settle_draining(Role &r, SubscriptionWant w, uint64_t now_ns, uint64_t *next_ns);
  uint64_t apply_plan(Role &r, const RolePlan &plan, uint64_t now_ns);
  void enable_continuous(Role &r);
  void tell_pc_whether_observed();

  // The launch path's hot part (launch_callbacks.cc).
  static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain,
                                   CUpti_CallbackId cbid, const void *data);
  void on_enter(CbDomain domain, uint32_t cbid, const CUpti_CallbackData *cb);
  void on_exit(CbDomain domain, uint32_t cbid, const CUpti_CallbackData *cb);
  // The cold part (announced_launches.cc), out of line: the announced launches' work is one
  // launch in thousands at the default rates (scripts/callgrind-launch-cost.sh also tells it from
  // the rest of the launch path by these functions). `t`: the calling thread's launch
  // (launch_path.h).
  // Picked launches only: one inside a PC sampling window is no exception (its PC samples go
  // out without a CPU stack, correlation ID 0, unless the coin picked it).
  bool admit(Role &r, RoleState state, uint8_t kind);
  __attribute__((noinline, cold)) void begin_announced(ThreadLaunch &t, Role &r, uint8_t kind,
                                                       const CUpti_CallbackData *cb);
  __attribute__((noinline, cold)) void end_announced(ThreadLaunch &t, Role &r, uint8_t kind,
                                                     CbDomain domain, uint32_t cbid,
                                                     const CUpti_CallbackData *cb);
  __attribute__((noinline, cold)) void abandon(Role &r, uint32_t correlation_id,
                                               bool holds_activity);
  void finish_admission(Role &r);
  // An unannounced graph launch while execs with conditional nodes live (none in most
  // programs): if kernel activity records its kernels, its conditional bodies' kernels are told
  // from an announced launch's by it (GraphTracker::on_conditional_recorded). Its ENTER and EXIT.
  __attribute__((noinline, cold)) void watch_unannounced_conditional(ThreadLaunch &t,
                                                                     const CUpti_CallbackData *cb);
  __attribute__((noinline, cold)) void settle_unannounced_conditional(ThreadLaunch &t,
                                                                      const CUpti_CallbackData *cb);
  // Not launches (resource_callbacks.cc): explicit graph uploads and the resource domain.
  __attribute__((noinline, cold)) void on_graph_upload(const CUpti_CallbackData *cb);
  __attribute__((noinline, cold)) void on_resource(ThreadLaunch &t, CUpti_CallbackId cbid,
                                                   const CUpti_ResourceData *rd);
  // A graph node created on this thread inside a launch call: stream capture records that launch
  // instead of running it. False if the thread (`t`, its launch state) is in no launch call.
  bool note_captured_launch(ThreadLaunch &t, const CUpti_GraphData *gd);

  // Toggling a role's cbids (launch_roles.cc), with toggle_mu held.
  void set_cbids_locked(Role &r, bool on);

  const CuptiApi &cupti_;
  const Config &config_;
  CorrelationTracker &tracker_;
  GraphTracker &graphs_;
  ActivityCollector &activity_;
  PcSampler *const pc_;
  GraphCompletion *const completion_;
  // PC sampling wants or needs every launch (watcher sets it, the launch path reads it).
  std::atomic<bool> pc_needs_launches_{false};
  bool launch_consumers_ = false;  // watcher thread only
  CallbackSubscription sub_;       // cuptiSubscribe, the callbacks from start, toggling cbids
  bool starting_ = false;
  Role role_;  // every launch cbid
  LaunchStats stats_;
};

}  // namespace parcagpu
