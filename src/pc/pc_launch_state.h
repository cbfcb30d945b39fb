// What PC sampling's launch path reads without a lock: whether PC sampling is usable and enabled,
// on which contexts, copies of the episode's window and drain state, the launches counted, and
// the correlation IDs announced in the window under way. PcSampler holds it and reads it on every
// launch it sees (pc_step_due, on_launch_enter); PcEpisodes' parts write it under its mutex as
// it carries the episode's steps out. No CUPTI call, no lock.
#pragma once

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace parcagpu {

struct PcLaunchState {
  std::atomic<bool> usable{false};
  std::atomic<bool> any_enabled{false};
  // Every launch reaches PcSampler::on_launch_enter (the launch callbacks are continuous).
  std::atomic<bool> launches_observed{false};
  // Contexts with PC sampling enabled now, for the launch path: a launch on any other context
  // during an episode comes to take a step, which lets it join (docs/pc-sampling.md P23).
  static constexpr size_t kEnabledSlots = 16;
  std::atomic<CUcontext> enabled_ctx[kEnabledSlots] = {};
  // Lock-free copies of the scheduler's state for the launch path's pre-check (step_due).
  std::atomic<bool> window_open{false};
  std::atomic<bool> drain_pending{false};
  std::atomic<uint64_t> drain_due_ns{0};
  std::atomic<uint64_t> window_deadline_ns{0};
  std::atomic<uint32_t> window_launches{0};
  std::atomic<uint32_t> window_limit{0};
  // Launches entered since the episode's enable: each left a kernel record (PcScheduler).
  std::atomic<uint64_t> episode_launches{0};
  std::atomic<uint64_t> last_first_use_ns{0};
  // When a module was last loaded (PcScheduler::Params::first_enable_quiet_ns).
  std::atomic<uint64_t> last_module_load_ns{0};
  uint64_t launch_budget = 0;  // PcScheduler::Params::launch_budget, set once by init
  // Correlation IDs announced since the window started (a window spans at most 32 launches,
  // plus what the rate gates announce meanwhile).
  static constexpr size_t kAnnouncedSlots = 512;
  std::atomic<uint32_t> announced[kAnnouncedSlots] = {};
  std::atomic<uint32_t> announced_next{0};

  bool enabled_here(CUcontext ctx) const {
    for (const auto &slot : enabled_ctx)
      if (slot.load(std::memory_order_relaxed) == ctx) return true;
    return false;
  }
  // One writer (PcEpisodes, under its mutex).
  void mark_enabled(CUcontext ctx, bool enabled) {
    for (auto &slot : enabled_ctx) {
      if (enabled && slot.load(std::memory_order_relaxed) == nullptr) {
        slot.store(ctx, std::memory_order_release);
        return;
      }
      if (!enabled && slot.load(std::memory_order_relaxed) == ctx) {
        slot.store(nullptr, std::memory_order_release);
        return;
      }
    }
  }
  void note_announced(uint32_t correlation_id) {
    const uint32_t i = announced_next.fetch_add(1, std::memory_order_relaxed) % kAnnouncedSlots;
    announced[i].store(correlation_id, std::memory_order_relaxed);
  }
  bool was_announced(uint32_t correlation_id) const {
    for (const auto &slot : announced)
      if (slot.load(std::memory_order_relaxed) == correlation_id) return true;
    return false;
  }
  // A launch entering while PC sampling is enabled (PcSampler::on_launch_enter), counted for
  // the episode and for the window open; true at the one that spends half the launch budget.
  bool count_launch() {
    const bool half = episode_launches.fetch_add(1, std::memory_order_relaxed) == launch_budget / 2;
    if (window_open.load(std::memory_order_relaxed))
      window_launches.fetch_add(1, std::memory_order_relaxed);
    return half;
  }
  // A window starts: launches announced before it are not what it samples.
  void forget_announced() {
    for (auto &slot : announced) slot.store(0, std::memory_order_relaxed);
  }
};

}  // namespace parcagpu
