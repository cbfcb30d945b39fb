// PC sampling and the application's CUDA graphs. See pc_graph_registration.h.
#include "pc/pc_graph_registration.h"

#include "base/config.h"
#include "base/cupti_api.h"
#include "base/log.h"
#include "base/subsystem_links.h"
#include "pc/pc_context_switch.h"
#include "pc/pc_contexts.h"
#include "pc/pc_episode_steps.h"
#include "pc/pc_graph_shadow.h"
#include "pc/pc_launch_state.h"
#include "pc/pc_scheduler.h"
#include "pc/pc_stats.h"

namespace parcagpu {
namespace {

// Graph registrations (register_graph): each enables and disables PC sampling and instantiates
// and uploads a graph (~1 ms on the H100, P32). A program captures its graphs at start (vLLM:
// one per batch size), so a burst is allowed; one that instantiates graphs all the time gets a
// couple a second, the rest counted as not registered.
constexpr double kGraphRegistrationsPerSecond = 2;
constexpr double kGraphRegistrationBurst = 256;

}  // namespace

PcGraphRegistration::PcGraphRegistration(const CudaApi *cuda, const Config &config,
                                         KernelActivityControl *activity, PcLaunchState &state,
                                         PcContexts &contexts, PcContextSwitch &context_switch,
                                         PcEpisodeSteps &steps, PcStats &stats, uint64_t (*clock)())
    : cuda_(cuda),
      config_(config),
      activity_(activity),
      state_(state),
      contexts_(contexts),
      switch_(context_switch),
      steps_(steps),
      stats_(stats),
      clock_(clock),
      registrations_(kGraphRegistrationsPerSecond,
                     static_cast<uint64_t>((kGraphRegistrationBurst - 1) * 1e9 /
                                           kGraphRegistrationsPerSecond)) {}

void PcGraphRegistration::keep_out(GraphStep graph_step, bool inside_launch) {
  const bool first_launch = graph_step == GraphStep::kFirstLaunch;
  const char *step = first_launch ? "first launch" : "instantiation";
  uint64_t &ended = first_launch ? stats_.ended_for_graphs : stats_.ended_for_instantiations;
  uint64_t &went_in =
      first_launch ? stats_.graphs_uploaded_enabled : stats_.graphs_instantiated_enabled;
  if (!state_.usable || !state_.any_enabled.load(std::memory_order_relaxed)) return;
  // Inside a launch call already (a graph launched from a nested call), or other threads'
  // launches did not leave in time: the graph goes in with PC sampling on (counted; a graph
  // launched then is sampled from now on).
  if (config_.pc_graphs || inside_launch || !steps_.exclusive_begin()) {
    ++went_in;
    return;
  }
  steps_.end_all_episodes(/*wait_for_workers=*/false, /*for_graph=*/true);
  steps_.exclusive_end();
  if (!state_.usable) return;
  ++ended;
  if (steps_.scheduler()->resume_due()) stats_.learning_resumes++;
  debug_log(
      "PC sampling: the episode under way ended before a graph's %s "
      "(PARCAGPU_PC_GRAPHS=0: graphs are kept out of PC sampling)",
      step);
}

void PcGraphRegistration::register_graph(CUgraph graph, CUcontext ctx) {
  // An episode still under way (keep_out could not end it): the graph goes in with it.
  if (!state_.usable || state_.any_enabled.load(std::memory_order_relaxed)) return;
  const uint64_t now = clock_();
  PcContext &c = contexts_.find_or_add(ctx);
  if (!registrations_.ready(now) || !contexts_.lock_gpu(c, now, stats_)) {
    stats_.graphs_not_registered++;
    return;
  }
  if (!steps_.exclusive_begin()) {
    stats_.graphs_not_registered++;
    return contexts_.unlock_gpu(c);
  }
  registrations_.try_take(now);  // ready above, and taken only here (under the mutex)
  // Kernel activity off meanwhile: with it on, the upload registers nothing (P33).
  const bool activity_off = !activity_ || activity_->hold_off(true);
  const bool registered = activity_off && switch_.enable(c, /*kernel_activity=*/false) &&
                          upload_shadow_exec(*cuda_, graph, c.shadow_stream);
  if (c.enabled) {
    switch_.disable_quietly(c);
    if (PcScheduler *scheduler = steps_.scheduler()) scheduler->start_up_over(clock_());
  }
  if (activity_) activity_->hold_off(false);
  contexts_.unlock_gpu(c);
  steps_.exclusive_end();
  ++(registered ? stats_.graphs_registered : stats_.graphs_not_registered);
  debug_log("PC sampling: graph %p %s in %.2f ms", static_cast<void *>(graph),
            registered ? "registered by a shadow exec" : "not registered", (clock_() - now) / 1e6);
}

}  // namespace parcagpu
