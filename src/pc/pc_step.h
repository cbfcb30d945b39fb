// What a launch does for PC sampling when PcSampler::step_due sent it to take_step: the step of
// the episode, as a pure function of the sampler's facts at that launch (the event, with its
// clock), the little state the decision keeps (PcStepState) and the episode schedule
// (PcScheduler, itself pure and asked only when an episode's step is in question). No CUPTI, no
// lock, no clock of its own: PcSampler (pc_sampling.cc) gathers the event under its mutex,
// carries the action out (the PC Sampling API calls, with the launch gate held exclusively) and
// reports what was done to the scheduler. Unit-tested on a fake clock in
// tests/unit/lib/pc_step_test.cc.
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
  bool want = false;               // a consumer wants PC samples (PcSampler::wanted)
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
};

// The decision's own state, kept by the sampler between steps.
struct PcStepState {
  // Launches still to let pass before the next window opens (-1: not drawn yet), and its dice.
  int32_t open_skip = -1;
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

// The launch that first finds a window due is, in a periodic loop, nearly always the same call
// site: the one after the loop's synchronize, where the waiting happened (on the H100 every
// window of tests/gpu/pc_workload.cu began at its first kernel, never at the other two). So the
// window opens 0..7 launches later, by a dice roll: true while this launch lets it pass.
inline bool pc_window_put_off(PcStepState &s) {
  if (s.open_skip < 0) {
    s.skip_rng ^= s.skip_rng << 13;
    s.skip_rng ^= s.skip_rng >> 7;
    s.skip_rng ^= s.skip_rng << 17;
    s.open_skip = static_cast<int32_t>(s.skip_rng % 8);
  }
  if (s.open_skip == 0) return false;
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
      return e.launches_observed && e.may_enable ? PcAction::kEnable : PcAction::kNone;
    case Step::kStart:
      if (pc_window_put_off(s) || !e.here_enabled) return PcAction::kNone;
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
