// PC sampling's episodes under one mutex. See pc_episodes.h.
#include "pc/pc_episodes.h"

#include "base/config.h"
#include "base/cupti_api.h"
#include "pc/pc_coverage.h"
#include "pc/pc_launch_state.h"
#include "pc/pc_scheduler.h"

namespace parcagpu {

PcEpisodes::PcEpisodes(const CuptiApi &cupti, const CudaApi *cuda, const Config &config,
                       KernelActivityControl *activity, PcLaunchState &state, PcLaunchGate &gate,
                       PcMetadata &meta, uint64_t (*clock)())
    : cuda_(cuda),
      config_(config),
      state_(state),
      clock_(clock),
      coverage_(std::make_unique<PcCoverage>()),
      publisher_(state, coverage_.get()),
      contexts_(cupti, cuda, config),
      switch_(cupti, config, activity, state, meta, publisher_, contexts_, stats_),
      steps_(config, activity, state, gate, *coverage_, contexts_, switch_, stats_, clock),
      graphs_(cuda, config, activity, state, contexts_, switch_, steps_, stats_, clock) {}

PcEpisodes::~PcEpisodes() = default;

const PcScheduler &PcEpisodes::start(uint64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_.start(now);
}

void PcEpisodes::take_step(CUcontext ctx, bool want, bool may_enable, const char *function) {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is at it; this launch goes on
  if (!state_.usable.load(std::memory_order_relaxed)) return;
  steps_.take(ctx, want, may_enable, function);
}

bool PcEpisodes::learn_again() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!state_.usable) return false;
  steps_.scheduler()->learn_again(clock_());
  return steps_.scheduler()->resume_due();
}

bool PcEpisodes::resume_for_module() {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  PcScheduler *scheduler = steps_.scheduler();
  if (!lock.owns_lock() || !state_.usable || !scheduler) return false;
  if (!scheduler->module_loaded(clock_())) return false;
  stats_.module_resumes++;
  return true;
}

void PcEpisodes::keep_graph_out(GraphStep step, bool inside_launch) {
  std::lock_guard<std::mutex> lock(mu_);
  graphs_.keep_out(step, inside_launch);
}

void PcEpisodes::register_graph(CUgraph graph, CUcontext ctx) {
  // Only with shadow execs asked for, graphs kept out of PC sampling, and a driver that can:
  // without the mutex, as most programs never ask.
  if (!graph || !ctx || !cuda_ || !cuda_->can_register_graphs() || !config_.pc_graph_shadows ||
      config_.pc_graphs)
    return;
  std::lock_guard<std::mutex> lock(mu_);
  graphs_.register_graph(graph, ctx);
}

void PcEpisodes::on_context_destroy(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  PcContext *c = contexts_.find(ctx);
  if (!c) return;
  if (c->enabled && state_.usable) {
    const bool exclusive = steps_.exclusive_begin();
    steps_.end_episode(*c, /*wait_for_workers=*/true);
    if (exclusive) steps_.exclusive_end();
  }
  if (contexts_.episode() == c) {
    contexts_.set_episode(nullptr);
    PcScheduler *scheduler = steps_.scheduler();
    if (scheduler && scheduler->in_episode()) scheduler->on_context_lost(clock_());
  }
  contexts_.remove(c);
}

void PcEpisodes::shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.usable && state_.any_enabled.load(std::memory_order_relaxed)) {
    const bool exclusive = steps_.exclusive_begin();
    for (auto &c : contexts_)
      if (c->enabled && state_.usable) steps_.end_episode(*c, /*wait_for_workers=*/true);
    if (exclusive) steps_.exclusive_end();
  }
  state_.usable = false;
  publisher_.finish();  // what was drained is fired before the process goes
}

PcStats PcEpisodes::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PcStats s = stats_;
  publisher_.add_firing_stats(s);
  return s;
}

}  // namespace parcagpu
