#include "pc/pc_scheduler.h"

#include <algorithm>

namespace parcagpu {

PcScheduler::PcScheduler(const Params &params, const PcRateController::Params &windows,
                         uint64_t now_ns, uint64_t seed)
    : p_(params), windows_(windows, now_ns, seed), began_ns_(now_ns) {
  // The first episode at the first launch after a consumer attached, unless modules are still
  // being loaded (first_enable_ns): a short process is sampled too.
  next_episode_ns_.store(now_ns, std::memory_order_relaxed);
}

bool PcScheduler::learning(uint64_t now_ns) const {
  // (A first use noted by another thread may carry a time a little after now_ns.)
  const auto since = [now_ns](uint64_t t) { return now_ns > t ? now_ns - t : 0; };
  return last_first_use_ns_ != 0 && since(last_first_use_ns_) < p_.first_use_quiet_ns &&
         since(learning_since_ns_) < p_.max_learning_ns;
}

bool PcScheduler::over(uint64_t now_ns, uint64_t episode_launches) const {
  if (episode_launches >= p_.launch_budget) return true;
  return now_ns - episode_start_ns_ >= (learning(now_ns) ? p_.max_learning_ns : p_.max_episode_ns);
}

PcScheduler::Step PcScheduler::next_step(uint64_t now_ns, uint64_t episode_launches,
                                         uint32_t window_launches, uint64_t last_first_use_ns,
                                         uint64_t last_module_load_ns) {
  if (last_first_use_ns > last_first_use_ns_) last_first_use_ns_ = last_first_use_ns;
  if (last_module_load_ns > last_module_load_ns_) last_module_load_ns_ = last_module_load_ns;
  // A module loaded is a kernel first used (module_loaded), whichever thread saw it.
  if (episodes_ != 0 && last_module_load_ns_ > last_first_use_ns_)
    last_first_use_ns_ = last_module_load_ns_;
  switch (phase_) {
    case Phase::kIdle:
      return idle_step(now_ns);
    case Phase::kEnabled:
      return enabled_step(now_ns, episode_launches);
    case Phase::kWindow:
      if (episode_launches >= p_.launch_budget) cut_ = true;
      if (window_launches >= window_limit_ || now_ns >= window_deadline_ns_ ||
          over(now_ns, episode_launches))
        return Step::kStop;
      return Step::kNone;
    case Phase::kDrainPending:
      if (episode_launches >= p_.launch_budget) cut_ = true;
      // Past the budget the episode ends now: what CUPTI has not decoded yet comes with Disable.
      if (now_ns >= drain_due_ns_ || over(now_ns, episode_launches)) return Step::kDrain;
      return Step::kNone;
  }
  return Step::kNone;
}

uint64_t PcScheduler::first_enable_ns() const {
  if (start_up_over_) return 0;
  // The first launches load the first modules (inside their calls, after this decision): the
  // quiet is counted from the scheduler's start as from a module loaded then.
  return std::min(std::max(last_module_load_ns_, began_ns_) + p_.first_enable_quiet_ns,
                  began_ns_ + p_.max_first_enable_wait_ns);
}

PcScheduler::Step PcScheduler::idle_step(uint64_t now_ns) {
  if (now_ns < next_episode_ns()) return Step::kNone;
  // Start-up still loads modules: the first episode waits (a module loaded meanwhile puts it
  // off again when it comes due).
  if (episodes_ == 0) {
    const uint64_t due = first_enable_ns();
    if (now_ns < due) {
      next_episode_ns_.store(due, std::memory_order_relaxed);
      return Step::kNone;
    }
  }
  // Learning goes on: enabled whether a window may open or not (it opens when the
  // controller allows, as in any learning episode). (resume_ stays until on_enabled: the
  // sampler may not enable at this launch.)
  resumed_ = resume_ && learning(now_ns);
  if (resumed_) {
    window_limit_ = windows_.should_open(now_ns);
    window_pending_ = window_limit_ != 0;
    return Step::kEnable;
  }
  if (resume_) {
    resume_ = false;
    next_episode_ns_.store(std::max(scheduled_ns_, windows_.next_open_ns()),
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
  window_limit_ = n;
  window_pending_ = true;
  return Step::kEnable;
}

PcScheduler::Step PcScheduler::enabled_step(uint64_t now_ns, uint64_t episode_launches) {
  if (episode_launches >= p_.launch_budget) cut_ = true;
  if (over(now_ns, episode_launches)) return Step::kDisable;
  if (window_pending_) return Step::kStart;
  if (!window_done_) return Step::kNone;
  if (!learning(now_ns)) return Step::kDisable;
  // Kernels are still being used for the first time: stay enabled, and sample on.
  learned_ = true;
  const uint32_t n = windows_.should_open(now_ns);
  if (n == 0) return Step::kNone;
  window_limit_ = n;
  window_pending_ = true;
  return Step::kStart;
}

void PcScheduler::on_enabled(uint64_t now_ns) {
  phase_ = Phase::kEnabled;
  episode_start_ns_ = now_ns;
  first_window_done_ns_ = 0;
  // A resumed episode with no window due goes straight to learning (windows as allowed).
  window_done_ = resumed_ && !window_pending_;
  resume_ = false;
  if (!resumed_) learning_since_ns_ = now_ns;
  // The process's first episode: its kernels are being launched for the first time now (their
  // activity records, which tell which are new, come later).
  if (episodes_ == 0) last_first_use_ns_ = std::max(last_first_use_ns_, now_ns);
  cut_ = false;
  ++episodes_;
  in_episode_.store(true, std::memory_order_relaxed);
}

void PcScheduler::on_started(uint64_t now_ns) {
  phase_ = Phase::kWindow;
  window_pending_ = false;
  window_start_ns_ = now_ns;
  window_deadline_ns_ = now_ns + windows_.params().max_window_ns;
}

void PcScheduler::on_stopped(uint64_t now_ns, uint32_t launches) {
  windows_.on_window_closed(window_start_ns_, now_ns, launches);
  phase_ = Phase::kDrainPending;
  drain_due_ns_ = now_ns + p_.drain_delay_ns;
}

void PcScheduler::on_drained(uint64_t samples, uint32_t launches, uint64_t now_ns) {
  windows_.on_samples(samples, launches);
  if (!window_done_) first_window_done_ns_ = now_ns;
  phase_ = Phase::kEnabled;
  window_done_ = true;
}

void PcScheduler::on_disabled(uint64_t now_ns, bool for_graph) {
  if (phase_ == Phase::kIdle) return;
  const uint64_t spent = now_ns > episode_start_ns_ ? now_ns - episode_start_ns_ : 0;
  if (cut_) ++cut_by_budget_;
  phase_ = Phase::kIdle;
  window_pending_ = false;
  window_done_ = false;
  cut_ = false;
  // Time budget: an episode that took `spent` is followed by at least spent * (1/duty - 1). An
  // episode kept enabled while kernels were first used is charged its ordinary length only: that
  // happens while a program starts, and its next episode is not put off by it.
  const double duty = std::clamp(p_.max_duty, 1e-6, 1.0);
  // A resumed episode is the learning period going on: charged its first window only (if any).
  const bool first_window = first_window_done_ns_ > episode_start_ns_;
  uint64_t ordinary = spent;
  if (learned_ || resumed_)
    ordinary = first_window ? first_window_done_ns_ - episode_start_ns_ : resumed_ ? 0 : spent;
  const uint64_t charged =
      std::max(p_.min_episode_charge_ns, std::min({spent, ordinary, p_.max_episode_ns}));
  learned_ = false;
  resumed_ = false;
  const uint64_t gap = static_cast<uint64_t>(static_cast<double>(charged) * (1.0 / duty - 1.0));
  scheduled_ns_ = std::max(now_ns + gap, windows_.next_open_ns());
  // Ended before a graph step while kernels are still first used: the next launch resumes
  // learning. Decided here, in the same store that ends the episode, so that no thread (the
  // watcher, woken by the episode's flush request) ever sees the episode over and none due.
  const bool resume = for_graph && learning(now_ns) && resumes_ < p_.max_learning_resumes;
  if (resume) {
    ++resumes_;
    resume_ = true;
  }
  next_episode_ns_.store(resume ? now_ns : scheduled_ns_, std::memory_order_relaxed);
  in_episode_.store(false, std::memory_order_relaxed);
}

void PcScheduler::put_off(uint64_t now_ns, uint64_t delay_ns) {
  if (phase_ != Phase::kIdle) return;
  next_episode_ns_.store(std::max(next_episode_ns(), now_ns + delay_ns), std::memory_order_relaxed);
}

void PcScheduler::start_up_over(uint64_t now_ns) {
  // No episode yet, so none under way: the next launch may begin the first.
  if (episodes_ != 0 || start_up_over_) return;
  start_up_over_ = true;
  next_episode_ns_.store(now_ns, std::memory_order_relaxed);
}

bool PcScheduler::module_loaded(uint64_t now_ns) {
  if (episodes_ == 0) return false;  // the first episode learns anyway
  // Kernels are first used now: a learning period goes on, or a new one begins (its length
  // counted from here: a program that loads a module now and then starts one each time).
  if (!learning(now_ns)) learning_since_ns_ = now_ns;
  last_first_use_ns_ = std::max(last_first_use_ns_, now_ns);
  if (phase_ != Phase::kIdle || resume_ || resumes_ >= p_.max_learning_resumes) return false;
  ++resumes_;
  resume_ = true;
  next_episode_ns_.store(now_ns, std::memory_order_relaxed);
  return true;
}

void PcScheduler::learn_again(uint64_t now_ns) {
  if (episodes_ == 0) return;  // the first episode learns anyway
  learning_since_ns_ = now_ns;
  last_first_use_ns_ = std::max(last_first_use_ns_, now_ns);
  resumes_ = 0;
  if (phase_ != Phase::kIdle) return;  // the episode under way stays enabled while learning
  resume_ = true;
  next_episode_ns_.store(now_ns, std::memory_order_relaxed);
}

}  // namespace parcagpu
