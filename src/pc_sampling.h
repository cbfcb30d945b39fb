// CUPTI's PC Sampling API: where inside a kernel the GPU time goes, attributed to the launch
// that ran it. One class for the subsystem, as for callbacks and activity.
//
// Runs only while a consumer is attached to pc_sample_batch, and then only in short episodes
// (PcScheduler, src/pc_scheduler.h): at the first launch that finds an episode due, PC sampling
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
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "config.h"
#include "cupti_api.h"
#include "pc_device_lock.h"
#include "pc_launch_gate.h"
#include "subsystem_links.h"

namespace parcagpu {

// PC sampling's parts, in their own headers (pc_sampling.cc includes them).
class CubinRegistry;            // cubin_registry.h
class PcMetadata;               // pc_metadata.h
class FunctionNames;            // pc_records.h
class PcRecordBuffer;           // pc_records.h
class PcScheduler;              // pc_scheduler.h
struct PcResult;                // pc_session.h
struct PcStepEvent;             // pc_step.h
struct PcStepState;             // pc_step.h
enum class PcAction : uint8_t;  // pc_step.h

struct PcStats {
  uint64_t enables = 0, disables = 0;       // cuptiPCSamplingEnable/Disable calls that succeeded
  uint64_t episodes = 0, episodes_cut = 0;  // episodes; ... ended early at their launch budget
  uint64_t windows = 0, window_launches = 0;
  uint64_t window_ns = 0;                       // wall time inside windows
  uint64_t enabled_ns = 0;                      // wall time with PC sampling enabled (episodes)
  uint64_t disable_ns = 0, max_disable_ns = 0;  // inside cuptiPCSamplingDisable
  uint64_t drains = 0, batches = 0;             // drains, pc_sample_batch firings
  uint64_t records = 0, pairs = 0, samples = 0;
  uint64_t uncorrelated = 0;                    // records with correlationId 0
  uint64_t gpu_only = 0, gpu_only_samples = 0;  // of launches not announced: ID 0 (GPU-only)
  uint64_t unpublished = 0;                     // records drained with no consumer attached
  uint64_t nonuser_samples = 0;                 // CUPTI's nonUsrKernelsTotalSamples
  uint64_t dropped_samples = 0;                 // CUPTI's droppedSamples
  uint64_t gate_timeouts = 0;                // work put off: other launches did not leave in time
  uint64_t ended_for_graphs = 0;             // episodes ended before a graph's first launch
  uint64_t ended_for_instantiations = 0;     // ... before a graph's instantiation
  uint64_t graphs_uploaded_enabled = 0;      // graphs first launched while PC sampling was on
  uint64_t graphs_instantiated_enabled = 0;  // graphs instantiated while PC sampling was on
  uint64_t learning_resumes = 0;             // episodes begun again after such an end
  uint64_t put_off_for_other_process = 0;    // enables put off: another process samples the GPU
  uint32_t sampling_factor = 0;              // in force (read back), 0 = not configured yet
  bool failed = false;
};

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
  bool usable() const { return usable_.load(std::memory_order_relaxed); }

  // PC sampling runs while a consumer is attached to pc_sample_batch and the launch path is
  // observed (cuda_correlation attached, as every consumer of PC samples does: samples are tied
  // to launches by correlation ID).
  static bool wanted();

  // No PC Sampling API call. Whether any metadata was fired yet (a consumer attaching now
  // missed it), and every piece of metadata fired again to the consumers it has now: the
  // profiler calls it kAttachSettleNs after a metadata semaphore rose.
  bool has_fired_metadata() const;
  void fire_metadata();
  // PC sampling is enabled on some context and only a launch callback can turn it off: launch
  // callbacks must keep coming (to on_launch_enter) until this is false, also after every
  // consumer has gone. Lock-free.
  // A window is open: launches entering now are sampled (LaunchCallbacks announces them whatever
  // the rate limits say, so their samples hang under a launch stack).
  bool window_open() const { return window_open_.load(std::memory_order_relaxed); }
  bool needs_launch_path() const { return any_enabled_.load(std::memory_order_relaxed); }
  // Launch callbacks must reach on_launch_enter now: an episode is under way or due (and a
  // consumer wants samples), or PC sampling is still enabled somewhere. Lock-free.
  bool needs_launches(uint64_t now_ns) const;
  // Whether every launch reaches on_launch_enter now (the launch callbacks of every role are
  // on): an episode begins only then, as everything a started window runs is sampled. Watcher.
  void set_launches_observed(bool all) { launches_observed_.store(all, std::memory_order_relaxed); }
  // When the next episode is due (monotonic ns), for the watcher's wake-up; 0 if none is.
  uint64_t next_episode_ns() const;

  // The outermost launch API call of this thread enters / leaves (launch callbacks, context
  // current). Does the PC Sampling API work that is due, then counts the launch in flight.
  // Also called after the last consumer left, while needs_launch_path() keeps the launch
  // callbacks on: then it tears PC sampling down. A nested call while counted is not counted
  // again.
  // uploads_graph: the launch is a graph's first (on_graph_first_launch): no episode begins at
  // it, so the graph is uploaded with PC sampling off.
  void on_launch_enter(CUcontext ctx, uint64_t now_ns, bool uploads_graph = false);
  void on_launch_exit();

  // A kernel (or graph exec) is new to the process: an episode under way stays enabled a while
  // (PcScheduler, P19/P20). Any thread.
  void note_first_use();
  // Every kernel activity record's function name (the activity collector, on CUPTI's buffer
  // thread): a name not seen before is a first use.
  void on_kernel_record(const char *name) override;

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
  void on_graph_instantiate();

  // Resource callbacks. A context created while a consumer listens begins a learning period
  // (its kernels are all first launched from now on, P20).
  void on_context_created();
  void on_context_destroy(CUcontext ctx);
  CubinRegistry &cubins();

  // At exit: stops, drains, publishes and disables everything.
  void shutdown();
  PcStats stats() const;

 private:
  struct Context;
  Context *find(CUcontext ctx);
  Context &find_or_add(CUcontext ctx);
  // Whether a launch on ctx must take the episode's next step (PcScheduler::Step): a lock-free
  // pre-check on the launch path, from the copies of the scheduler's state below.
  bool step_due(CUcontext ctx, bool want, uint64_t now_ns) const;
  // Contexts with PC sampling enabled now, for the launch path: a launch on any other context
  // during an episode comes to take_step, which lets it join (docs/pc-sampling.md P23).
  bool enabled_here(CUcontext ctx) const;
  void mark_enabled(CUcontext ctx, bool enabled);
  // The step due, under mu_ (skipped if another thread holds it): enable, start, stop, drain or
  // disable, or a context joining the episode under way; may_enable false keeps an episode from
  // beginning (a graph's first launch or upload, P21). decide_pc_step (pc_step.h) decides from
  // step_event's facts; apply_step makes the calls.
  void take_step(CUcontext ctx, bool want, bool may_enable);
  PcStepEvent step_event(const Context *here, bool want, bool may_enable, uint64_t now_ns) const;
  void apply_step(PcAction a, Context &here, uint64_t now_ns);
  void end_for_no_consumer();
  void begin_episode(Context &c, uint64_t now_ns);
  void drain_window();
  // The steps of an episode (PcScheduler::Step), each with the gate held exclusively.
  bool enable(Context &c);
  // The GPU's lock (PcDeviceLocks) for c, taken before its Enable and given back after its
  // Disable: false while another process samples that GPU (asked again kOtherProcessRetryNs
  // later, counted, said once).
  bool lock_gpu(Context &c, uint64_t now_ns);
  void unlock_gpu(Context &c);
  std::string gpu_name(CUcontext ctx) const;
  bool configure(Context &c);
  void start_window(uint64_t now_ns);
  void close_window(uint64_t now_ns);
  void drain(Context &c);
  // Ends the episode on c: the window closed, its samples drained (waiting for CUPTI's workers
  // if wait_for_workers), PC sampling disabled and what Disable hands back published.
  // for_graph: ended before a graph step (PcScheduler::on_disabled).
  void end_episode(Context &c, bool wait_for_workers, bool for_graph = false);
  void end_all_episodes(bool wait_for_workers, bool for_graph = false);
  // Fires what a buffer holds to pc_sample_batch consumers (or counts it unpublished).
  void publish(PcRecordBuffer &buf);
  // A PC Sampling API call failed: PC sampling off for the process, said once.
  void fail(const PcResult &failed);
  // Ends every episode before a graph step (first launch, instantiation) that would register the
  // graph with PC sampling, counted in `ended`; where it cannot, counted in `went_in`.
  void keep_graph_out(const char *step, uint64_t &ended, uint64_t &went_in);
  bool exclusive_begin();  // waits for other threads to leave their launch calls
  void exclusive_end();

  const CuptiApi &cupti_;
  const CudaApi *cuda_;
  const Config &config_;
  const std::unique_ptr<PcMetadata> meta_;  // stall reasons, gpu_configs, cubins
  const std::unique_ptr<FunctionNames> names_;

  KernelActivityControl *const activity_;
  WatcherWake *const wake_;
  std::atomic<bool> usable_{false};
  std::atomic<bool> any_enabled_{false};
  std::atomic<bool> launches_observed_{false};
  static constexpr size_t kEnabledSlots = 16;
  std::atomic<CUcontext> enabled_ctx_[kEnabledSlots] = {};
  // Lock-free copies of the scheduler's state for the launch path's pre-check (step_due).
  std::atomic<bool> window_open_{false};
  std::atomic<bool> drain_pending_{false};
  std::atomic<uint64_t> drain_due_ns_{0};
  std::atomic<uint64_t> window_deadline_ns_{0};
  std::atomic<uint32_t> window_launches_{0};
  std::atomic<uint32_t> window_limit_{0};
  // Launches entered since the episode's enable: each left a kernel record (PcScheduler).
  std::atomic<uint64_t> episode_launches_{0};
  std::atomic<uint64_t> last_first_use_ns_{0};
  // Correlation IDs announced since the window started (a window spans at most 32 launches,
  // plus what the rate gates announce meanwhile).
  static constexpr size_t kAnnouncedSlots = 512;
  std::atomic<uint32_t> announced_[kAnnouncedSlots] = {};
  std::atomic<uint32_t> announced_next_{0};
  static bool was_announced(const void *self, uint32_t correlation_id);
  std::mutex seen_mu_;
  std::unordered_set<uint64_t> kernels_seen_;  // hashes of kernel names seen while enabled
  uint64_t launch_budget_ = 0;
  // decide_pc_step's own state (the window's dice, the launches waited).
  const std::unique_ptr<PcStepState> step_;
  Context *episode_ctx_ = nullptr;                           // where PC sampling is enabled now
  uint64_t window_started_ns_ = 0, episode_started_ns_ = 0;  // for PcStats

  PcLaunchGate gate_;  // threads inside a launch call; Stop / Get Data / Disable hold launches

  mutable std::mutex mu_;  // contexts, controller; the PC Sampling API calls
  std::vector<std::unique_ptr<Context>> contexts_;
  std::unique_ptr<PcScheduler> scheduler_;
  PcDeviceLocks locks_;  // under mu_ (in config_.pc_lock_dir)
  bool said_other_process_ = false, said_no_lock_ = false;
  PcStats stats_;
};

}  // namespace parcagpu
