// Whether a launch must go to PcEpisodes for a step (PcSampler::on_launch_enter): the launch
// path's pre-check, from the lock-free copies of the episode's state (PcLaunchState) and the
// schedule's lock-free hint (PcScheduler::episode_due). Most launches are answered no here, with
// no lock taken; the step itself is decided under the episodes' mutex (decide_pc_step, pc_step.h).
// Inline: it runs at every launch PcSampler sees while a consumer wants samples.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "pc/pc_launch_state.h"
#include "pc/pc_scheduler.h"

namespace parcagpu {

// want: a consumer wants PC samples (without one, only a launch that can end the episode still
// enabled goes).
inline bool pc_step_due(const PcLaunchState &s, const PcScheduler &schedule, CUcontext ctx,
                        bool want, uint64_t now_ns) {
  if (!want) return s.any_enabled.load(std::memory_order_relaxed);
  if (!s.any_enabled.load(std::memory_order_acquire))
    return s.launches_observed.load(std::memory_order_relaxed) && schedule.episode_due(now_ns);
  // A launch on a context where PC sampling is not enabled, during an episode: it may have to
  // join before its call (a kernel first launched there now would never give records, P23),
  // also while a window is open on another context.
  if (!s.enabled_here(ctx)) return true;
  if (s.episode_launches.load(std::memory_order_relaxed) >= s.launch_budget) return true;
  if (s.window_open.load(std::memory_order_acquire))
    return s.window_launches.load(std::memory_order_relaxed) >=
               s.window_limit.load(std::memory_order_relaxed) ||
           now_ns >= s.window_deadline_ns.load(std::memory_order_relaxed);
  if (s.drain_pending.load(std::memory_order_acquire))
    return now_ns >= s.drain_due_ns.load(std::memory_order_relaxed);
  return true;  // enabled, no window: it opens (dice permitting), or the episode ends
}

}  // namespace parcagpu
