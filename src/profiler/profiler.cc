#include "profiler/profiler.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "activity/activity.h"
#include "activity/activity_switch.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/process_guard.h"
#include "base/usdt.h"
#include "base/version.h"
#include "launch/launch_callbacks.h"
#include "launch/launch_switch.h"
#include "nvtx/nvtx_collector.h"
#include "nvtx/nvtx_injection.h"
#include "pc/pc_sampling.h"
#include "profiler/profiler_totals.h"
#include "trackers/correlation_tracker.h"
#include "trackers/cubin_registry.h"
#include "trackers/graph_completion.h"
#include "trackers/graph_tracker.h"

namespace parcagpu {
namespace {

// For the exit handler alone (atexit passes no argument). Leaked on purpose: CUPTI may call in
// during static destruction.
Profiler *g_profiler = nullptr;

// Graph clone mappings fired per watcher cycle while re-firing for a late consumer: each firing
// traps into the kernel (a few us with a consumer attached), so a chunk is a few ms of the
// watcher's time, and the graph tracker's lock is held only to copy one chunk.
constexpr size_t kRefireChunk = 1024;

void shutdown_at_exit() {
  try {
    if (g_profiler) g_profiler->shutdown();
  } catch (...) {
    // Nothing may escape an exit handler.
  }
}

}  // namespace

Profiler::Profiler(const Config &config) : config_(config) {}

Profiler::~Profiler() = default;

bool Profiler::start(const CuptiApi &cupti, const CudaApi *cuda) {
  cupti_ = cupti;
  have_cuda_ = cuda != nullptr;
  if (cuda) cuda_ = *cuda;
  uint32_t version = 0;
  cupti_.cuptiGetVersion(&version);
  debug_log("loaded %s, CUPTI API version %u", cupti_.path.c_str(), version);
  // The links this profiler stands for (subsystem_links.h).
  KernelActivityControl *const activity_link = this;
  KernelRecordObserver *const kernel_link = this;
  const LaunchCountSource *const launch_link = this;
  WatcherWake *const wake_link = this;
  pc_ = std::make_unique<PcSampler>(cupti_, have_cuda_ ? &cuda_ : nullptr, config_, activity_link,
                                    wake_link);
  pc_->init();

  tracker_ = std::make_unique<CorrelationTracker>(
      config_.max_outstanding, static_cast<uint64_t>(config_.max_age_ms) * 1000000ull,
      config_.max_blocked_copies);
  graphs_ = std::make_unique<GraphTracker>(cupti_, have_cuda_ ? &cuda_ : nullptr);
  activity_ = std::make_unique<ActivityCollector>(cupti_, config_, *tracker_, *graphs_, launch_link,
                                                  kernel_link, wake_link);
  if (have_cuda_)
    completion_ = std::make_unique<GraphCompletion>(
        &cuda_, [a = activity_.get()] { a->launch_end(); }, &monotonic_ns);
  callbacks_ = std::make_unique<LaunchCallbacks>(cupti_, config_, *tracker_, *graphs_, *activity_,
                                                 pc_.get(), completion_.get());
  switch_ = std::make_unique<LaunchSwitch>(cupti_, config_, *callbacks_, pc_.get());
  // The subscription first: CUPTI takes one subscriber, so a refusal (another CUPTI client in
  // the process) leaves the buffer callbacks to whoever registered them.
  if (!switch_->subscribe()) return false;
  activity_usable_ = activity_->init();
  g_profiler = this;
  watcher_ = std::make_unique<ConsumerWatcher>(config_.watch_interval_ms);
  watcher_->add(this);
  // The activity housekeeping (flushes, sticky, stuck disables, tracker ages) runs on the
  // watcher thread too: one housekeeping thread. GraphCompletion keeps its own, which polls GPU
  // events every 200 us, far finer than a watcher tick.
  watcher_->add(activity_.get());
  watcher_ready_.store(watcher_.get(), std::memory_order_release);
  // A consumer attached system-wide before the process started already raised the semaphores:
  // it is served before this returns, so the first launch is already sampled.
  switch_->set_starting(true);
  watcher_->poll_now();
  switch_->set_starting(false);
  watcher_->start_thread();
  return true;
}

LaunchCounts Profiler::launch_counts() const {
  // The launch callbacks' statistics exist once the callbacks do; until then nothing was
  // announced.
  LaunchCounts c;
  if (!callbacks_) return c;
  const LaunchStats &l = callbacks_->stats();
  c.announced = l.announced_eager.load(std::memory_order_relaxed) +
                l.announced_graph.load(std::memory_order_relaxed);
  c.unannounced = l.rate_limited.load(std::memory_order_relaxed);
  return c;
}

bool Profiler::hold_off(bool on) { return !activity_ || activity_->hold_off(on); }

void Profiler::hold_on(bool on) {
  if (activity_) activity_->hold_on(on);
}

void Profiler::request_flush() {
  if (activity_) activity_->request_flush();
}

void Profiler::on_kernel_record(const char *function_name, uint64_t gpu_ns) {
  if (pc_) pc_->on_kernel_record(function_name, gpu_ns);
}

void Profiler::wake() {
  if (ConsumerWatcher *w = watcher_ready_.load(std::memory_order_acquire)) w->wake();
}

void Profiler::on_consumers(const Consumers &now, const Consumers &before) {
  if (shut_down_.load(std::memory_order_relaxed) || process_guard::forked_child()) return;
  const bool kernels = activity_usable_ && now.wants_kernels();
  if (activity_usable_) activity_->want_kinds(wanted_kinds(now));
  if (kernels) {
    activity_->arm(true);
    if (completion_) completion_->start_thread();
  }
  switch_->on_consumers(now, before);
  if (!kernels) activity_->arm(false);
  // Metadata probes fire again whenever another consumer attaches: it missed the first firing.
  // Not at once: the new consumer's programs may not be in place yet (kAttachSettleNs). PC
  // sampling's metadata only if some was fired already (at start nothing was, and what comes
  // later is fired live); the stored graph_node_clone mappings whatever they are.
  const bool clones_rose = now.graph_node_clone > before.graph_node_clone;
  const bool pc_rose =
      (now.stall_reason_map > before.stall_reason_map || now.cubin_loaded > before.cubin_loaded ||
       now.gpu_config > before.gpu_config) &&
      pc_->has_fired_metadata();
  if (clones_rose || pc_rose) {
    refire_due_ns_ = monotonic_ns() + kAttachSettleNs;
    refire_clones_ |= clones_rose;
    refire_pc_metadata_ |= pc_rose;
  }
}

uint64_t Profiler::on_tick(uint64_t now_ns) {
  uint64_t next = switch_->on_tick(now_ns);
  if (refire_due_ns_ != 0 && now_ns >= refire_due_ns_) {
    refire_due_ns_ = 0;
    if (std::exchange(refire_clones_, false)) graphs_->clones().begin_refire();
    if (std::exchange(refire_pc_metadata_, false)) pc_->fire_metadata();
  }
  if (refire_due_ns_ != 0) next = std::min(next, refire_due_ns_);
  // Graph kernel records came with a made-up end (activity_off_times.h): CUPTI finishes them
  // later than the grace on this machine, so the grace grows (graph_completion.h).
  if (completion_) completion_->on_made_up_ends(activity_->stats().graph_kernels.made_up_ends);
  // More mappings to re-fire: come back at once (window pacing is served in between).
  if (graphs_->clones().refire_some(kRefireChunk) > 0) return now_ns;
  return next;
}

void Profiler::shutdown() {
  if (shut_down_.exchange(true)) return;
  // Nothing is enabled or disabled behind our back from here on, and no housekeeping flush runs
  // while the final one below does.
  watcher_->stop();
  // Everything collected so far is delivered before the process goes.
  pc_->shutdown();
  if (completion_) completion_->shutdown();  // its launches end before activity goes off
  activity_->shutdown();
  // This thread's NVTX events (other threads fire theirs as they exit, or before their launches).
  callbacks_->nvtx().fire_this_thread();
  switch_->unsubscribe();
  tracker_->expire(coarse_ns());
  log_stats();
}

void Profiler::log_stats() const {
  if (!debug_enabled()) return;
  log_launch_totals(callbacks_->stats(), activity_->stats());
  log_pc_totals(pc_->stats(), pc_->cubins().stats());
  log_graph_totals(graphs_->stats(), tracker_->stats());
  log_blocked_copies_totals(tracker_->blocked_copies().stats());
  log_nvtx_totals(callbacks_->nvtx().stats());
  if (completion_) log_completion_totals(completion_->stats(), completion_->grace_ns());
}

namespace {

// libcupti (without it parcagpu stays inert, said) and libcuda (optional), and `profiler` started
// on them.
bool load_and_start(Profiler &profiler, const std::string &cupti_path) {
  std::string err;
  CuptiApi cupti;
  if (!load_cupti(cupti_path, &cupti, &err)) {
    report_error(kErrLibraryMissing, "cupti", "%s; parcagpu stays inert", err.c_str());
    return false;
  }
  CudaApi cuda;
  const bool have_cuda = load_cuda(&cuda, &err);
  if (!have_cuda) debug_log("%s; gpu_config will not be fired", err.c_str());
  return profiler.start(cupti, have_cuda ? &cuda : nullptr);
}

}  // namespace

bool start_profiler(const char *how) noexcept {
  static std::atomic<bool> started{false};
  if (started.exchange(true)) {
    debug_log("already started; %s ignored", how);
    return true;
  }
  try {
    std::vector<ConfigWarning> warnings;
    static Config config;  // outlives everything that references it
    config = parse_config([](const char *n) { return static_cast<const char *>(std::getenv(n)); },
                          parcagpu_env_names(), &warnings);
    set_debug(config.debug);
    // Another copy of the library may already profile this process: then nothing, CUPTI
    // included, is touched (process_guard.h).
    std::string other;
    if (process_guard::claim_process(&other) == process_guard::Claim::Another) {
      report_error(kErrAnotherInstance, "init",
                   "another copy of parcagpu (%s) already profiles this process; this copy "
                   "stays inert (%s)",
                   other.c_str(), how);
      return false;
    }
    for (const auto &w : warnings)
      report_error(kErrConfig, "config", "%s=\"%s\": %s; using the default", w.variable.c_str(),
                   w.value.c_str(), w.reason.c_str());
    debug_log("parcagpu %s starting (%s): rate limits eager=%g/s graph=%g/s per process", version(),
              how, config.eager_rate_limit, config.graph_rate_limit);
    // Never freed, even when start fails: CUPTI may still hold pointers into it. Kept reachable.
    // (volatile: a store nothing reads would be optimized away, and LeakSanitizer would see a
    // leak).
    [[maybe_unused]] static Profiler *volatile kept = nullptr;
    auto *profiler = new Profiler(config);
    kept = profiler;
    if (!load_and_start(*profiler, config.cupti_path)) return false;
    process_guard::install(&shutdown_at_exit);  // exit and quick_exit, not in forked children
    return true;
  } catch (const std::exception &e) {
    report_error(kErrInternal, "init", "start failed: %s; parcagpu stays inert", e.what());
  } catch (...) {
    report_error(kErrInternal, "init", "start failed; parcagpu stays inert");
  }
  return false;
}

namespace {

// True when this library is named in LD_PRELOAD (then nobody calls InitializeInjection).
bool loaded_by_preload() {
  const char *preload = std::getenv("LD_PRELOAD");
  if (!preload || !*preload) return false;
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void *>(&loaded_by_preload), &info) || !info.dli_fname) return false;
  const char *self = std::strrchr(info.dli_fname, '/');
  self = self ? self + 1 : info.dli_fname;
  std::string list(preload);
  size_t pos = 0;
  while (pos < list.size()) {
    size_t end = list.find_first_of(": ", pos);
    if (end == std::string::npos) end = list.size();
    std::string item = list.substr(pos, end - pos);
    const size_t slash = item.rfind('/');
    if (!item.empty() && item.substr(slash == std::string::npos ? 0 : slash + 1) == self)
      return true;
    pos = end + 1;
  }
  return false;
}

__attribute__((constructor)) void on_library_load() {
  try {
    if (loaded_by_preload()) start_profiler("LD_PRELOAD");
  } catch (...) {
  }
}

}  // namespace
}  // namespace parcagpu

// The entry point the CUDA driver calls for CUDA_INJECTION64_PATH.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  parcagpu::start_profiler("CUDA_INJECTION64_PATH");
  return 1;  // the application runs on whatever happened
}

// NVTX's injection entry point (NVTX_INJECTION64_PATH naming this library): forwarded to
// libcupti's, whose NVTX callbacks the profiler takes (nvtx/nvtx_injection.h). Nonzero: success.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    parcagpu::NvtxGetExportTable get_export_table) {
  return parcagpu::NvtxInjection::forward(get_export_table);
}
