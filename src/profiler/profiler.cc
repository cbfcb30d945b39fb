#include "profiler/profiler.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
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

bool Profiler::start() {
  std::string err;
  if (!load_cupti(config_.cupti_path, &cupti_, &err)) {
    report_error(kErrLibraryMissing, "cupti", "%s; parcagpu stays inert", err.c_str());
    return false;
  }
  uint32_t version = 0;
  cupti_.cuptiGetVersion(&version);
  debug_log("loaded %s, CUPTI API version %u", cupti_.path.c_str(), version);
  have_cuda_ = load_cuda(&cuda_, &err);
  if (!have_cuda_) debug_log("%s; gpu_config will not be fired", err.c_str());
  // The links this profiler stands for (subsystem_links.h).
  KernelActivityControl *const activity_link = this;
  KernelRecordObserver *const kernel_link = this;
  const LaunchCountSource *const launch_link = this;
  WatcherWake *const wake_link = this;
  pc_ = std::make_unique<PcSampler>(cupti_, have_cuda_ ? &cuda_ : nullptr, config_, activity_link,
                                    wake_link);
  pc_->init();

  tracker_ = std::make_unique<CorrelationTracker>(
      config_.max_outstanding, static_cast<uint64_t>(config_.max_age_ms) * 1000000ull);
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
  if (completion_) completion_->on_made_up_ends(activity_->stats().graph_ends_made_up);
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

namespace {

// One debug line of a part's totals, "what: name=value ...", values as integers unless a
// number of decimals is given (milliseconds).
struct Total {
  const char *name;
  double value;
  int decimals = 0;
};

void log_totals(const char *what, std::initializer_list<Total> totals, const char *tail = "") {
  std::string line = what;
  line += ":";
  char buf[96];
  for (const Total &t : totals) {
    snprintf(buf, sizeof buf, " %s=%.*f", t.name, t.decimals, t.value);
    line += buf;
  }
  line += tail;
  debug_log("%s", line.c_str());
}

double u(uint64_t v) { return static_cast<double>(v); }

// The totals of each part, one or two lines each (log_stats).
void log_launch_totals(const LaunchStats &l, const ActivityStats &a) {
  log_totals("launches", {{"announced eager", u(l.announced_eager.load())},
                          {"graph", u(l.announced_graph.load())},
                          {"rate-limited", u(l.rate_limited.load())},
                          {"picked while learning the launch rate", u(l.learning.load())},
                          {"captured", u(l.captured.load())},
                          {"consumer left during the call", u(l.left_unannounced.load())},
                          {"abandoned", u(l.abandoned.load())},
                          {"callback errors", u(l.callback_errors.load())}});
  log_totals("activity", {{"buffers", u(a.buffers_completed)},
                          {"refused", u(a.buffers_refused)},
                          {"kernel records", u(a.kernel_records)},
                          {"delivered", u(a.kernels_delivered)},
                          {"batches", u(a.batches_fired)},
                          {"dropped", u(a.records_dropped)},
                          {"kernels after the last consumer left", u(a.kernels_unheard)},
                          {"launches waiting when it left", u(a.launches_unheard)},
                          {"graph kernels with a made-up end", u(a.graph_ends_made_up)},
                          {"copies and fills", u(a.memory_records)},
                          {"copies and fills delivered", u(a.memory_delivered)},
                          {"copy and fill batches", u(a.memory_batches)},
                          {"copies and fills after the last consumer left", u(a.memory_unheard)},
                          {"flushes", u(a.flushes)},
                          {"enables", u(a.enables)},
                          {"disables", u(a.disables)}});
}

void log_pc_totals(const PcStats &p, const CubinStats &cs) {
  log_totals("pc sampling",
             {{"episodes", u(p.episodes)},
              {"ended before a graph's first launch", u(p.ended_for_graphs)},
              {"graphs first launched while enabled", u(p.graphs_uploaded_enabled)},
              {"ended before a graph's instantiation", u(p.ended_for_instantiations)},
              {"graphs instantiated while enabled", u(p.graphs_instantiated_enabled)},
              {"graphs registered", u(p.graphs_registered)},
              {"graphs not registered", u(p.graphs_not_registered)},
              {"learning resumed after one", u(p.learning_resumes)},
              {"learning resumed at a module load", u(p.module_resumes)},
              {"put off for another process", u(p.put_off_for_other_process)},
              {"contexts off without their GPU's lock", u(p.contexts_without_lock)},
              {"enables", u(p.enables)},
              {"disables", u(p.disables)},
              {"enabled ms", p.enabled_ns / 1e6, 1},
              {"disable ms", p.disable_ns / 1e6, 1},
              {"longest disable ms", p.max_disable_ns / 1e6, 1},
              {"windows", u(p.windows)},
              {"window launches", u(p.window_launches)},
              {"window ms", p.window_ns / 1e6, 1}});
  log_totals("pc sampling",
             {{"drains", u(p.drains)},
              {"batches", u(p.batches)},
              {"records", u(p.records)},
              {"samples", u(p.samples)},
              {"pairs", u(p.pairs)},
              {"uncorrelated", u(p.uncorrelated)},
              {"gpu-only (not announced)", u(p.gpu_only)},
              {"unpublished", u(p.unpublished)},
              {"unfired (queue full)", u(p.unfired)},
              {"non-user samples", u(p.nonuser_samples)},
              {"dropped samples", u(p.dropped_samples)},
              {"gate timeouts", u(p.gate_timeouts)},
              {"factor", u(p.sampling_factor)}},
             p.failed ? " (failed)" : "");
  log_totals("cubins", {{"loaded", u(cs.loaded)},
                        {"unloaded", u(cs.unloaded)},
                        {"live", u(cs.live)},
                        {"copied", u(cs.copied)},
                        {"bytes held", u(cs.copied_bytes)},
                        {"no crc", u(cs.no_crc)}});
}

void log_nvtx_totals(const NvtxStats &n) {
  log_totals("nvtx", {{"events", u(n.events)},
                      {"batches", u(n.batches)},
                      {"names", u(n.names)},
                      {"lost after the consumer left", u(n.unheard)},
                      {"lost for want of memory", u(n.no_batch)},
                      {"messages cut", u(n.truncated)},
                      {"messages not read", u(n.unreadable)}});
}

void log_graph_totals(const GraphStats &g, const TrackerStats &t) {
  log_totals("graphs", {{"execs", u(g.execs)},
                        {"clones", u(g.clones)},
                        {"clones not fired live", u(g.clones_not_fired)},
                        {"clones not stored (cap)", u(g.clones_not_stored)},
                        {"wanted nodes forgotten (cap)", u(g.wanted_forgotten_at_cap)},
                        {"execs forgotten (cap)", u(g.execs_forgotten_at_cap)},
                        {"host-only launches", u(g.hostonly_launches)},
                        {"conditional records", u(g.conditional_records)},
                        {"ambiguous owner", u(g.conditional_ambiguous)},
                        {"no owner", u(g.conditional_orphans)},
                        {"of unannounced launches", u(g.conditional_unannounced)},
                        {"conditional execs forgotten with launches (cap)",
                         u(g.conditional_owners_forgotten)}});
  log_totals("tracker", {{"inserted", u(t.inserted)},
                         {"completed", u(t.completed)},
                         {"matched", u(t.kernels_matched)},
                         {"unmatched", u(t.kernels_unmatched)},
                         {"expired", u(t.expired)},
                         {"never seen", u(t.expired_unseen)},
                         {"refused", u(t.refused)},
                         {"retired at the cap", u(t.retired_at_cap)},
                         {"removed", u(t.removed)},
                         {"dropped unheard", u(t.dropped_unheard)},
                         {"live", u(t.live)}});
}

}  // namespace

void Profiler::log_stats() const {
  if (!debug_enabled()) return;
  log_launch_totals(callbacks_->stats(), activity_->stats());
  log_pc_totals(pc_->stats(), pc_->cubins().stats());
  log_graph_totals(graphs_->stats(), tracker_->stats());
  log_nvtx_totals(callbacks_->nvtx().stats());
  if (completion_) {
    const GraphCompletion::Stats c = completion_->stats();
    log_totals("graph completion",
               {{"watched", u(c.watched)},
                {"finished", u(c.finished)},
                {"timed out", u(c.timed_out)},
                {"failed", u(c.failed)},
                {"grace ms", static_cast<double>(completion_->grace_ns()) / 1e6, 1}});
  }
}

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
    if (!profiler->start()) return false;
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
