// PC sampling's episodes (PcScheduler, src/pc/pc_scheduler.h), carried out under one mutex: the
// entry points PcSampler (pc_sampling.h) calls from the launch path when a step is due, from the
// graph and context callbacks and at exit. The work is done by its parts, each owning one thing:
// the contexts and their GPU locks (PcContexts), PC sampling turned on and off on a context and
// off for the process at the first error (PcContextSwitch), the episode steps decide_pc_step
// decides (PcEpisodeSteps, which owns the schedule), the graphs kept out or registered
// (PcGraphRegistration), the samples published (PcPublisher) and the hot kernels (PcCoverage).
// Everything runs on an application thread inside a launch callback (or a context-destroy
// callback, or at exit); the launch path reads what it needs lock-free from the PcLaunchState
// the parts write.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <mutex>

#include "base/clock.h"
#include "pc/pc_context_switch.h"
#include "pc/pc_contexts.h"
#include "pc/pc_episode_steps.h"
#include "pc/pc_forward.h"
#include "pc/pc_graph_registration.h"
#include "pc/pc_publish.h"
#include "pc/pc_stats.h"

namespace parcagpu {

class PcEpisodes {
 public:
  using GraphStep = PcGraphRegistration::GraphStep;

  // clock: the episodes' clock (monotonic_ns; a fake one in tests).
  PcEpisodes(const CuptiApi &cupti, const CudaApi *cuda, const Config &config,
             KernelActivityControl *activity, PcLaunchState &state, PcLaunchGate &gate,
             PcMetadata &meta, uint64_t (*clock)() = &monotonic_ns);
  ~PcEpisodes();

  // The schedule, from the config (PcSampler::init): the launch budget (also into the launch
  // state) and the windows' target rate. The launch path reads its lock-free hints.
  const PcScheduler &start(uint64_t now_ns);

  // The step due at a launch on ctx, unless another thread holds the mutex (then this launch
  // goes on): enable, start, stop, drain or disable, or a context joining the episode under way;
  // may_enable false keeps an episode from beginning (a graph's first launch or upload, P21).
  // Never from inside a launch call already counted at the gate (PcSampler checks).
  // function: the launch's kernel name (nullptr: a graph launch), for PcCoverage.
  void take_step(CUcontext ctx, bool want, bool may_enable, const char *function = nullptr);
  // Hot kernels with no PC samples yet: fed by kernel records and drained PC records.
  PcCoverage &coverage() { return *coverage_; }

  // PcGraphRegistration::keep_out and register_graph, under the mutex.
  void keep_graph_out(GraphStep step, bool inside_launch);
  void register_graph(CUgraph graph, CUcontext ctx);
  // A context was created: a learning period begins (PcScheduler::learn_again); true if an
  // episode is to resume at once (the launch callbacks must turn on for it).
  bool learn_again();
  // A module was loaded (PcScheduler::module_loaded); true if an episode is to resume at once.
  // Never waits: with the episodes' mutex held (a step under way, or the library's own CUDA call
  // that loaded it, on this thread) the module is left to the episode under way.
  bool resume_for_module();
  void on_context_destroy(CUcontext ctx);
  // At exit: stops, drains, publishes and disables everything; PC sampling unusable after.
  void shutdown();
  PcStats stats() const;

 private:
  const CudaApi *const cuda_;
  const Config &config_;
  PcLaunchState &state_;
  uint64_t (*const clock_)();
  const std::unique_ptr<PcCoverage> coverage_;  // before publisher_, which feeds it
  PcPublisher publisher_;                       // Get Data and pc_sample_batch, counted in stats_

  mutable std::mutex mu_;  // everything below; the PC Sampling API calls
  PcStats stats_;
  PcContexts contexts_;
  PcContextSwitch switch_;
  PcEpisodeSteps steps_;
  PcGraphRegistration graphs_;
};

}  // namespace parcagpu
