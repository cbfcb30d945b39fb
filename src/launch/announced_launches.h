// The launch path's cold part: a launch the coin picked, admitted (counted in flight under the
// safety cap; admission(), subscription_plan.h), its work at ENTER (tracker, kernel activity,
// graph facts) and EXIT (cuda_correlation, or the capture's probe), giving a launch up
// (abandon), and the unannounced graph launches whose conditional bodies' kernels must be told
// from an announced launch's. One launch in thousands at the default rates takes these: out of
// line (scripts/callgrind-launch-cost.sh also tells them from the rest of the launch path by
// these functions). Called by LaunchCallbacks on the application threads; `t`: the calling
// thread's launch (launch_path.h).
#pragma once

#include <cupti.h>

#include <cstdint>

#include "launch/launch_forward.h"
#include "launch/role_state.h"
#include "parcagpu/cbid_table.h"

namespace parcagpu {

class AnnouncedLaunches {
 public:
  AnnouncedLaunches(const CuptiApi &cupti, const Config &config, CorrelationTracker &tracker,
                    GraphTracker &graphs, ActivityCollector &activity, PcSampler *pc,
                    GraphCompletion *completion, LaunchRole &role, LaunchStats &stats)
      : cupti_(cupti),
        config_(config),
        tracker_(tracker),
        graphs_(graphs),
        activity_(activity),
        pc_(pc),
        completion_(completion),
        role_(role),
        stats_(stats) {}

  // A picked launch of `kind`, whose ENTER read `state`: whether it is announced (then counted
  // in flight). One inside a PC sampling window is no exception (its PC samples go out without a
  // CPU stack, correlation ID 0, unless the coin picked it).
  bool admit(RoleState state, uint8_t kind);
  // An admitted launch's ENTER (t.announce may turn false: not announced after all) and EXIT.
  __attribute__((noinline, cold)) void begin(ThreadLaunch &t, uint8_t kind,
                                             const CUpti_CallbackData *cb);
  __attribute__((noinline, cold)) void end(ThreadLaunch &t, uint8_t kind, CbDomain domain,
                                           uint32_t cbid, const CUpti_CallbackData *cb);
  // An admitted launch whose EXIT did not come as expected: released, not announced.
  __attribute__((noinline, cold)) void abandon(uint32_t correlation_id, bool holds_activity);
  // An unannounced graph launch while execs with conditional nodes live (none in most
  // programs): if kernel activity records its kernels, its conditional bodies' kernels are told
  // from an announced launch's by it (GraphTracker::on_conditional_recorded). Its ENTER and EXIT.
  __attribute__((noinline, cold)) void watch_unannounced_conditional(ThreadLaunch &t,
                                                                     const CUpti_CallbackData *cb);
  __attribute__((noinline, cold)) void settle_unannounced_conditional(ThreadLaunch &t,
                                                                      const CUpti_CallbackData *cb);

 private:
  // The end of an admitted launch, whichever way it ends: it leaves the in-flight count.
  void finish_admission();

  const CuptiApi &cupti_;
  const Config &config_;
  CorrelationTracker &tracker_;
  GraphTracker &graphs_;
  ActivityCollector &activity_;
  PcSampler *const pc_;
  GraphCompletion *const completion_;
  LaunchRole &role_;
  LaunchStats &stats_;
};

}  // namespace parcagpu
