// The episodes of PC sampling, under one mutex: the contexts, the GPU locks, the schedule, and
// the PC Sampling API calls of each step decide_pc_step (pc_step.h) decides. See pc_episodes.h.
#include "pc/pc_episodes.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "base/clock.h"
#include "base/config.h"
#include "base/cupti_api.h"
#include "base/log.h"
#include "base/own_cuda_calls.h"
#include "base/subsystem_links.h"
#include "base/usdt.h"
#include "pc/pc_launch_gate.h"
#include "pc/pc_launch_state.h"
#include "pc/pc_metadata.h"
#include "pc/pc_records.h"
#include "pc/pc_scheduler.h"
#include "pc/pc_session.h"
#include "pc/pc_step.h"

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
// Records per Get Data: one pc_sample_batch firing each.
constexpr size_t kBatch = PARCAGPU_PC_SAMPLE_BATCH_MAX;
// How long Stop / Get Data / Disable wait for other threads to leave their launch calls before
// putting the work off to a later launch.
constexpr uint64_t kExclusiveWaitNs = 200'000'000;
// How often a process asks again for a GPU another process samples (PcDeviceLocks).
constexpr uint64_t kOtherProcessRetryNs = 50'000'000;
// Graph registrations (register_graph): each enables and disables PC sampling and instantiates
// and uploads a graph (~1 ms on the H100, P32). A program captures its graphs at start (vLLM:
// one per batch size), so a burst is allowed; one that instantiates graphs all the time gets a
// couple a second, the rest counted as not registered.
constexpr double kGraphRegistrationsPerSecond = 2;
constexpr double kGraphRegistrationBurst = 256;

}  // namespace

struct PcEpisodes::Context {
  Context(const CuptiApi &cupti, CUcontext c) : ctx(c), session(cupti, c, kBatch) {}
  CUcontext ctx;
  uint32_t device = 0;
  bool enabled = false;
  bool ever_enabled = false;   // its kernels first launched since then give records (P19, P20)
  uint64_t last_window = 0;    // the number of the last window that ran on it (0: none yet)
  std::string gpu;             // its GPU's name for PcDeviceLocks ("" until first asked)
  bool gpu_locked = false;     // this process holds that GPU's lock
  uint64_t lock_retry_ns = 0;  // the GPU's lock was taken (or cannot be had): not asked before
  CUstream shadow_stream = nullptr;  // register_graph's uploads (non-blocking, made at first use)
  PcSession session;                 // the PC Sampling API calls on it
};

PcEpisodes::PcEpisodes(const CuptiApi &cupti, const CudaApi *cuda, const Config &config,
                       KernelActivityControl *activity, PcLaunchState &state, PcLaunchGate &gate,
                       PcMetadata &meta)
    : cupti_(cupti),
      cuda_(cuda),
      config_(config),
      activity_(activity),
      state_(state),
      gate_(gate),
      meta_(meta),
      publisher_(state),
      step_(std::make_unique<PcStepState>()),
      locks_(config.pc_lock_dir),
      registrations_(kGraphRegistrationsPerSecond,
                     static_cast<uint64_t>((kGraphRegistrationBurst - 1) * 1e9 /
                                           kGraphRegistrationsPerSecond)) {}

PcEpisodes::~PcEpisodes() = default;

const PcScheduler &PcEpisodes::start(uint64_t now) {
  PcRateController::Params windows;
  windows.target_rate = config_.pc_sampling_rate;
  PcScheduler::Params episodes;
  episodes.drain_delay_ns = kDrainDelayNs;
  episodes.first_enable_quiet_ns = uint64_t{config_.pc_start_quiet_ms} * 1'000'000;
  episodes.launch_budget =
      std::max<uint64_t>(1024, uint64_t{config_.max_buffers} * config_.buffer_kib * 1024 /
                                   kKernelRecordBytes / kRecordsPerLaunch / kEpisodeShareOfBuffers);
  state_.launch_budget = episodes.launch_budget;
  std::lock_guard<std::mutex> lock(mu_);
  scheduler_ =
      std::make_unique<PcScheduler>(episodes, windows, now, now ^ static_cast<uint64_t>(getpid()));
  return *scheduler_;
}

bool PcEpisodes::learn_again() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!state_.usable) return false;
  scheduler_->learn_again(monotonic_ns());
  return scheduler_->resume_due();
}

bool PcEpisodes::resume_for_module() {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || !state_.usable || !scheduler_) return false;
  if (!scheduler_->module_loaded(monotonic_ns())) return false;
  stats_.module_resumes++;
  return true;
}

bool PcEpisodes::exclusive_begin() {
  if (gate_.exclusive_begin(kExclusiveWaitNs)) return true;
  stats_.gate_timeouts++;
  return false;
}

void PcEpisodes::exclusive_end() { gate_.exclusive_end(); }

PcEpisodes::Context *PcEpisodes::find(CUcontext ctx) {
  for (auto &c : contexts_)
    if (c->ctx == ctx) return c.get();
  return nullptr;
}

PcEpisodes::Context &PcEpisodes::find_or_add(CUcontext ctx) {
  if (Context *c = find(ctx)) return *c;
  contexts_.push_back(std::make_unique<Context>(cupti_, ctx));
  return *contexts_.back();
}

PcStepEvent PcEpisodes::step_event(const Context *here, bool want, bool may_enable,
                                   uint64_t now) const {
  PcStepEvent e;
  e.now_ns = now;
  e.want = want;
  e.may_enable = may_enable;
  e.launches_observed = state_.launches_observed.load(std::memory_order_relaxed);
  e.any_enabled = state_.any_enabled.load(std::memory_order_relaxed);
  e.episode_under_way = episode_ctx_ != nullptr;
  if (!here) return e;
  e.here_is_episode = here == episode_ctx_;
  e.here_enabled = here->enabled;
  e.here_ever_enabled = here->ever_enabled;
  e.here_last_window = here->last_window;
  for (const auto &o : contexts_) {
    if (o.get() == here) continue;
    e.oldest_other_window = std::min(e.oldest_other_window, o->last_window);
    if (o->enabled)
      e.oldest_other_enabled_window = std::min(e.oldest_other_enabled_window, o->last_window);
  }
  e.episode_launches = state_.episode_launches.load(std::memory_order_relaxed);
  e.window_launches = state_.window_launches.load(std::memory_order_relaxed);
  e.last_first_use_ns = state_.last_first_use_ns.load(std::memory_order_relaxed);
  e.last_module_load_ns = state_.last_module_load_ns.load(std::memory_order_relaxed);
  return e;
}

void PcEpisodes::take_step(CUcontext ctx, bool want, bool may_enable) {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another thread is at it; this launch goes on
  if (!state_.usable.load(std::memory_order_relaxed)) return;
  const uint64_t now = monotonic_ns();
  Context *here = want ? &find_or_add(ctx) : nullptr;
  const PcAction a = decide_pc_step(*step_, *scheduler_, step_event(here, want, may_enable, now));
  if (a == PcAction::kNone) return;
  if (a == PcAction::kEndForNoConsumer || !here) return end_for_no_consumer();
  apply_step(a, *here, now);
}

void PcEpisodes::end_for_no_consumer() {
  // The last consumer left: the episode under way ends now, nothing is drained for nobody.
  if (!exclusive_begin()) return;
  end_all_episodes(/*wait_for_workers=*/false);
  exclusive_end();
  debug_log("PC sampling: no consumer left, the episode under way ended");
}

// Carries out what decide_pc_step decided, each PC Sampling API step with the gate held
// exclusively.
void PcEpisodes::apply_step(PcAction a, Context &here, uint64_t now) {
  switch (a) {
    case PcAction::kNone:
    case PcAction::kEndForNoConsumer:
      return;
    case PcAction::kJoin:
      // Enabled, not started: its kernels first launched from now on give records (P19, P20).
      if (!lock_gpu(here, now)) return;
      if (!exclusive_begin()) return unlock_gpu(here);
      if (!enable(here)) unlock_gpu(here);
      exclusive_end();
      return;
    case PcAction::kEnable:
      return begin_episode(here, now);
    case PcAction::kStart:
      episode_ctx_ = &here;  // the windows of an episode go to the contexts that launch
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

void PcEpisodes::begin_episode(Context &c, uint64_t now) {
  if (!lock_gpu(c, now)) return scheduler_->put_off(now, kOtherProcessRetryNs);
  if (!exclusive_begin()) return unlock_gpu(c);
  const bool ok = enable(c);
  exclusive_end();
  if (!ok) return unlock_gpu(c);
  episode_ctx_ = &c;
  state_.episode_launches.store(0, std::memory_order_relaxed);
  // The process's first episode: its kernels are being launched for the first time now, and
  // their activity records (which tell which are new) come only with the next flush.
  if (stats_.episodes == 0 && state_.usable.load(std::memory_order_relaxed))
    state_.last_first_use_ns.store(monotonic_ns(), std::memory_order_relaxed);
  episode_started_ns_ = monotonic_ns();
  scheduler_->on_enabled(episode_started_ns_);
  stats_.episodes++;
}

void PcEpisodes::drain_window() {
  if (!exclusive_begin()) return;
  const uint64_t before = stats_.pairs;
  drain(*episode_ctx_);
  exclusive_end();
  state_.drain_pending.store(false, std::memory_order_release);
  if (state_.usable)
    scheduler_->on_drained(stats_.pairs - before, state_.window_limit.load(), monotonic_ns());
}

void PcEpisodes::start_window(uint64_t now) {
  const PcResult r = episode_ctx_->session.start();
  if (!r.ok()) return fail(r);
  scheduler_->on_started(now);
  window_started_ns_ = now;
  episode_ctx_->last_window = stats_.windows + 1;  // stats_.windows counts this one below
  // Launches announced before this window are not what it samples (their kernels may be: left
  // out, see note_announced).
  state_.forget_announced();
  state_.window_limit.store(scheduler_->window_limit(), std::memory_order_relaxed);
  state_.window_launches.store(0, std::memory_order_relaxed);
  state_.window_deadline_ns.store(scheduler_->window_deadline_ns(), std::memory_order_relaxed);
  state_.window_open.store(true, std::memory_order_seq_cst);
  stats_.windows++;
}

void PcEpisodes::close_window(uint64_t now) {
  const PcResult r = episode_ctx_->session.stop();
  state_.window_open.store(false, std::memory_order_release);
  if (!r.ok()) return fail(r);
  const uint32_t launches = state_.window_launches.load(std::memory_order_relaxed);
  state_.window_limit.store(launches,
                            std::memory_order_relaxed);  // what the drain's samples came from
  stats_.window_launches += launches;
  stats_.window_ns += now > window_started_ns_ ? now - window_started_ns_ : 0;
  scheduler_->on_stopped(now, launches);
  state_.drain_due_ns.store(now + kDrainDelayNs, std::memory_order_relaxed);
  state_.drain_pending.store(true, std::memory_order_release);
}

std::string PcEpisodes::gpu_name(CUcontext ctx) const {
  // The PCI address: the same GPU has it in every process, whatever CUDA_VISIBLE_DEVICES says.
  uint32_t ordinal = 0;
  int domain = 0, bus = 0, slot = 0;
  CUdevice dev = 0;
  if (!cuda_ || cupti_.cuptiGetDeviceId(ctx, &ordinal) != CUPTI_SUCCESS ||
      cuda_->cuDeviceGet(&dev, static_cast<int>(ordinal)) != CUDA_SUCCESS ||
      cuda_->cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) !=
          CUDA_SUCCESS ||
      cuda_->cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) != CUDA_SUCCESS ||
      cuda_->cuDeviceGetAttribute(&slot, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev) != CUDA_SUCCESS)
    return "any";
  char name[32];
  std::snprintf(name, sizeof name, "%04x:%02x:%02x", domain, bus, slot);
  return name;
}

bool PcEpisodes::lock_gpu(Context &c, uint64_t now) {
  if (c.gpu_locked) return true;
  if (now < c.lock_retry_ns) return false;
  if (c.gpu.empty()) c.gpu = gpu_name(c.ctx);
  switch (locks_.try_acquire(c.gpu)) {
    case PcDeviceLocks::Result::kAcquired:
      c.gpu_locked = true;
      return true;
    case PcDeviceLocks::Result::kBusy:
      stats_.put_off_for_other_process++;
      c.lock_retry_ns = now + kOtherProcessRetryNs;
      if (!said_other_process_) {
        said_other_process_ = true;
        debug_log(
            "PC sampling put off: another process samples GPU %s (%s); tried again every "
            "%llu ms",
            c.gpu.c_str(), locks_.path(c.gpu).c_str(),
            static_cast<unsigned long long>(kOtherProcessRetryNs / 1000000));
      }
      return false;
    case PcDeviceLocks::Result::kUnavailable:
      keep_off_without_lock(c);
      return false;
  }
  return false;
}

// Without its lock a GPU is not sampled: another process sampling it at the same time would
// crash one of them (P27). A setting to fix, so said once without PARCAGPU_DEBUG; counted.
void PcEpisodes::keep_off_without_lock(Context &c) {
  c.lock_retry_ns = ~uint64_t{0};  // never asked again
  stats_.contexts_without_lock++;
  if (said_no_lock_) return;
  said_no_lock_ = true;
  report_error(kErrConfig, "pc_sampling",
               "the GPU lock %s cannot be had (%s: %s; PARCAGPU_PC_LOCK_DIR=%s): PC sampling stays "
               "off for GPU %s, since two processes sampling one GPU crash one of them (kernel "
               "timing goes on)",
               locks_.path(c.gpu).c_str(), locks_.failed_call(),
               std::strerror(locks_.failed_errno()), config_.pc_lock_dir.c_str(), c.gpu.c_str());
}

void PcEpisodes::unlock_gpu(Context &c) {
  if (!c.gpu_locked) return;
  locks_.release(c.gpu);
  c.gpu_locked = false;
}

bool PcEpisodes::enable(Context &c, bool kernel_activity) {
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
bool PcEpisodes::configure(Context &c) {
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

void PcEpisodes::drain(Context &c) {
  const PcResult r = publisher_.drain(c.session, stats_);
  if (!r.ok()) fail(r);
}

void PcEpisodes::end_all_episodes(bool wait_for_workers, bool for_graph) {
  // The sampled context first (its window, its drain), then the ones that only joined.
  if (episode_ctx_) end_episode(*episode_ctx_, wait_for_workers, for_graph);
  for (auto &c : contexts_)
    if (c->enabled && state_.usable) end_episode(*c, wait_for_workers, for_graph);
}

void PcEpisodes::end_episode(Context &c, bool wait_for_workers, bool for_graph) {
  if (state_.window_open.load(std::memory_order_relaxed) && episode_ctx_ == &c) {
    close_window(monotonic_ns());
    if (!state_.usable) return;
  }
  if (state_.drain_pending.load(std::memory_order_relaxed) && episode_ctx_ == &c) {
    if (wait_for_workers) {
      // Give CUPTI's workers the time they are given on the launch path.
      const uint64_t due = state_.drain_due_ns.load(std::memory_order_relaxed);
      const uint64_t now = monotonic_ns();
      if (due > now) {
        const uint64_t wait = std::min(due - now, kDrainDelayNs);
        timespec ts{0, static_cast<long>(wait)};
        nanosleep(&ts, nullptr);
      }
    }
    state_.drain_pending.store(false, std::memory_order_release);
    drain(c);
    if (!state_.usable) return;
  }
  if (!c.enabled) return;
  const uint64_t disable_at = monotonic_ns();
  const PcResult r = c.session.disable();
  const uint64_t disabled_at = monotonic_ns();
  stats_.disable_ns += disabled_at - disable_at;
  stats_.max_disable_ns = std::max(stats_.max_disable_ns, disabled_at - disable_at);
  unlock_gpu(c);
  if (episode_ctx_ == &c) episode_ctx_ = nullptr;
  const bool any = note_disabled(c);
  if (!any && episode_started_ns_ && disabled_at > episode_started_ns_)
    stats_.enabled_ns += disabled_at - episode_started_ns_;
  if (!any && activity_) activity_->hold_on(false);
  if (activity_) activity_->request_flush();  // the episode's records, before they pile up
  scheduler_->on_disabled(monotonic_ns(), for_graph);
  debug_log("PC sampling disabled: episode %llu over after %.1f ms (Disable %.1f ms)%s",
            static_cast<unsigned long long>(stats_.episodes),
            (disabled_at - std::min(disabled_at, episode_started_ns_)) / 1e6,
            (disabled_at - disable_at) / 1e6,
            scheduler_->episodes_cut_by_budget() > stats_.episodes_cut
                ? " (its launch budget spent)"
                : "");
  stats_.episodes_cut = scheduler_->episodes_cut_by_budget();
  publish_disabled(c, r);
}

bool PcEpisodes::note_disabled(Context &c) {
  c.enabled = false;
  state_.mark_enabled(c.ctx, false);
  bool any = false;
  for (auto &o : contexts_) any |= o->enabled;
  state_.any_enabled.store(any, std::memory_order_release);
  return any;
}

void PcEpisodes::publish_disabled(Context &c, const PcResult &disabled) {
  if (!disabled.ok()) return fail(disabled);
  stats_.disables++;
  // Disable puts what was left into the configured buffer.
  publisher_.publish(c.session.disable_buffer(), stats_);
  c.session.disable_buffer().reset();
}

void PcEpisodes::fail(const PcResult &failed) {
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
    if (state_.window_open.load(std::memory_order_relaxed) && episode_ctx_ == c.get())
      c->session.stop();
    if (c->session.disable().ok()) stats_.disables++;
    c->enabled = false;
    state_.mark_enabled(c->ctx, false);
    unlock_gpu(*c);
  }
  state_.window_open.store(false, std::memory_order_release);
  state_.drain_pending.store(false, std::memory_order_release);
  episode_ctx_ = nullptr;
  state_.any_enabled.store(false, std::memory_order_release);
  if (activity_) activity_->hold_on(false);
}

void PcEpisodes::keep_graph_out(GraphStep graph_step, bool inside_launch) {
  const bool first_launch = graph_step == GraphStep::kFirstLaunch;
  const char *step = first_launch ? "first launch" : "instantiation";
  uint64_t &ended = first_launch ? stats_.ended_for_graphs : stats_.ended_for_instantiations;
  uint64_t &went_in =
      first_launch ? stats_.graphs_uploaded_enabled : stats_.graphs_instantiated_enabled;
  std::lock_guard<std::mutex> lock(mu_);
  if (!state_.usable || !state_.any_enabled.load(std::memory_order_relaxed)) return;
  // Inside a launch call already (a graph launched from a nested call), or other threads'
  // launches did not leave in time: the graph goes in with PC sampling on (counted; a graph
  // launched then is sampled from now on).
  if (config_.pc_graphs || inside_launch || !exclusive_begin()) {
    ++went_in;
    return;
  }
  end_all_episodes(/*wait_for_workers=*/false, /*for_graph=*/true);
  exclusive_end();
  if (!state_.usable) return;
  ++ended;
  if (scheduler_->resume_due()) stats_.learning_resumes++;
  debug_log(
      "PC sampling: the episode under way ended before a graph's %s "
      "(PARCAGPU_PC_GRAPHS=0: graphs are kept out of PC sampling)",
      step);
}

void PcEpisodes::register_graph(CUgraph graph, CUcontext ctx) {
  if (!graph || !ctx || !cuda_ || !cuda_->can_register_graphs() || !config_.pc_graph_shadows ||
      config_.pc_graphs)
    return;
  std::lock_guard<std::mutex> lock(mu_);
  // An episode still under way (keep_graph_out could not end it): the graph goes in with it.
  if (!state_.usable || state_.any_enabled.load(std::memory_order_relaxed)) return;
  const uint64_t now = monotonic_ns();
  Context &c = find_or_add(ctx);
  if (!registrations_.ready(now) || !lock_gpu(c, now)) {
    stats_.graphs_not_registered++;
    return;
  }
  if (!exclusive_begin()) {
    stats_.graphs_not_registered++;
    return unlock_gpu(c);
  }
  registrations_.try_take(now);  // ready above, and taken only here (under mu_)
  // Kernel activity off meanwhile: with it on, the upload registers nothing (P33).
  const bool activity_off = !activity_ || activity_->hold_off(true);
  const bool registered =
      activity_off && enable(c, /*kernel_activity=*/false) && upload_shadow(c, graph);
  if (c.enabled) {
    disable_quietly(c);
    if (scheduler_) scheduler_->start_up_over(monotonic_ns());
  }
  if (activity_) activity_->hold_off(false);
  unlock_gpu(c);
  exclusive_end();
  ++(registered ? stats_.graphs_registered : stats_.graphs_not_registered);
  debug_log("PC sampling: graph %p %s in %.2f ms", static_cast<void *>(graph),
            registered ? "registered by a shadow exec" : "not registered",
            (monotonic_ns() - now) / 1e6);
}

bool PcEpisodes::upload_shadow(Context &c, CUgraph graph) {
  OwnCudaCalls own;
  // Relaxed for these calls: another thread's stream capture in global mode (PyTorch's default)
  // would otherwise be invalidated by a synchronize here; set back before returning.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (cuda_->cuThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS) return false;
  const bool uploaded = upload_shadow_relaxed(c, graph);
  cuda_->cuThreadExchangeStreamCaptureMode(&mode);
  return uploaded;
}

bool PcEpisodes::upload_shadow_relaxed(Context &c, CUgraph graph) {
  if (!c.shadow_stream &&
      cuda_->cuStreamCreate(&c.shadow_stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    c.shadow_stream = nullptr;
    return false;
  }
  CUgraphExec shadow = nullptr;
  if (cuda_->cuGraphInstantiateWithFlags(&shadow, graph, 0) != CUDA_SUCCESS) return false;
  const bool uploaded = cuda_->cuGraphUpload(shadow, c.shadow_stream) == CUDA_SUCCESS &&
                        cuda_->cuStreamSynchronize(c.shadow_stream) == CUDA_SUCCESS;
  cuda_->cuGraphExecDestroy(shadow);
  return uploaded;
}

void PcEpisodes::disable_quietly(Context &c) {
  const PcResult r = c.session.disable();
  if (!note_disabled(c) && activity_) activity_->hold_on(false);
  publish_disabled(c, r);
}

void PcEpisodes::on_context_destroy(CUcontext ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  Context *c = find(ctx);
  if (!c) return;
  if (c->enabled && state_.usable) {
    const bool exclusive = exclusive_begin();
    end_episode(*c, /*wait_for_workers=*/true);
    if (exclusive) exclusive_end();
  }
  if (episode_ctx_ == c) {
    episode_ctx_ = nullptr;
    if (scheduler_ && scheduler_->in_episode()) scheduler_->on_context_lost(monotonic_ns());
  }
  contexts_.erase(std::remove_if(contexts_.begin(), contexts_.end(),
                                 [c](const std::unique_ptr<Context> &p) { return p.get() == c; }),
                  contexts_.end());
}

void PcEpisodes::shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.usable && state_.any_enabled.load(std::memory_order_relaxed)) {
    const bool exclusive = exclusive_begin();
    for (auto &c : contexts_)
      if (c->enabled && state_.usable) end_episode(*c, /*wait_for_workers=*/true);
    if (exclusive) exclusive_end();
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
