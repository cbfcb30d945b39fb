// The profiler: one per process, started once by InitializeInjection (CUDA_INJECTION64_PATH)
// or by the library's constructor (LD_PRELOAD), torn down at exit. It owns one object per CUPTI
// subsystem and decides, from the probe semaphores, whether anybody is listening.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "activity.h"
#include "config.h"
#include "correlation_tracker.h"
#include "cupti_api.h"
#include "graph_tracker.h"
#include "launch_callbacks.h"
#include "pc_sampling.h"

namespace parcagpu {

class Profiler {
 public:
  explicit Profiler(const Config &config);
  // False: inert (no CUPTI, or CUPTI refused the subscription). Already reported.
  bool start();
  void shutdown();

  // Consumers attach and detach at any time; these keep activity collection and the metadata
  // probes in step with the semaphores.
  bool consumer_changed() const;
  void sync_consumers();

  ActivityCollector *activity() { return activity_.get(); }
  const LaunchStats &launch_stats() const { return callbacks_->stats(); }
  PcSampler *pc() { return pc_.get(); }

 private:
  void log_stats() const;

  Config config_;
  CuptiApi cupti_;
  CudaApi cuda_;
  bool have_cuda_ = false;
  std::unique_ptr<CorrelationTracker> tracker_;
  std::unique_ptr<GraphTracker> graphs_;
  std::unique_ptr<ActivityCollector> activity_;
  std::unique_ptr<LaunchCallbacks> callbacks_;
  std::unique_ptr<PcSampler> pc_;
  std::atomic<unsigned> last_clone_consumers_{0};
  std::atomic<bool> activity_usable_{false};
  std::atomic<bool> shut_down_{false};
};

// Starts the process's profiler once, whichever way the library was loaded. Never throws.
bool start_profiler(const char *how) noexcept;

}  // namespace parcagpu
