#include "pc/pc_sampling.h"

#include "base/clock.h"
#include "base/log.h"
#include "base/own_cuda_calls.h"
#include "base/usdt.h"
#include "pc/pc_coverage.h"
#include "pc/pc_episodes.h"
#include "pc/pc_metadata.h"
#include "pc/pc_scheduler.h"
#include "pc/pc_step_due.h"
#include "trackers/cubin_registry.h"

namespace parcagpu {
namespace {

// CUPTI 12.4 (API version 22) added correlationId to CUpti_PCSamplingPCData; an older CUPTI
// would leave it 0 and no sample could be tied to its launch.
constexpr uint32_t kMinCuptiVersion = 22;
// How long a launch waits at most for Stop / Get Data / Disable to finish (PcLaunchGate).
constexpr uint64_t kGateWaitNs = 2'000'000'000;

// This thread's outermost launch is counted at the gate (PcSampler::gate_).
__attribute__((tls_model("initial-exec"))) thread_local bool t_counted = false;

// PC sampling runs while a consumer is attached to pc_sample_batch and the launch path is
// observed (cuda_correlation attached, as every consumer of PC samples does: samples are tied
// to launches by correlation ID).
bool wanted() {
  return usdt::pc_sample_batch_consumers() != 0 && usdt::correlation_consumers() != 0;
}

}  // namespace

PcSampler::PcSampler(const CuptiApi &cupti, const CudaApi *cuda, const Config &config,
                     KernelActivityControl *activity, WatcherWake *wake)
    : cupti_(cupti),
      config_(config),
      meta_(std::make_unique<PcMetadata>(cupti, cuda)),
      activity_(activity),
      wake_(wake),
      episodes_(
          std::make_unique<PcEpisodes>(cupti, cuda, config, activity, state_, gate_, *meta_)) {}

PcSampler::~PcSampler() = default;

void PcSampler::init() {
  if (!config_.pc_sampling) {
    debug_log("PC sampling off (PARCAGPU_PC_SAMPLING)");
    return;
  }
  // A missing entry point was reported once by load_cupti ("lacks ... (PC sampling)").
  const bool present = cupti_.available(cupti_.cuptiPCSamplingEnable) &&
                       cupti_.available(cupti_.cuptiPCSamplingDisable) &&
                       cupti_.available(cupti_.cuptiPCSamplingStart) &&
                       cupti_.available(cupti_.cuptiPCSamplingStop) &&
                       cupti_.available(cupti_.cuptiPCSamplingGetData) &&
                       cupti_.available(cupti_.cuptiPCSamplingSetConfigurationAttribute) &&
                       cupti_.available(cupti_.cuptiPCSamplingGetConfigurationAttribute) &&
                       cupti_.available(cupti_.cuptiPCSamplingGetNumStallReasons) &&
                       cupti_.available(cupti_.cuptiPCSamplingGetStallReasons);
  if (!present) {
    debug_log("PC sampling off: %s lacks PC Sampling API entry points", cupti_.path.c_str());
    return;
  }
  uint32_t version = 0;
  if (cupti_.cuptiGetVersion(&version) != CUPTI_SUCCESS || version < kMinCuptiVersion) {
    // Not an error of anyone's: CUDA 12.0-12.3 simply predate it (docs/how-it-works.md).
    debug_log(
        "PC sampling off: CUPTI API version %u is older than CUDA 12.4's (%u), whose PC "
        "records carry the correlation ID",
        version, kMinCuptiVersion);
    return;
  }
  scheduler_ = &episodes_->start(monotonic_ns());
  state_.usable = true;
  debug_log("PC sampling ready: target %g samples/s, sampling factor %s%u, hardware buffer %s%u MB",
            config_.pc_sampling_rate, config_.sampling_factor ? "" : "CUPTI's default, not ",
            config_.sampling_factor, config_.pc_hw_buffer_mb ? "" : "CUPTI's default, not ",
            config_.pc_hw_buffer_mb);
}

// ---- Metadata for consumers that attach (any thread) ----

bool PcSampler::has_fired_metadata() const { return meta_->has_fired(); }

void PcSampler::fire_metadata() { meta_->fire(); }

CubinRegistry &PcSampler::cubins() { return meta_->cubins(); }

void PcSampler::note_module_loaded() {
  state_.last_module_load_ns.store(monotonic_ns(), std::memory_order_relaxed);
  // Not for a module the library's own calls loaded (a graph registration's, under the episodes'
  // mutex): that episode is under way.
  if (t_in_own_cuda_calls || !state_.usable.load(std::memory_order_relaxed) || !wanted()) return;
  if (episodes_->resume_for_module() && wake_) wake_->wake();
}

void PcSampler::on_kernel_record(const char *name, uint64_t gpu_ns) {
  if (state_.usable.load(std::memory_order_relaxed)) episodes_->coverage().on_kernel(name, gpu_ns);
  // Only while enabled: between episodes kernel activity covers announced launches alone, and a
  // kernel first launched then cannot be helped anyway (P20).
  if (!name || !state_.any_enabled.load(std::memory_order_relaxed)) return;
  if (kernels_seen_.first_seen(name) && state_.usable.load(std::memory_order_relaxed))
    state_.last_first_use_ns.store(monotonic_ns(), std::memory_order_relaxed);
}

bool PcSampler::needs_launches(uint64_t now) const {
  if (!state_.usable.load(std::memory_order_relaxed)) return false;
  if (state_.any_enabled.load(std::memory_order_relaxed)) return true;
  return wanted() && scheduler_->episode_due(now);
}

uint64_t PcSampler::next_episode_ns() const {
  if (!state_.usable.load(std::memory_order_relaxed) || !wanted()) return 0;
  return scheduler_->next_episode_ns();
}

void PcSampler::on_launch_enter(CUcontext ctx, uint64_t now, bool uploads_graph,
                                const char *function) {
  if (!state_.usable.load(std::memory_order_relaxed)) return;
  const bool want = wanted();
  if (!want && !state_.any_enabled.load(std::memory_order_relaxed)) return;
  // The step due, by PcEpisodes. Not from inside a launch call already counted at the gate (a
  // nested driver callback): waiting for the launches in flight would wait for this one. The
  // next launch does the work.
  if (ctx && !t_counted && pc_step_due(state_, *scheduler_, ctx, want, monotonic_ns()))
    episodes_->take_step(ctx, want, /*may_enable=*/!uploads_graph || config_.pc_graphs, function);
  if (want) meta_->refresh(now);
  if (!state_.any_enabled.load(std::memory_order_relaxed) || t_counted) return;
  // Half the budget gone: the records so far are read now, not at the next periodic flush.
  if (state_.count_launch() && activity_) activity_->request_flush();
  // The gate: counted as inside a launch call, unless Stop / Get Data / Disable run right now.
  gate_.enter(kGateWaitNs);
  t_counted = true;
}

void PcSampler::on_launch_exit() {
  if (!t_counted) return;
  t_counted = false;
  gate_.leave();
}

void PcSampler::note_announced(uint32_t correlation_id) {
  if (!state_.any_enabled.load(std::memory_order_relaxed)) return;
  state_.note_announced(correlation_id);
}

void PcSampler::on_graph_first_launch() {
  if (!state_.any_enabled.load(std::memory_order_acquire)) return;
  episodes_->keep_graph_out(PcEpisodes::GraphStep::kFirstLaunch, t_counted);
}

void PcSampler::on_graph_instantiate(CUgraph graph, CUcontext ctx, bool runtime_api) {
  if (state_.any_enabled.load(std::memory_order_acquire))
    episodes_->keep_graph_out(PcEpisodes::GraphStep::kInstantiation, t_counted);
  // Not from inside a launch call (its gate would wait for itself), nor for nobody.
  if (t_counted || !state_.usable.load(std::memory_order_relaxed) || !wanted()) return;
  // A runtime instantiation calls the driver's inside it: the driver's callback for the graph the
  // runtime's just registered is that call, not another instantiation (and a graph made later
  // at a freed graph's address is one).
  static thread_local CUgraph t_runtime_registered = nullptr;
  if (!runtime_api && graph == t_runtime_registered) {
    t_runtime_registered = nullptr;
    return;
  }
  if (runtime_api) t_runtime_registered = graph;
  episodes_->register_graph(graph, ctx);
}

void PcSampler::on_context_created() {
  if (!state_.usable.load(std::memory_order_relaxed) || !wanted()) return;
  if (episodes_->learn_again() && wake_) wake_->wake();
}

void PcSampler::on_context_destroy(CUcontext ctx) { episodes_->on_context_destroy(ctx); }

void PcSampler::shutdown() { episodes_->shutdown(); }

PcStats PcSampler::stats() const { return episodes_->stats(); }

}  // namespace parcagpu
