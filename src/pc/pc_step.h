// What a launch does for PC sampling when pc_step_due (pc_step_due.h) sent it to take a step:
// the step of the episode, as a pure function of the sampler's facts at that launch (the event,
// with its clock), the little state the decision keeps (PcStepState) and the episode schedule
// (PcScheduler, itself pure and asked only when an episode's step is in question). No CUPTI, no
// lock, no clock of its own: PcEpisodeSteps (pc_episode_steps.h) gathers the event under the
// episodes' mutex, carries the action out (the PC Sampling API calls, with the launch gate held
// exclusively) and reports what was done to the scheduler. Unit-tested in
// tests/unit/lib/pc_step_test.cc (pure) and pc_episode_steps_test.cc (carried out).
#pragma once

#include <cstdint>
#include <limits>

#include "pc/pc_scheduler.h"

namespace parcagpu {

// An episode due waits this many launches on a context for one on a context whose last window is
// older (several GPUs take their windows in turn; on two H100s, with a context preferred only
// until it had one window, a window that yielded nothing on device 1 left every later one to
// device 0: 0 samples of device 1 in 40 s).
inline constexpr uint32_t kUnsampledWaitLaunches = 10000;

// No other context: its last window is "newer" than any.
inline constexpr uint64_t kNoOtherContext = std::numeric_limits<uint64_t>::max();

// What the sampler knows at the launch that takes a step (under its mutex).
struct PcStepEvent {
  uint64_t now_ns = 0;
  bool want = false;               // a consumer wants PC samples (pc_sampling.cc wanted())
  bool may_enable = false;         // not a graph's first launch (or PARCAGPU_PC_GRAPHS)
  bool launches_observed = false;  // every launch reaches the sampler (continuous callbacks)
  bool any_enabled = false;        // PC sampling is enabled on some context
  bool episode_under_way = false;  // an episode has its context (windows, drains)
  bool here_is_episode = false;    // ... and it is this launch's context
  // This launch's context: enabled now, ever enabled, and the number of its last window (0:
  // none yet).
  bool here_enabled = false;
  bool here_ever_enabled = false;
  uint64_t here_last_window = 0;
  // The oldest last window among the other contexts, and among the other enabled ones
  // (kNoOtherContext: none).
  uint64_t oldest_other_window = kNoOtherContext;
  uint64_t oldest_other_enabled_window = kNoOtherContext;
  // For PcScheduler::next_step.
  uint64_t episode_launches = 0;
  uint32_t window_launches = 0;
  uint64_t last_first_use_ns = 0;
  uint64_t last_module_load_ns = 0;
  // This launch runs a hot kernel with no PC samples yet (PcCoverage::wanted_at): a window due
  // opens here. Asked only while a window is due.
  bool here_wanted = false;
};

// The decision's own state, kept by the sampler between steps.
struct PcStepState {
  // Launches still to let pass before the next window opens (-1: not drawn yet), since when it
  // waits, and its dice.
  int32_t open_skip = -1;
  uint64_t open_wait_since_ns = 0;
  uint64_t skip_rng = 0x9E3779B97F4A7C15ull;
  // Launches this context waited for one on a context whose last window is older: before an
  // episode begins, and before a window starts.
  uint32_t unsampled_waits = 0;
  uint32_t start_waits = 0;
};

enum class PcAction : uint8_t {
  kNone,
  kEndForNoConsumer,  // the last consumer left: the episode under way ends, nothing drained
  kJoin,              // enable PC sampling on this context, not started: it joins the episode (P23)
  kEnable,            // an episode begins on this context (scheduler: kEnable)
  kStart,             // a window opens on this context, which becomes the episode's (kStart)
  kStop,              // the window closes (kStop)
  kDrain,             // Get Data, publish, on_drained (kDrain)
  kDisable,           // every enabled context's episode ends (kDisable)
};

// Several GPUs take their windows in turn: whether this launch lets a context whose last window is
// older go first (`oldest_other`: among the contexts that count), counting the launches it waited
// in `waits` (at most kUnsampledWaitLaunches, then it goes; reset when it goes).
inline bool pc_older_goes_first(uint64_t here_last_window, uint64_t oldest_other, bool may_wait,
                                uint32_t &waits) {
  if (may_wait && waits < kUnsampledWaitLaunches && oldest_other < here_last_window) {
    ++waits;  // wait for a launch on that one (a while: it may launch no more)
    return true;
  }
  waits = 0;
  return false;
}

// Where a due window opens. Not at the launch that finds it due: in a periodic loop that launch
// is nearly always the same call site, the one after the loop's synchronize or a CPU stretch
// (on the H100 every window of tests/gpu/pc_workload.cu began at its first kernel), so the
// kernels late in a step (a backward pass, an optimizer's) were never in a 32-launch window. It
// opens at the first launch of a hot kernel with no PC samples yet (PcCoverage), or else after
// a count of launches drawn uniformly in [0, kWindowOpenSpread): a step of up to that many
// launches is entered at a uniform place, whatever the CPU time between its launches. The wait
// is bounded in time (kWindowOpenWaitNs: a program that launches rarely), and the episode is
// enabled meanwhile, so it is charged to the duty cap as any episode time.
inline constexpr uint32_t kWindowOpenSpread = 512;
inline constexpr uint64_t kWindowOpenWaitNs = 100'000'000;

// True while this launch lets the due window pass.
inline bool pc_window_put_off(PcStepState &s, const PcStepEvent &e) {
  if (s.open_skip < 0) {
    s.skip_rng ^= s.skip_rng << 13;
    s.skip_rng ^= s.skip_rng >> 7;
    s.skip_rng ^= s.skip_rng << 17;
    s.open_skip = static_cast<int32_t>(s.skip_rng % kWindowOpenSpread);
    s.open_wait_since_ns = e.now_ns;
  }
  if (e.here_wanted || s.open_skip == 0) return false;
  if (e.now_ns >= s.open_wait_since_ns + kWindowOpenWaitNs) return false;
  --s.open_skip;
  return true;
}

// The step the scheduler asks for, as far as this launch may take it.
inline PcAction pc_scheduled_action(PcStepState &s, PcScheduler::Step step, const PcStepEvent &e) {
  using Step = PcScheduler::Step;
  switch (step) {
    case Step::kNone:
      return PcAction::kNone;
    case Step::kEnable:
      if (!e.launches_observed || !e.may_enable) return PcAction::kNone;
      // A wait left unfinished: the last episode ended before its window opened (a graph's
      // instantiation or first launch, P21). A program that does that often would never get a
      // window, so this one opens at once; else the wait is drawn anew.
      s.open_skip = s.open_skip >= 0 ? 0 : -1;
      s.open_wait_since_ns = e.now_ns;
      return PcAction::kEnable;
    case Step::kStart:
      if (pc_window_put_off(s, e) || !e.here_enabled) return PcAction::kNone;
      // Several contexts enabled (a learning episode, or ones that joined): the window goes to
      // the one whose last window is oldest.
      if (pc_older_goes_first(e.here_last_window, e.oldest_other_enabled_window, true,
                              s.start_waits))
        return PcAction::kNone;
      s.open_skip = -1;
      return PcAction::kStart;
    case Step::kStop:
      return PcAction::kStop;
    case Step::kDrain:
      return PcAction::kDrain;
    case Step::kDisable:
      return PcAction::kDisable;
  }
  return PcAction::kNone;
}

// The step this launch takes. Asks the scheduler (next_step, which moves its state on) only when
// an episode's step is in question.
inline PcAction decide_pc_step(PcStepState &s, PcScheduler &scheduler, const PcStepEvent &e) {
  if (!e.want) return e.episode_under_way ? PcAction::kEndForNoConsumer : PcAction::kNone;
  // Several contexts (GPUs). While kernels are still first used (learning), every context that
  // launches joins the episode under way, enabled but not started, also one enabled before: its
  // kernels first launched while it is disabled would never give records (P19, P20, P23).
  if (e.episode_under_way && !e.here_is_episode) {
    if (!e.here_enabled && e.may_enable && (!e.here_ever_enabled || scheduler.learning(e.now_ns)))
      return PcAction::kJoin;
    if (!e.here_enabled) return PcAction::kNone;  // (another window may start on it: below)
  }
  // An episode begins on a context never sampled before, while there is one.
  if (pc_older_goes_first(e.here_last_window, e.oldest_other_window,
                          !e.episode_under_way && !scheduler.resume_due(), s.unsampled_waits))
    return PcAction::kNone;
  // No episode begins at a launch that may not enable (a graph's first) or while some role's
  // launches still go unseen: the scheduler is not asked.
  if (!e.any_enabled && (!e.may_enable || !e.launches_observed)) return PcAction::kNone;
  const PcScheduler::Step step = scheduler.next_step(
      e.now_ns, e.episode_launches, e.window_launches, e.last_first_use_ns, e.last_module_load_ns);
  return pc_scheduled_action(s, step, e);
}

}  // namespace parcagpu
