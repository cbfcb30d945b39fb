// The CUPTI callback and the application threads' launch path: which callback this is, the gate
// (launch_gate.h: is it an outermost launch, and is it picked), PC sampling's launch hooks, and
// handing a picked launch to AnnouncedLaunches (announced_launches.h) and the non-launch
// callbacks to ResourceCallbacks (resource_callbacks.h). The watcher's side (when the launch
// cbids are on, the coin's mean, subscribing) is LaunchSwitch (launch_switch.h); what both sides
// share, LaunchRole (launch_role.h), is held here by value: every launch reads it.
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
// launch cbid is on; a thread's first launch ENTER in an epoch is never a candidate, whatever its
// API (launch_gate.h). An announced launch keeps the callbacks on until its EXIT: the
// subscription is drained of announced launches before its cbids go off. If the EXIT does not
// come as expected (an ID that differs from the ENTER's, or a thread that never returns), the
// launch is abandoned, not announced: its tracker entry and its share of kernel activity are
// released by whoever notices first (its thread's next launch callback, or the watcher after
// kAbandonAfterNs).
#pragma once

#include <cupti.h>

#include <cstdint>

#include "launch/announced_launches.h"
#include "launch/launch_role.h"
#include "launch/resource_callbacks.h"
#include "nvtx/nvtx_collector.h"
#include "parcagpu/cbid_table.h"

namespace parcagpu {

class ActivityCollector;
class CorrelationTracker;
class GraphCompletion;
class GraphTracker;
class PcSampler;
struct Config;    // config.h
struct CuptiApi;  // cupti_api.h

class LaunchCallbacks {
 public:
  // pc may be null (no PC sampling); completion too (no libcuda: kernel activity then goes off
  // at the end of every announced launch call, graph ones included). The CUPTI callback reaches
  // the last one built (see on_callback).
  LaunchCallbacks(const CuptiApi &cupti, const Config &config, CorrelationTracker &tracker,
                  GraphTracker &graphs, ActivityCollector &activity, PcSampler *pc,
                  GraphCompletion *completion);
  ~LaunchCallbacks();
  LaunchCallbacks(const LaunchCallbacks &) = delete;
  LaunchCallbacks &operator=(const LaunchCallbacks &) = delete;

  // The callback given to cuptiSubscribe (LaunchSwitch::subscribe). Never throws.
  static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain,
                                   CUpti_CallbackId cbid, const void *data);

  // Where the NVTX domain's callbacks go (nvtx_collector.h).
  NvtxCollector &nvtx() { return nvtx_; }

  // What the watcher's side moves (LaunchSwitch) and the totals.
  LaunchRole &role() { return role_; }
  LaunchStats &stats() { return stats_; }
  const LaunchStats &stats() const { return stats_; }

 private:
  void on_enter(CbDomain domain, uint32_t cbid, const CUpti_CallbackData *cb);
  void on_exit(CbDomain domain, uint32_t cbid, const CUpti_CallbackData *cb);
  // ENTER of a callback that is no launch: a graph upload or instantiation.
  __attribute__((noinline, cold)) void on_other_enter(CbDomain domain, uint32_t cbid,
                                                      const CUpti_CallbackData *cb);

  GraphTracker &graphs_;
  PcSampler *const pc_;
  LaunchRole role_;  // every launch cbid
  LaunchStats stats_;
  AnnouncedLaunches announced_;  // a picked launch's work (cold)
  ResourceCallbacks resources_;  // the resource domain and graph uploads
  NvtxCollector nvtx_;           // NVTX ranges, per application thread
};

}  // namespace parcagpu
