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
#pragma once

#include <atomic>
#include <cstdint>

#include "pc/pc_rate_controller.h"

namespace parcagpu {

class PcScheduler {
 public:
  struct Params {
    // Launches (of any thread) entering during one episode, at most. Every one of them leaves a
    // kernel record (activity is on for all of them); see pc_episodes.cc for the default.
    uint64_t launch_budget = 50000;
    uint64_t max_episode_ns = 1'000'000'000;
    // Kernels first launched, and graphs first uploaded, while PC sampling is disabled between
    // episodes never give PC records (docs/pc-sampling.md P19, P20): an episode stays enabled,
    // with more windows as the controller allows, until no kernel has been seen for the first time
    // for first_use_quiet_ns, at most max_learning_ns from its start. The launch budget still ends
    // it.
    uint64_t first_use_quiet_ns = 2'000'000'000;
    uint64_t max_learning_ns = 30'000'000'000;
    // Once PC sampling has been enabled on a context, every module loaded after is loaded whole,
    // every kernel's code on the GPU, where lazy loading would load only the kernels used
    // (docs/pc-sampling.md P34: a PyTorch MLP step took 66 MiB more); kernels first launched
    // before any Enable give records all the same (P20). So the process's first episode may wait
    // for start-up to be over: until no module has been loaded for first_enable_quiet_ns, at
    // most max_first_enable_wait_ns after the scheduler began (a consumer attached). Not by
    // default: a graph uploaded before the first Enable never gives records (P19).
    uint64_t first_enable_quiet_ns = 0;  // PARCAGPU_PC_START_QUIET_MS (config.h)
    uint64_t max_first_enable_wait_ns = 30'000'000'000;
    // A graph's first launch ends a learning episode (PcSampler::on_graph_first_launch, P21);
    // the next launch begins another at once, this many times in the process at most, and as
    // many again for each context created later (a program that creates graphs all the time
    // would otherwise enable and disable at each one).
    // Without it every kernel first launched after a program's first graph, on any GPU, was
    // lost for good: on two H100s not one sample of device 1 in 40 s (issue 19).
    uint32_t max_learning_resumes = 32;
    // Episode time (enable to disable) over wall time. Launches are slow while PC sampling is
    // enabled (a graph launch 2.65x, a sampled one ~1 ms), so a launch-bound program loses
    // about this share of its throughput: 2%, not the 5% first chosen (an H100 graph-launch loop
    // at 1.096 without episodes would be ~1.15 with them).
    double max_duty = 0.02;
    // An episode is charged at least this: one ended before its window (a graph's first launch
    // under PARCAGPU_PC_GRAPHS=0) took microseconds, and the next must not begin at once (the
    // mock's graph-creating loop went through 5696 episodes in 3 s). At 2% duty the next comes
    // 0.98 s later; such an episode costs an Enable and a Disable never started (~0.3 ms, P13).
    uint64_t min_episode_charge_ns = 20'000'000;
    // Get Data this long after Stop: CUPTI's worker threads decode the hardware buffer
    // periodically (their sleep span) and an early Get Data cannot be repeated.
    uint64_t drain_delay_ns = 120'000'000;
  };

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
  bool learning(uint64_t now_ns) const;
  // The next episode is a learning episode resumed (after a graph's first launch, or for a new
  // context): it begins at the next launch, on whichever context launches.
  bool resume_due() const { return resume_; }
  bool window_open() const { return phase_ == Phase::kWindow; }
  // Launches the window opened by the last kStart spans at most, and its deadline.
  uint32_t window_limit() const { return window_limit_; }
  uint64_t window_deadline_ns() const { return window_deadline_ns_; }
  uint64_t episodes() const { return episodes_; }
  uint64_t episodes_cut_by_budget() const { return cut_by_budget_; }
  const PcRateController &windows() const { return windows_; }

 private:
  enum class Phase : uint8_t { kIdle, kEnabled, kWindow, kDrainPending };
  bool over(uint64_t now_ns, uint64_t episode_launches) const;
  // next_step with no episode under way, and with one enabled (no window open or draining).
  Step idle_step(uint64_t now_ns);
  // Before the process's first episode: the time it may begin (first_enable_quiet_ns).
  uint64_t first_enable_ns() const;
  Step enabled_step(uint64_t now_ns, uint64_t episode_launches);

  const Params p_;
  PcRateController windows_;
  const uint64_t began_ns_;
  uint64_t last_module_load_ns_ = 0;
  bool start_up_over_ = false;  // start_up_over: the first episode waits no longer
  Phase phase_ = Phase::kIdle;
  bool window_pending_ = false;  // due when the episode was enabled: opens at once
  bool window_done_ = false;
  uint32_t window_limit_ = 0;
  uint64_t window_deadline_ns_ = 0;
  uint64_t window_start_ns_ = 0;
  uint64_t drain_due_ns_ = 0;
  uint64_t episode_start_ns_ = 0;
  bool cut_ = false;  // this episode hit its launch budget
  uint64_t last_first_use_ns_ = 0;
  uint64_t first_window_done_ns_ = 0;  // an episode kept for learning is charged up to here
  bool learned_ = false;               // this episode was kept enabled for first uses
  uint64_t learning_since_ns_ = 0;     // the learning period's start (max_learning_ns)
  bool resume_ = false;                // the next episode resumes learning, at the next launch
  bool resumed_ = false;               // this episode resumed learning
  uint32_t resumes_ = 0;               // since the process began, or a context was created
  uint64_t scheduled_ns_ = 0;  // the next episode by the duty cap (a resume comes before it)
  uint64_t episodes_ = 0;
  uint64_t cut_by_budget_ = 0;
  std::atomic<bool> in_episode_{false};
  std::atomic<uint64_t> next_episode_ns_{0};
};

}  // namespace parcagpu
