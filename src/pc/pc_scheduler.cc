#include "pc/pc_scheduler.h"

#include <algorithm>

namespace parcagpu {

PcScheduler::PcScheduler(const Params &params, const PcRateController::Params &windows,
                         uint64_t now_ns, uint64_t seed)
    : windows_(windows, now_ns, seed),
      learning_(params, now_ns),
      timing_(params),
      window_(windows.max_window_ns, params.drain_delay_ns) {
  // The first episode at the first launch after a consumer attached, unless modules are still
  // being loaded (PcLearning::first_enable_ns): a short process is sampled too.
  next_episode_ns_.store(now_ns, std::memory_order_relaxed);
}

PcScheduler::Step PcScheduler::next_step(uint64_t now_ns, uint64_t episode_launches,
                                         uint32_t window_launches, uint64_t last_first_use_ns,
                                         uint64_t last_module_load_ns) {
  learning_.note_uses(last_first_use_ns, last_module_load_ns, timing_.episodes() != 0);
  switch (phase_) {
    case Phase::kIdle:
      return idle_step(now_ns);
    case Phase::kEnabled:
      return enabled_step(now_ns, episode_launches);
    case Phase::kWindow: {
      const bool over = timing_.over(now_ns, episode_launches, learning_.learning(now_ns));
      return over || window_.full(now_ns, window_launches) ? Step::kStop : Step::kNone;
    }
    case Phase::kDrainPending: {
      // Past the budget the episode ends now: what CUPTI has not decoded yet comes with Disable.
      const bool over = timing_.over(now_ns, episode_launches, learning_.learning(now_ns));
      return over || window_.drain_due(now_ns) ? Step::kDrain : Step::kNone;
    }
  }
  return Step::kNone;
}

PcScheduler::Step PcScheduler::idle_step(uint64_t now_ns) {
  if (now_ns < next_episode_ns()) return Step::kNone;
  // Start-up still loads modules: the first episode waits (a module loaded meanwhile puts it
  // off again when it comes due).
  if (timing_.episodes() == 0) {
    const uint64_t due = learning_.first_enable_ns();
    if (now_ns < due) {
      next_episode_ns_.store(due, std::memory_order_relaxed);
      return Step::kNone;
    }
  }
  // Learning goes on: enabled whether a window may open or not (it opens when the
  // controller allows, as in any learning episode). (The resume stays due until on_enabled:
  // the sampler may not enable at this launch.)
  if (learning_.resume_now(now_ns)) {
    window_.plan(windows_.should_open(now_ns));
    return Step::kEnable;
  }
  if (learning_.drop_resume()) {
    next_episode_ns_.store(std::max(timing_.scheduled_ns(), windows_.next_open_ns()),
                           std::memory_order_relaxed);
    if (now_ns < next_episode_ns()) return Step::kNone;
  }
  // An episode only when a window can open in it: the sample credit and the window duty
  // (PcRateController) decide, so an episode never waits enabled.
  const uint32_t n = windows_.should_open(now_ns);
  if (n == 0) {
    next_episode_ns_.store(std::max(next_episode_ns(), windows_.next_open_ns()),
                           std::memory_order_relaxed);
    return Step::kNone;
  }
  window_.plan(n);
  return Step::kEnable;
}

PcScheduler::Step PcScheduler::enabled_step(uint64_t now_ns, uint64_t episode_launches) {
  const bool learning = learning_.learning(now_ns);
  if (timing_.over(now_ns, episode_launches, learning)) return Step::kDisable;
  if (window_.pending()) return Step::kStart;
  if (!window_.done()) return Step::kNone;
  if (!learning) return Step::kDisable;
  // Kernels are still being used for the first time: stay enabled, and sample on.
  learning_.keep_learning();
  const uint32_t n = windows_.should_open(now_ns);
  if (n == 0) return Step::kNone;
  window_.plan(n);
  return Step::kStart;
}

void PcScheduler::on_enabled(uint64_t now_ns) {
  phase_ = Phase::kEnabled;
  learning_.on_enabled(now_ns, /*first=*/timing_.episodes() == 0);
  timing_.on_enabled(now_ns);
  window_.on_episode_enabled(learning_.resumed());
  in_episode_.store(true, std::memory_order_relaxed);
}

void PcScheduler::on_started(uint64_t now_ns) {
  phase_ = Phase::kWindow;
  window_.on_started(now_ns);
}

void PcScheduler::on_stopped(uint64_t now_ns, uint32_t launches) {
  windows_.on_window_closed(window_.started_ns(), now_ns, launches);
  phase_ = Phase::kDrainPending;
  window_.on_stopped(now_ns);
}

void PcScheduler::on_drained(uint64_t samples, uint32_t launches, uint64_t now_ns) {
  windows_.on_samples(samples, launches);
  window_.on_drained(now_ns);
  phase_ = Phase::kEnabled;
}

void PcScheduler::on_disabled(uint64_t now_ns, bool for_graph) {
  if (phase_ == Phase::kIdle) return;
  phase_ = Phase::kIdle;
  timing_.on_disabled(now_ns, window_.first_drained_ns(), learning_.kept_learning(),
                      learning_.resumed(), windows_.next_open_ns());
  window_.on_episode_over();
  // Whether the next launch resumes learning is decided here, in the same store that ends the
  // episode, so that no thread (the watcher, woken by the episode's flush request) ever sees the
  // episode over and none due.
  const bool resume = learning_.on_disabled(now_ns, for_graph);
  next_episode_ns_.store(resume ? now_ns : timing_.scheduled_ns(), std::memory_order_relaxed);
  in_episode_.store(false, std::memory_order_relaxed);
}

void PcScheduler::put_off(uint64_t now_ns, uint64_t delay_ns) {
  if (phase_ != Phase::kIdle) return;
  next_episode_ns_.store(std::max(next_episode_ns(), now_ns + delay_ns), std::memory_order_relaxed);
}

void PcScheduler::start_up_over(uint64_t now_ns) {
  // No episode yet, so none under way: the next launch may begin the first.
  if (timing_.episodes() != 0 || !learning_.end_start_up()) return;
  next_episode_ns_.store(now_ns, std::memory_order_relaxed);
}

bool PcScheduler::module_loaded(uint64_t now_ns) {
  if (timing_.episodes() == 0) return false;  // the first episode learns anyway
  if (!learning_.module_loaded(now_ns, phase_ == Phase::kIdle)) return false;
  next_episode_ns_.store(now_ns, std::memory_order_relaxed);
  return true;
}

void PcScheduler::learn_again(uint64_t now_ns) {
  if (timing_.episodes() == 0) return;  // the first episode learns anyway
  if (!learning_.learn_again(now_ns, phase_ == Phase::kIdle)) return;
  next_episode_ns_.store(now_ns, std::memory_order_relaxed);
}

}  // namespace parcagpu
