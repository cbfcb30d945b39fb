// CUPTI callbacks that are not launches: the resource domain (graphs, execs and nodes for
// GraphTracker, modules and contexts for PC sampling, a node created by stream capture inside a
// launch call) and explicit graph uploads. Enabled from process start (kSubscribedCallbacks),
// whether a consumer listens or not; dispatched by LaunchCallbacks::on_callback on the
// application's threads.
#pragma once

#include <cupti.h>

#include "launch/launch_forward.h"

namespace parcagpu {

class ResourceCallbacks {
 public:
  // pc may be null (no PC sampling). `role`: the launch callbacks' epoch, which tells whether
  // the calling thread is in a launch call (stream capture).
  ResourceCallbacks(const CuptiApi &cupti, GraphTracker &graphs, PcSampler *pc,
                    const LaunchRole &role)
      : cupti_(cupti), graphs_(graphs), pc_(pc), role_(role) {}

  // `t`: the calling thread's launch (launch_path.h).
  __attribute__((noinline, cold)) void on_resource(ThreadLaunch &t, CUpti_CallbackId cbid,
                                                   const CUpti_ResourceData *rd);
  __attribute__((noinline, cold)) void on_graph_upload(const CUpti_CallbackData *cb);

 private:
  // A graph node created on this thread inside a launch call: stream capture records that launch
  // instead of running it. False if the thread (`t`, its launch state) is in no launch call.
  bool note_captured_launch(ThreadLaunch &t, const CUpti_GraphData *gd);

  const CuptiApi &cupti_;
  GraphTracker &graphs_;
  PcSampler *const pc_;
  const LaunchRole &role_;
};

}  // namespace parcagpu
