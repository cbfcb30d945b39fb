// CUPTI's PC Sampling API: where inside a kernel the GPU time goes, attributed to the launch
// that ran it. PcSampler is the launch path's side (lock-free checks from PcLaunchState, the
// launch gate, first uses, the graph and context hooks; whether a launch takes a step:
// pc_step_due.h); PcEpisodes (pc_episodes.h) carries the episodes out under its mutex, each
// step decided by decide_pc_step (pc_step.h, pure).
//
// Runs only while a consumer is attached to pc_sample_batch, and then only in short episodes
// (PcScheduler, src/pc/pc_scheduler.h): at the first launch that finds an episode due, PC sampling
// is enabled and configured on that launch's context (kernel-serialized mode, start/stop
// control, the stall reasons of StallReasonTable, PARCAGPU_SAMPLING_FACTOR,
// PARCAGPU_PC_HW_BUFFER_MB, a short worker-thread sleep span), one window is sampled, its samples
// are drained, and PC sampling is disabled again. Between episodes nothing of it is enabled, so
// the application pays neither PC sampling's configuration nor kernel activity on every launch
// (which PC sampling forces, P12). The first launch after the last consumer leaves ends an
// episode under way. With no consumer nothing of it runs (the launch callbacks are not even
// enabled).
//
// Windows. While started, CUPTI serializes kernels and every launch waits about 1 ms for CUPTI
// (H100 measurements in docs/pc-sampling.md), so sampling happens in short windows of whole
// launches: Start at the entry of a launch, Stop at the entry of the launch after the last one
// in the window, PcRateController deciding when and how long. Samples are drained (Get Data) a
// little after Stop, published in pc_sample_batch firings of at most
// PARCAGPU_PC_SAMPLE_BATCH_MAX records, and fed back to the controller.
//
// Threads. Every PC Sampling API call is made on an application thread inside a launch
// callback (or a context-destroy callback, or at exit), never on a thread of ours: on the H100
// a cuptiPCSamplingStop from another thread while the application was launching hung both
// threads. For the same reason Stop, Get Data and Disable wait until no other thread is inside
// a launch call, and launches wait while they run (microseconds): PcLaunchGate, pc_launch_gate.h.
//
// Metadata (stall reasons, gpu_config per device, cubins): PcMetadata, pc_metadata.h.
//
// Any error from the PC Sampling API (OUT_OF_MEMORY, NOT_SUPPORTED on this device, ...) turns
// PC sampling off for the life of the process with one error; kernel timing goes on.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/config.h"
#include "base/cupti_api.h"
#include "base/subsystem_links.h"
#include "pc/pc_forward.h"
#include "pc/pc_kernels_seen.h"
#include "pc/pc_launch_gate.h"
#include "pc/pc_launch_state.h"
#include "pc/pc_stats.h"

namespace parcagpu {

class PcSampler : public KernelRecordObserver {
 public:
  // `activity`: held on before PC sampling is first enabled and let go once it is disabled
  // everywhere (kernel activity must be on before, P12), and asked to read its buffers as an
  // episode ends. `wake`: a watcher tick now (an episode fell due off schedule, and the launch
  // callbacks must turn on for it). Either may be null (nothing held, no early flush or tick).
  PcSampler(const CuptiApi &cupti, const CudaApi *cuda, const Config &config,
            KernelActivityControl *activity, WatcherWake *wake);
  ~PcSampler();

  // Whether PC sampling can run here (config, CUPTI entry points and version); says why not,
  // once. Cubins are tracked either way.
  void init();

  // No PC Sampling API call. Whether any metadata was fired yet (a consumer attaching now
  // missed it), and every piece of metadata fired again to the consumers it has now: the
  // profiler calls it kAttachSettleNs after a metadata semaphore rose.
  bool has_fired_metadata() const;
  void fire_metadata();
  // Launch callbacks must reach on_launch_enter now: an episode is under way or due (and a
  // consumer wants samples), or PC sampling is still enabled somewhere (only a launch callback
  // can turn it off, also after every consumer has gone). Lock-free.
  bool needs_launches(uint64_t now_ns) const;
  // Whether every launch reaches on_launch_enter now (the launch callbacks of every role are
  // on): an episode begins only then, as everything a started window runs is sampled. Watcher.
  void set_launches_observed(bool all) {
    state_.launches_observed.store(all, std::memory_order_relaxed);
  }
  // When the next episode is due (monotonic ns), for the watcher's wake-up; 0 if none is.
  uint64_t next_episode_ns() const;

  // The outermost launch API call of this thread enters / leaves (launch callbacks, context
  // current). Does the PC Sampling API work that is due, then counts the launch in flight.
  // Also called after the last consumer left, while needs_launch_path() keeps the launch
  // callbacks on: then it tears PC sampling down. A nested call while counted is not counted
  // again.
  // uploads_graph: the launch is a graph's first (on_graph_first_launch): no episode begins at
  // it, so the graph is uploaded with PC sampling off.
  // function: the kernel's name (the callback's symbolName), nullptr for a graph launch; read
  // only while a window is due (PcCoverage).
  void on_launch_enter(CUcontext ctx, uint64_t now_ns, bool uploads_graph = false,
                       const char *function = nullptr);
  void on_launch_exit();

  // A module was loaded (its resource callback, any thread): the process's first episode waits
  // until modules stop loading (PcScheduler::Params::first_enable_quiet_ns, P34); after it,
  // kernels are being first used and learning resumes (PcScheduler::module_loaded).
  void note_module_loaded();
  // Every kernel activity record's function name and GPU time (the activity collector, on
  // CUPTI's buffer thread): a name not seen before while PC sampling is enabled is a first use
  // (an episode under way stays enabled a while: PcScheduler, P19/P20); the GPU time tells the
  // hot kernels (PcCoverage).
  void on_kernel_record(const char *name, uint64_t gpu_ns) override;

  // A launch was announced (its cuda_correlation fired) while PC sampling is enabled: its
  // samples are published. Samples of other launches are kernels that were still running when a
  // window started (Start needs no idle GPU, P6): left out, counted. Lock-free, any thread.
  void note_announced(uint32_t correlation_id);

  // A graph exec is launched for the first time (uploaded) now, on the launch path before its
  // call: unless PARCAGPU_PC_GRAPHS, an episode under way ends first, so the graph is not
  // registered with PC sampling and its launches keep their cost (docs/pc-sampling.md P21).
  void on_graph_first_launch();
  // A graph is instantiated now (before the call): the same, for an exec instantiated while
  // PC sampling is enabled pays more at every later launch however it is uploaded (P26).
  // Then registers the graph's kernels with PC sampling (PcEpisodes::register_graph) while a
  // consumer wants samples.
  // runtime_api: the runtime's instantiation (it calls the driver's, whose callback follows).
  void on_graph_instantiate(CUgraph graph, CUcontext ctx, bool runtime_api);

  // Resource callbacks. A context created while a consumer listens begins a learning period
  // (its kernels are all first launched from now on, P20).
  void on_context_created();
  void on_context_destroy(CUcontext ctx);
  CubinRegistry &cubins();

  // At exit: stops, drains, publishes and disables everything.
  void shutdown();
  PcStats stats() const;

 private:
  const CuptiApi &cupti_;
  const Config &config_;
  const std::unique_ptr<PcMetadata> meta_;  // stall reasons, gpu_configs, cubins
  KernelActivityControl *const activity_;
  WatcherWake *const wake_;
  PcLaunchState state_;  // what the launch path reads lock-free; PcEpisodes writes it
  PcLaunchGate gate_;    // threads inside a launch call; Stop / Get Data / Disable hold launches
  PcKernelsSeen kernels_seen_;  // kernel names seen while enabled (first uses)
  // The episodes, under their own mutex, and their schedule (owned there) for lock-free hints.
  const std::unique_ptr<PcEpisodes> episodes_;
  const PcScheduler *scheduler_ = nullptr;
};

}  // namespace parcagpu
