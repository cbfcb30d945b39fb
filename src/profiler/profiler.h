// The profiler: one per process, started once by InitializeInjection (CUDA_INJECTION64_PATH)
// or by the library's constructor (LD_PRELOAD), torn down at exit. It owns one object per CUPTI
// subsystem and the consumer watcher that tells them who is listening; it is itself the
// watcher's client and tells its subsystems in a fixed order (see on_consumers).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "base/config.h"
#include "base/consumers.h"
#include "base/cupti_api.h"
#include "base/subsystem_links.h"
#include "launch/launch_forward.h"  // the subsystems owned here (profiler.cc includes them)

namespace parcagpu {

// The only place the subsystems are built and joined: each gets what it calls in its
// constructor. Kernel activity and PC sampling call each other, so the profiler implements the
// links between them (subsystem_links.h), forwarding each call to the subsystem that does the work.
class Profiler : public ConsumerWatcher::Client,
                 private LaunchCountSource,
                 private KernelActivityControl,
                 private KernelRecordObserver,
                 private WatcherWake {
 public:
  explicit Profiler(const Config &config);
  ~Profiler() override;
  // Starts on libcupti's and libcuda's tables, loaded by start_profiler (a fake CUPTI table in
  // profiler_test), copied: the subsystems hold this profiler's copies. cuda may be null (no
  // libcuda). False: inert (CUPTI refused the subscription). Already reported.
  bool start(const CuptiApi &cupti, const CudaApi *cuda);
  void shutdown();

  // ConsumerWatcher::Client, in this order: kernel activity is armed (before any launch is
  // announced), the launch callbacks follow cuda_correlation, kernel activity is disarmed (after
  // no more launches are announced), then what a consumer that attached late missed is fired
  // again kAttachSettleNs after its semaphore rose: the stored graph_node_clone mappings (in
  // bounded chunks, on the watcher thread: there may be a million of them) and PC sampling's
  // metadata (stall reasons, cubins, gpu_config). PC sampling itself runs on application
  // threads, at launches: the launch callbacks stay on for it while it wants them.
  void on_consumers(const Consumers &now, const Consumers &before) override;
  uint64_t on_tick(uint64_t now_ns) override;

 private:
  void log_stats() const;
  // The links (subsystem_links.h): kernel activity's sticky policy reads the launch statistics;
  // PC sampling holds activity on and asks for flushes; activity tells PC sampling each kernel
  // record's name; both wake the watcher. Each is a no-op until its target is built.
  LaunchCounts launch_counts() const override;
  void hold_on(bool on) override;
  bool hold_off(bool on) override;
  void request_flush() override;
  void on_kernel_record(const char *function_name, uint64_t gpu_ns) override;
  void wake() override;

  Config config_;
  CuptiApi cupti_;
  CudaApi cuda_;
  bool have_cuda_ = false;
  std::unique_ptr<PcSampler> pc_;
  std::unique_ptr<CorrelationTracker> tracker_;
  std::unique_ptr<GraphTracker> graphs_;
  std::unique_ptr<ActivityCollector> activity_;
  std::unique_ptr<GraphCompletion> completion_;
  std::unique_ptr<LaunchCallbacks> callbacks_;  // the application threads' launch path
  std::unique_ptr<LaunchSwitch> switch_;        // the watcher's side of it
  std::unique_ptr<ConsumerWatcher> watcher_;
  // watcher_ for wake(): the launch path may ask before the watcher exists (callbacks are
  // subscribed first), so it is published once built.
  std::atomic<ConsumerWatcher *> watcher_ready_{nullptr};
  bool activity_usable_ = false;
  // The watcher thread's: what a consumer that attached is owed, and when (0: nothing).
  uint64_t refire_due_ns_ = 0;
  bool refire_clones_ = false, refire_pc_metadata_ = false;
  std::atomic<bool> shut_down_{false};
};

// Starts the process's profiler once, whichever way the library was loaded. Never throws.
bool start_profiler(const char *how) noexcept;

}  // namespace parcagpu
