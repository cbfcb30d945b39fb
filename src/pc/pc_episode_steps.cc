// The steps of PC sampling's episodes, carried out. See pc_episode_steps.h.
#include "pc/pc_episode_steps.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "base/config.h"
#include "base/log.h"
#include "base/subsystem_links.h"
#include "pc/pc_context_switch.h"
#include "pc/pc_contexts.h"
#include "pc/pc_coverage.h"
#include "pc/pc_gpu_locks.h"
#include "pc/pc_launch_gate.h"
#include "pc/pc_launch_state.h"
#include "pc/pc_scheduler.h"
#include "pc/pc_stats.h"

namespace parcagpu {
namespace {

// Get Data right after Stop: a window's samples are all there (P14). (What an episode costs at
// its first sampled launch and in Disable is set by the hardware buffer, not by CUPTI's worker
// threads' sleep span (P13): PARCAGPU_PC_HW_BUFFER_MB.)
constexpr uint64_t kDrainDelayNs = 0;
// Kernel records an episode may leave in the activity buffers at most, as a share of them: every
// launch of an episode leaves one per kernel (kernel activity is on for all, P12), read or not.
// A kernel record is taken as 256 bytes (CUpti_ActivityKernel is 200-odd) and a launch as 4
// kernels (graph launches carry several): an eighth of the buffers, with room for the records of
// the launches around the episode and for a periodic flush that runs late on a busy machine.
constexpr uint64_t kKernelRecordBytes = 256;
constexpr uint64_t kRecordsPerLaunch = 4;
constexpr uint64_t kEpisodeShareOfBuffers = 8;
// How long Stop / Get Data / Disable wait for other threads to leave their launch calls before
// putting the work off to a later launch.
constexpr uint64_t kExclusiveWaitNs = 200'000'000;

}  // namespace

PcEpisodeSteps::PcEpisodeSteps(const Config &config, KernelActivityControl *activity,
                               PcLaunchState &state, PcLaunchGate &gate, PcCoverage &coverage,
                               PcContexts &contexts, PcContextSwitch &context_switch,
                               PcStats &stats, uint64_t (*clock)())
    : config_(config),
      activity_(activity),
      state_(state),
      gate_(gate),
      coverage_(coverage),
      contexts_(contexts),
      switch_(context_switch),
      stats_(stats),
      clock_(clock) {}

PcEpisodeSteps::~PcEpisodeSteps() = default;

const PcScheduler &PcEpisodeSteps::start(uint64_t now) {
  PcRateController::Params windows;
  windows.target_rate = config_.pc_sampling_rate;
  PcScheduler::Params episodes;
  episodes.drain_delay_ns = kDrainDelayNs;
  episodes.first_enable_quiet_ns = uint64_t{config_.pc_start_quiet_ms} * 1'000'000;
  episodes.launch_budget =
      std::max<uint64_t>(1024, uint64_t{config_.max_buffers} * config_.buffer_kib * 1024 /
                                   kKernelRecordBytes / kRecordsPerLaunch / kEpisodeShareOfBuffers);
  state_.launch_budget = episodes.launch_budget;
  scheduler_ =
      std::make_unique<PcScheduler>(episodes, windows, now, now ^ static_cast<uint64_t>(getpid()));
  return *scheduler_;
}

bool PcEpisodeSteps::exclusive_begin() {
  if (gate_.exclusive_begin(kExclusiveWaitNs)) return true;
  stats_.gate_timeouts++;
  return false;
}

void PcEpisodeSteps::exclusive_end() { gate_.exclusive_end(); }

PcStepEvent PcEpisodeSteps::step_event(const PcContext *here, bool want, bool may_enable,
                                       uint64_t now, const char *function) const {
  PcStepEvent e;
  e.now_ns = now;
  e.want = want;
  e.may_enable = may_enable;
  e.launches_observed = state_.launches_observed.load(std::memory_order_relaxed);
  e.any_enabled = state_.any_enabled.load(std::memory_order_relaxed);
  e.episode_under_way = contexts_.episode() != nullptr;
  if (!here) return e;
  e.here_is_episode = here == contexts_.episode();
  e.here_enabled = here->enabled;
  e.here_ever_enabled = here->ever_enabled;
  e.here_last_window = here->last_window;
  contexts_.oldest_other_windows(here, e.oldest_other_window, e.oldest_other_enabled_window);
  e.episode_launches = state_.episode_launches.load(std::memory_order_relaxed);
  e.window_launches = state_.window_launches.load(std::memory_order_relaxed);
  e.last_first_use_ns = state_.last_first_use_ns.load(std::memory_order_relaxed);
  e.last_module_load_ns = state_.last_module_load_ns.load(std::memory_order_relaxed);
  // Enabled here, no window open or draining: a window may be due. Only then is the launch's
  // kernel looked up (a hash and a map, under PcCoverage's mutex).
  if (here->enabled && !state_.window_open.load(std::memory_order_relaxed) &&
      !state_.drain_pending.load(std::memory_order_relaxed))
    e.here_wanted = coverage_.wanted_at(function);
  return e;
}

void PcEpisodeSteps::take(CUcontext ctx, bool want, bool may_enable, const char *function) {
  const uint64_t now = clock_();
  PcContext *here = want ? &contexts_.find_or_add(ctx) : nullptr;
  const PcAction a =
      decide_pc_step(step_, *scheduler_, step_event(here, want, may_enable, now, function));
  if (a == PcAction::kNone) return;
  if (a == PcAction::kEndForNoConsumer || !here) return end_for_no_consumer();
  apply_step(a, *here, now);
}

void PcEpisodeSteps::end_for_no_consumer() {
  // The last consumer left: the episode under way ends now, nothing is drained for nobody.
  if (!exclusive_begin()) return;
  end_all_episodes(/*wait_for_workers=*/false);
  exclusive_end();
  debug_log("PC sampling: no consumer left, the episode under way ended");
}

// Carries out what decide_pc_step decided, each PC Sampling API step with the gate held
// exclusively.
void PcEpisodeSteps::apply_step(PcAction a, PcContext &here, uint64_t now) {
  switch (a) {
    case PcAction::kNone:
    case PcAction::kEndForNoConsumer:
      return;
    case PcAction::kJoin:
      // Enabled, not started: its kernels first launched from now on give records (P19, P20).
      if (!contexts_.lock_gpu(here, now, stats_)) return;
      if (!exclusive_begin()) return contexts_.unlock_gpu(here);
      if (!switch_.enable(here)) contexts_.unlock_gpu(here);
      exclusive_end();
      return;
    case PcAction::kEnable:
      return begin_episode(here, now);
    case PcAction::kStart:
      contexts_.set_episode(&here);  // the windows of an episode go to the contexts that launch
      // Exclusive, as Stop: a launch of another thread that is inside its call now was told no
      // window is open (so it is not announced for it), and its kernel must not be sampled
      // either; a launch entering after this sees the window open. (Start needs no idle GPU, P6.)
      if (!exclusive_begin()) return;
      start_window(now);
      return exclusive_end();
    case PcAction::kStop:
      if (!exclusive_begin()) return;
      close_window(now);
      return exclusive_end();
    case PcAction::kDrain:
      return drain_window();
    case PcAction::kDisable:
      if (!exclusive_begin()) return;
      end_all_episodes(/*wait_for_workers=*/false);
      return exclusive_end();
  }
}

void PcEpisodeSteps::begin_episode(PcContext &c, uint64_t now) {
  if (!contexts_.lock_gpu(c, now, stats_))
    return scheduler_->put_off(now, PcGpuLocks::kOtherProcessRetryNs);
  if (!exclusive_begin()) return contexts_.unlock_gpu(c);
  const bool ok = switch_.enable(c);
  exclusive_end();
  if (!ok) return contexts_.unlock_gpu(c);
  contexts_.set_episode(&c);
  state_.episode_launches.store(0, std::memory_order_relaxed);
  // The process's first episode: its kernels are being launched for the first time now, and
  // their activity records (which tell which are new) come only with the next flush.
  if (stats_.episodes == 0 && state_.usable.load(std::memory_order_relaxed))
    state_.last_first_use_ns.store(clock_(), std::memory_order_relaxed);
  episode_started_ns_ = clock_();
  scheduler_->on_enabled(episode_started_ns_);
  stats_.episodes++;
}

void PcEpisodeSteps::drain_window() {
  if (!exclusive_begin()) return;
  const uint64_t before = stats_.pairs;
  switch_.drain(*contexts_.episode());
  exclusive_end();
  state_.drain_pending.store(false, std::memory_order_release);
  if (state_.usable)
    scheduler_->on_drained(stats_.pairs - before, state_.window_limit.load(), clock_());
}

void PcEpisodeSteps::start_window(uint64_t now) {
  PcContext &c = *contexts_.episode();
  const PcResult r = c.session.start();
  if (!r.ok()) return switch_.fail(r);
  scheduler_->on_started(now);
  window_started_ns_ = now;
  c.last_window = stats_.windows + 1;  // stats_.windows counts this one below
  // Launches announced before this window are not what it samples (their kernels may be: left
  // out, see PcSampler::note_announced).
  state_.forget_announced();
  state_.window_limit.store(scheduler_->window_limit(), std::memory_order_relaxed);
  state_.window_launches.store(0, std::memory_order_relaxed);
  state_.window_deadline_ns.store(scheduler_->window_deadline_ns(), std::memory_order_relaxed);
  state_.window_open.store(true, std::memory_order_seq_cst);
  stats_.windows++;
}

void PcEpisodeSteps::close_window(uint64_t now) {
  const PcResult r = contexts_.episode()->session.stop();
  state_.window_open.store(false, std::memory_order_release);
  if (!r.ok()) return switch_.fail(r);
  const uint32_t launches = state_.window_launches.load(std::memory_order_relaxed);
  state_.window_limit.store(launches,
                            std::memory_order_relaxed);  // what the drain's samples came from
  stats_.window_launches += launches;
  stats_.window_ns += now > window_started_ns_ ? now - window_started_ns_ : 0;
  scheduler_->on_stopped(now, launches);
  state_.drain_due_ns.store(now + kDrainDelayNs, std::memory_order_relaxed);
  state_.drain_pending.store(true, std::memory_order_release);
}

void PcEpisodeSteps::end_all_episodes(bool wait_for_workers, bool for_graph) {
  // The sampled context first (its window, its drain), then the ones that only joined.
  if (PcContext *episode = contexts_.episode()) end_episode(*episode, wait_for_workers, for_graph);
  for (auto &c : contexts_)
    if (c->enabled && state_.usable) end_episode(*c, wait_for_workers, for_graph);
}

void PcEpisodeSteps::end_episode(PcContext &c, bool wait_for_workers, bool for_graph) {
  const bool episode_here = contexts_.episode() == &c;
  if (state_.window_open.load(std::memory_order_relaxed) && episode_here) {
    close_window(clock_());
    if (!state_.usable) return;
  }
  if (state_.drain_pending.load(std::memory_order_relaxed) && episode_here) {
    if (wait_for_workers) {
      // Give CUPTI's workers the time they are given on the launch path.
      const uint64_t due = state_.drain_due_ns.load(std::memory_order_relaxed);
      const uint64_t now = clock_();
      if (due > now) {
        const uint64_t wait = std::min(due - now, kDrainDelayNs);
        timespec ts{0, static_cast<long>(wait)};
        nanosleep(&ts, nullptr);
      }
    }
    state_.drain_pending.store(false, std::memory_order_release);
    switch_.drain(c);
    if (!state_.usable) return;
  }
  if (!c.enabled) return;
  const uint64_t disable_at = clock_();
  const PcResult r = c.session.disable();
  const uint64_t disabled_at = clock_();
  stats_.disable_ns += disabled_at - disable_at;
  stats_.max_disable_ns = std::max(stats_.max_disable_ns, disabled_at - disable_at);
  contexts_.unlock_gpu(c);
  if (contexts_.episode() == &c) contexts_.set_episode(nullptr);
  const bool any = switch_.note_disabled(c);
  if (!any && episode_started_ns_ && disabled_at > episode_started_ns_)
    stats_.enabled_ns += disabled_at - episode_started_ns_;
  if (!any && activity_) activity_->hold_on(false);
  if (activity_) activity_->request_flush();  // the episode's records, before they pile up
  scheduler_->on_disabled(clock_(), for_graph);
  debug_log("PC sampling disabled: episode %llu over after %.1f ms (Disable %.1f ms)%s",
            static_cast<unsigned long long>(stats_.episodes),
            (disabled_at - std::min(disabled_at, episode_started_ns_)) / 1e6,
            (disabled_at - disable_at) / 1e6,
            scheduler_->episodes_cut_by_budget() > stats_.episodes_cut
                ? " (its launch budget spent)"
                : "");
  stats_.episodes_cut = scheduler_->episodes_cut_by_budget();
  switch_.publish_disabled(c, r);
}

}  // namespace parcagpu
