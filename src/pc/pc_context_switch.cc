// PC sampling turned on and off on one context. See pc_context_switch.h.
#include "pc/pc_context_switch.h"

#include "base/clock.h"
#include "base/config.h"
#include "base/cupti_api.h"
#include "base/log.h"
#include "base/subsystem_links.h"
#include "base/usdt.h"
#include "pc/pc_contexts.h"
#include "pc/pc_launch_state.h"
#include "pc/pc_metadata.h"
#include "pc/pc_publish.h"
#include "pc/pc_stats.h"

namespace parcagpu {

PcContextSwitch::PcContextSwitch(const CuptiApi &cupti, const Config &config,
                                 KernelActivityControl *activity, PcLaunchState &state,
                                 PcMetadata &meta, PcPublisher &publisher, PcContexts &contexts,
                                 PcStats &stats)
    : cupti_(cupti),
      config_(config),
      activity_(activity),
      state_(state),
      meta_(meta),
      publisher_(publisher),
      contexts_(contexts),
      stats_(stats) {}

bool PcContextSwitch::enable(PcContext &c, bool kernel_activity) {
  // Kernel activity first: CUPTI will not enable it while PC sampling is (P12).
  if (activity_ && kernel_activity) activity_->hold_on(true);
  const uint64_t t0 = monotonic_ns();
  const PcResult r = c.session.enable();
  if (!r.ok()) {
    fail(r);
    return false;
  }
  c.enabled = true;
  c.ever_enabled = true;
  state_.mark_enabled(c.ctx, true);
  stats_.enables++;
  state_.any_enabled.store(true, std::memory_order_release);
  if (!configure(c)) return false;  // fail() disabled it
  debug_log("PC sampling enabled on context %p (device %u) in %.1f ms", static_cast<void *>(c.ctx),
            c.device, (monotonic_ns() - t0) / 1e6);
  return true;
}

// One sampling factor for every GPU of the process. The production agent keeps one gpu_config
// per process, the last it got (interpreter/gpu/config.go): a second device's factor would scale
// the first device's samples too. So the first device configured fixes the factor (the one in
// force there: PARCAGPU_SAMPLING_FACTOR, or CUPTI's default, which differs between kinds of GPU)
// and every later device is configured with it; one that ends up with another is said once.
bool PcContextSwitch::configure(PcContext &c) {
  PcResult r = meta_.read_stall_reasons(c.session);
  uint32_t factor = 0;
  const uint32_t wanted = process_factor_ != 0 ? process_factor_ : config_.sampling_factor;
  if (r.ok())
    r = c.session.configure(meta_.stall().collected(), {wanted, config_.pc_hw_buffer_mb}, &factor);
  if (!r.ok()) {
    fail(r);
    return false;
  }
  c.device = c.session.device_id();
  if (process_factor_ == 0) process_factor_ = factor;
  static RepeatedError factor_differs("gpu_config", "devices sampling at another factor");
  if (factor != process_factor_)
    factor_differs.report(kErrDataLost,
                          "PC sampling on device %u samples every 2^%u cycles, the process's "
                          "first device every 2^%u: the agent keeps one gpu_config per process "
                          "and scales one device's PC samples wrong",
                          c.device, factor, process_factor_);
  stats_.sampling_factor = factor;
  meta_.on_configured(c.device, factor);
  return true;
}

bool PcContextSwitch::note_disabled(PcContext &c) {
  c.enabled = false;
  state_.mark_enabled(c.ctx, false);
  const bool any = contexts_.any_enabled();
  state_.any_enabled.store(any, std::memory_order_release);
  return any;
}

void PcContextSwitch::publish_disabled(PcContext &c, const PcResult &disabled) {
  if (!disabled.ok()) return fail(disabled);
  stats_.disables++;
  // Disable puts what was left into the configured buffer.
  publisher_.publish(c.session.disable_buffer(), stats_);
  c.session.disable_buffer().reset();
}

void PcContextSwitch::disable_quietly(PcContext &c) {
  const PcResult r = c.session.disable();
  if (!note_disabled(c) && activity_) activity_->hold_on(false);
  publish_disabled(c, r);
}

void PcContextSwitch::drain(PcContext &c) {
  const PcResult r = publisher_.drain(c.session, stats_);
  if (!r.ok()) fail(r);
}

void PcContextSwitch::fail(const PcResult &failed) {
  const CUptiResult r = failed.result;
  const char *call = failed.call;
  if (!state_.usable.exchange(false)) return;
  stats_.failed = true;
  report_error(r, "pc_sampling",
               "%s failed: %s; PC sampling is off for this process (kernel timing goes on)", call,
               cupti_result_string(cupti_, r));
  // Leave nothing started or enabled behind (errors ignored: already off).
  for (auto &c : contexts_) {
    if (!c->enabled) continue;
    if (state_.window_open.load(std::memory_order_relaxed) && contexts_.episode() == c.get())
      c->session.stop();
    if (c->session.disable().ok()) stats_.disables++;
    c->enabled = false;
    state_.mark_enabled(c->ctx, false);
    contexts_.unlock_gpu(*c);
  }
  state_.window_open.store(false, std::memory_order_release);
  state_.drain_pending.store(false, std::memory_order_release);
  contexts_.set_episode(nullptr);
  state_.any_enabled.store(false, std::memory_order_release);
  if (activity_) activity_->hold_on(false);
}

}  // namespace parcagpu
