// The steps of PC sampling's episodes, carried out: at a launch that takes a step, the facts
// decide_pc_step (pc_step.h, pure) decides on are gathered (the launch state, the contexts, the
// hot kernels), and its action applied: a context joins, an episode begins, a window opens or
// closes, its samples are drained, the episode ends. Each PC Sampling API step runs with the
// launch gate held exclusively, and the launch path's lock-free copies (PcLaunchState) and the
// schedule (PcScheduler, owned here) are told what was done. Under PcEpisodes' mutex.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>

#include "pc/pc_forward.h"
#include "pc/pc_step.h"

namespace parcagpu {

class PcEpisodeSteps {
 public:
  // clock: the episodes' clock (monotonic_ns; a fake one in tests).
  PcEpisodeSteps(const Config &config, KernelActivityControl *activity, PcLaunchState &state,
                 PcLaunchGate &gate, PcCoverage &coverage, PcContexts &contexts,
                 PcContextSwitch &context_switch, PcStats &stats, uint64_t (*clock)());
  ~PcEpisodeSteps();

  // The schedule, from the config: the launch budget (also into the launch state) and the
  // windows' target rate.
  const PcScheduler &start(uint64_t now_ns);
  // nullptr before start.
  PcScheduler *scheduler() const { return scheduler_.get(); }

  // The step due at a launch on ctx (PcEpisodes::take_step).
  void take(CUcontext ctx, bool want, bool may_enable, const char *function);
  // Ends the episode on c: the window closed, its samples drained (waiting for CUPTI's workers
  // if wait_for_workers), PC sampling disabled and what Disable hands back published.
  // for_graph: ended before a graph step (PcScheduler::on_disabled).
  void end_episode(PcContext &c, bool wait_for_workers, bool for_graph = false);
  void end_all_episodes(bool wait_for_workers, bool for_graph = false);
  // Waits for other threads to leave their launch calls (false: they did not in time, counted).
  bool exclusive_begin();
  void exclusive_end();

 private:
  PcStepEvent step_event(const PcContext *here, bool want, bool may_enable, uint64_t now_ns,
                         const char *function) const;
  void apply_step(PcAction a, PcContext &here, uint64_t now_ns);
  void end_for_no_consumer();
  void begin_episode(PcContext &c, uint64_t now_ns);
  void drain_window();
  void start_window(uint64_t now_ns);
  void close_window(uint64_t now_ns);

  const Config &config_;
  KernelActivityControl *const activity_;
  PcLaunchState &state_;
  PcLaunchGate &gate_;
  PcCoverage &coverage_;
  PcContexts &contexts_;
  PcContextSwitch &switch_;
  PcStats &stats_;
  uint64_t (*const clock_)();
  PcStepState step_;  // decide_pc_step's own state (the window's dice, the launches waited)
  std::unique_ptr<PcScheduler> scheduler_;
  uint64_t window_started_ns_ = 0, episode_started_ns_ = 0;  // for PcStats
};

}  // namespace parcagpu
