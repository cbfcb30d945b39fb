// PC sampling's episodes (PcScheduler, src/pc/pc_scheduler.h), carried out: the contexts and their
// GPU locks (PcDeviceLocks), the PC Sampling API calls of each step on its context's PcSession
// (enable and configure, a window's Start and Stop, Get Data, Disable), publishing the samples
// (PcPublisher, pc_publish.h), and turning PC sampling off for the process at the first error.
// Everything here runs under one mutex, on an application thread inside a launch callback (or a
// context-destroy callback, or at exit): PcSampler (pc_sampling.h) calls in from the launch path
// when a step is due, and reads what it needs lock-free from the PcLaunchState this writes. What
// each launch does is decided by decide_pc_step (pc_step.h, pure); this gathers its facts
// (step_event) and applies the action (apply_step), each PC Sampling API step with the launch gate
// held exclusively.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/rate_gate.h"
#include "pc/pc_device_lock.h"
#include "pc/pc_forward.h"
#include "pc/pc_publish.h"
#include "pc/pc_stats.h"

namespace parcagpu {

class PcEpisodes {
 public:
  PcEpisodes(const CuptiApi &cupti, const CudaApi *cuda, const Config &config,
             KernelActivityControl *activity, PcLaunchState &state, PcLaunchGate &gate,
             PcMetadata &meta);
  ~PcEpisodes();

  // The schedule, from the config (PcSampler::init): the launch budget (also into the launch
  // state) and the windows' target rate. The launch path reads its lock-free hints.
  const PcScheduler &start(uint64_t now_ns);

  // The step due at a launch on ctx, unless another thread holds the mutex (then this launch
  // goes on): enable, start, stop, drain or disable, or a context joining the episode under way;
  // may_enable false keeps an episode from beginning (a graph's first launch or upload, P21).
  // Never from inside a launch call already counted at the gate (PcSampler checks).
  void take_step(CUcontext ctx, bool want, bool may_enable);

  // Ends every episode before a graph step that would register the graph with PC sampling
  // (PARCAGPU_PC_GRAPHS=0); where it cannot (inside a launch call, or other threads' launches
  // did not leave in time), the graph goes in with PC sampling on. Counted either way.
  enum class GraphStep : uint8_t { kFirstLaunch, kInstantiation };
  void keep_graph_out(GraphStep step, bool inside_launch);
  // Before the application instantiates `graph` on ctx (after keep_graph_out): registers the
  // graph's kernels with PC sampling without registering the application's exec. A kernel gives
  // records only if its first use (an eager launch, or the upload of a graph holding it) came
  // while PC sampling was enabled (P19, P20); an exec uploaded or instantiated then pays about a
  // microsecond per kernel on every later launch (P21, P30). So PC sampling is enabled briefly,
  // an exec of the library's own is instantiated from the same graph, uploaded and destroyed,
  // and PC sampling disabled again: the application's exec, instantiated and uploaded after
  // that, pays nothing per launch, and gives records where the graph was captured before PC
  // sampling was first enabled (P32; PARCAGPU_PC_GRAPH_SHADOWS, off by default). Budgeted
  // (kGraphRegistrationsPerSecond); put off while another process samples the GPU or launches
  // do not leave in time (counted).
  void register_graph(CUgraph graph, CUcontext ctx);
  // A context was created: a learning period begins (PcScheduler::learn_again); true if an
  // episode is to resume at once (the launch callbacks must turn on for it).
  bool learn_again();
  // A module was loaded (PcScheduler::module_loaded); true if an episode is to resume at once.
  // Never waits: with the episodes' mutex held (a step under way, or the library's own CUDA call
  // that loaded it, on this thread) the module is left to the episode under way.
  bool resume_for_module();
  void on_context_destroy(CUcontext ctx);
  // At exit: stops, drains, publishes and disables everything; PC sampling unusable after.
  void shutdown();
  PcStats stats() const;

 private:
  struct Context;
  Context *find(CUcontext ctx);
  Context &find_or_add(CUcontext ctx);
  PcStepEvent step_event(const Context *here, bool want, bool may_enable, uint64_t now_ns) const;
  void apply_step(PcAction a, Context &here, uint64_t now_ns);
  void end_for_no_consumer();
  void begin_episode(Context &c, uint64_t now_ns);
  void drain_window();
  // The steps of an episode (PcScheduler::Step), each with the gate held exclusively.
  // `kernel_activity`: held on first (an episode: CUPTI would refuse it once PC sampling is
  // enabled, P12), or left as it is (a graph registration, which holds it off).
  bool enable(Context &c, bool kernel_activity = true);
  // PC sampling disabled on c outside an episode's course (register_graph), its GPU kept.
  void disable_quietly(Context &c);
  // After c's Disable: its flags and the process's any_enabled set; true if another context is
  // still enabled.
  bool note_disabled(Context &c);
  // What Disable handed back published; a failed Disable turns PC sampling off (fail).
  void publish_disabled(Context &c, const PcResult &disabled);
  // The library's exec of graph instantiated, uploaded on c's own stream, waited for, destroyed.
  bool upload_shadow(Context &c, CUgraph graph);
  bool upload_shadow_relaxed(Context &c, CUgraph graph);  // the calls, this thread's capture
                                                          // mode relaxed
  // The GPU's lock (PcDeviceLocks) for c, taken before its Enable and given back after its
  // Disable: false while another process samples that GPU (asked again kOtherProcessRetryNs
  // later, counted, said once).
  bool lock_gpu(Context &c, uint64_t now_ns);
  void unlock_gpu(Context &c);
  void keep_off_without_lock(Context &c);
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
  // A PC Sampling API call failed: PC sampling off for the process, said once.
  void fail(const PcResult &failed);
  bool exclusive_begin();  // waits for other threads to leave their launch calls
  void exclusive_end();

  const CuptiApi &cupti_;
  const CudaApi *cuda_;
  const Config &config_;
  KernelActivityControl *const activity_;
  PcLaunchState &state_;
  PcLaunchGate &gate_;
  PcMetadata &meta_;
  PcPublisher publisher_;  // Get Data and pc_sample_batch, counted in stats_
  // decide_pc_step's own state (the window's dice, the launches waited).
  const std::unique_ptr<PcStepState> step_;

  mutable std::mutex mu_;  // everything below; the PC Sampling API calls
  std::vector<std::unique_ptr<Context>> contexts_;
  std::unique_ptr<PcScheduler> scheduler_;
  Context *episode_ctx_ = nullptr;                           // where PC sampling is enabled now
  uint64_t window_started_ns_ = 0, episode_started_ns_ = 0;  // for PcStats
  PcDeviceLocks locks_;                                      // in config_.pc_lock_dir
  bool said_other_process_ = false, said_no_lock_ = false;
  // The sampling factor of every GPU of the process: the first device's in force (configure()).
  uint32_t process_factor_ = 0;
  // Graph registrations (register_graph): kGraphRegistrationsPerSecond after a burst of
  // kGraphRegistrationBurst.
  RateGate registrations_;
  PcStats stats_;
};

}  // namespace parcagpu
