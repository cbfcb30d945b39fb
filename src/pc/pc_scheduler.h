// When PC sampling is enabled at all, and what the PC sampler does at each launch: the episode
// and window schedule. Pure: times in ns and counts come in, the next step goes out; the sampler
// (PcEpisodes, src/pc/pc_episodes.cc) makes the CUPTI calls and reports back. Unit-tested with a
// fake clock in tests/unit/lib/pc_scheduler_test.cc.
//
// Why episodes. While PC sampling is enabled on a context, whether started or not, CUPTI holds a
// configuration that every launch pays for (issue 17's floors on an H100: a graph launch costs
// 1.71x with kernel-serialized PC sampling enabled and 2.65x with kernel activity enabled before
// it, as P12 requires), and kernel activity records every kernel, not only the announced ones:
// at high launch rates those records fill the activity buffers and CUPTI drops records of
// announced launches with the rest. So PC sampling is enabled only for short episodes:
//
//   idle --(due)--> enable --> window: Start .. n launches .. Stop --> drain --> disable --> idle
//
// One window per episode: the controller keeps windows at least tens of milliseconds apart, far
// longer than an episode needs to be. An episode ends when its window is drained, after
// max_episode_ns, or as soon as launch_budget launches entered during it (each left a kernel record
// to read: the budget keeps one episode's records well inside the activity buffers). Episodes take
// at most max_duty of the wall time (enable to disable, the drain delay and CUPTI's Disable
// included), and the next one begins no earlier than the window schedule (PcRateController: sample
// credit and window duty) allows.
//
// The parts, each held by value: PcRateController (the window schedule: when a window may open,
// how many launches it spans), PcLearning (kernels first used: episodes kept enabled or resumed,
// the first episode's wait for start-up), PcEpisodeTiming (the launch budget, the longest time,
// the duty cap's charge) and PcEpisodeWindow (the episode's window, planned, open, drained). The
// scheduler keeps the episode's phase, decides each step from its parts, and keeps the lock-free
// hints the launch path reads.
#pragma once

#include <atomic>
#include <cstdint>

#include "pc/pc_episode_params.h"
#include "pc/pc_episode_timing.h"
#include "pc/pc_episode_window.h"
#include "pc/pc_learning.h"
#include "pc/pc_rate_controller.h"

namespace parcagpu {

class PcScheduler {
 public:
  // The episodes' parameters (pc_episode_params.h).
  using Params = PcEpisodeParams;

  enum class Step : uint8_t {
    kNone,     // nothing to do at this launch
    kEnable,   // enable and configure PC sampling on this launch's context
    kStart,    // open a window of window_limit() launches
    kStop,     // close the window
    kDrain,    // Get Data, publish, feed the controller (on_drained)
    kDisable,  // drain what is left, disable: the episode is over (on_disabled)
  };

  PcScheduler(const Params &params, const PcRateController::Params &windows, uint64_t now_ns,
              uint64_t seed);

  // At a launch entering at now_ns: what is due. episode_launches: launches entered since the
  // episode was enabled; window_launches: since the window opened; last_first_use_ns: when a
  // kernel (or graph exec) was last seen for the first time (0: never); last_module_load_ns:
  // when a module was last loaded (0: never).
  Step next_step(uint64_t now_ns, uint64_t episode_launches, uint32_t window_launches,
                 uint64_t last_first_use_ns = 0, uint64_t last_module_load_ns = 0);

  // What was done (the sampler reports each step it carried out; a step that failed is not
  // reported and PC sampling is off anyway).
  void on_enabled(uint64_t now_ns);
  void on_started(uint64_t now_ns);
  void on_stopped(uint64_t now_ns, uint32_t launches);
  void on_drained(uint64_t samples, uint32_t launches, uint64_t now_ns);
  // for_graph: the episode was ended before a graph's instantiation, first launch or upload; if
  // kernels were still being used for the first time, the next launch begins another episode
  // (max_learning_resumes).
  void on_disabled(uint64_t now_ns, bool for_graph = false);
  // The episode next_step asked for could not begin (another process samples the GPU): asked
  // again no sooner than delay_ns from now. Nothing else changes.
  void put_off(uint64_t now_ns, uint64_t delay_ns);
  // A context was created (a GPU that launches from now on): its kernels are first launched
  // from now on, so a learning period begins (an episode at once, if none is under way).
  void learn_again(uint64_t now_ns);
  // PC sampling was enabled outside the episodes before the first one (a graph's registration,
  // PcEpisodes::register_graph): modules loaded from now on are loaded whole anyway, and a
  // kernel first launched before the first episode would now be lost (P20), so that episode
  // waits no longer: it begins at the next launch.
  void start_up_over(uint64_t now_ns);
  // A module was loaded (lazy loading loads one at the first launch of one of its kernels; a
  // JIT compiler's kernels come in one): kernels are being used for the first time, and each
  // first launched between episodes would never give records (P19, P20). Learning resumes at the
  // next launch (max_learning_resumes) when no episode is under way; one under way learns on.
  // Not before the first episode, which learns anyway. True if a resume was armed.
  bool module_loaded(uint64_t now_ns);
  // The context the episode ran on went away (its sampling state with it).
  void on_context_lost(uint64_t now_ns) { on_disabled(now_ns); }

  // Lock-free hints for the launch path and the watcher thread.
  // Whether an episode is under way or due (launch callbacks must reach the sampler).
  bool episode_due(uint64_t now_ns) const {
    return in_episode_.load(std::memory_order_relaxed) ||
           now_ns >= next_episode_ns_.load(std::memory_order_relaxed);
  }
  uint64_t next_episode_ns() const { return next_episode_ns_.load(std::memory_order_relaxed); }
  bool in_episode() const { return in_episode_.load(std::memory_order_relaxed); }
  // Kernels are still being used for the first time (the episode under way stays enabled, and
  // every context that launches joins it).
  bool learning(uint64_t now_ns) const { return learning_.learning(now_ns); }
  // The next episode is a learning episode resumed (after a graph's first launch, or for a new
  // context): it begins at the next launch, on whichever context launches.
  bool resume_due() const { return learning_.resume_due(); }
  // Launches the window opened by the last kStart spans at most, and its deadline.
  uint32_t window_limit() const { return window_.limit(); }
  uint64_t window_deadline_ns() const { return window_.deadline_ns(); }
  uint64_t episodes() const { return timing_.episodes(); }
  uint64_t episodes_cut_by_budget() const { return timing_.episodes_cut_by_budget(); }

 private:
  enum class Phase : uint8_t { kIdle, kEnabled, kWindow, kDrainPending };
  // next_step with no episode under way, and with one enabled (no window open or draining).
  Step idle_step(uint64_t now_ns);
  Step enabled_step(uint64_t now_ns, uint64_t episode_launches);

  PcRateController windows_;  // when a window may open, and its length
  PcLearning learning_;       // kernels first used: episodes kept enabled, resumed
  PcEpisodeTiming timing_;    // the episode's budget and longest time, the duty cap
  PcEpisodeWindow window_;    // the episode's window: planned, open, drained
  Phase phase_ = Phase::kIdle;
  std::atomic<bool> in_episode_{false};
  std::atomic<uint64_t> next_episode_ns_{0};
};

}  // namespace parcagpu
