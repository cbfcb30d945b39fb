// CUPTI's callback API: the launch callbacks of kSubscribedCallbacks. This runs on the
// application's launch path, so with no consumer attached it does nothing but read a semaphore.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "parcagpu/cbid_table.h"
#include "config.h"
#include "correlation_tracker.h"
#include "cupti_api.h"
#include "graph_tracker.h"

namespace parcagpu {

struct LaunchStats {
  std::atomic<uint64_t> announced_eager{0};
  std::atomic<uint64_t> announced_graph{0};
  std::atomic<uint64_t> rate_limited{0};
  std::atomic<uint64_t> captured{0};  // launches recorded into a graph: not executions
  std::atomic<uint64_t> callback_errors{0};
};

class LaunchCallbacks {
 public:
  // Hooks into the rest of the profiler, called from the launch path.
  struct Hooks {
    void (*sync_consumers)();    // consumer state changed: enable/disable activity etc.
    bool (*consumer_changed)();  // cheap check whether sync_consumers is needed
    void (*request_flush)();     // enough launches outstanding
    void (*launch_begin)();      // an announced launch enters its API call
    void (*launch_end)();        // ... and leaves it
    // PC sampling (src/pc_sampling.h): every outermost launch enters / leaves its API call, on
    // the application's thread; and the module / context resource callbacks.
    void (*pc_launch_enter)(CUcontext ctx, uint64_t now_ns);
    void (*pc_launch_exit)();
    void (*module_resource)(CUpti_CallbackId cbid, const CUpti_ResourceData *rd);
    bool (*kernels_armed)();     // a consumer wants kernels: announced launches are tracked
  };

  LaunchCallbacks(const CuptiApi &cupti, const Config &config, CorrelationTracker &tracker,
                  GraphTracker &graphs, Hooks hooks);

  // Subscribes and enables every table entry (less the operator's PARCAGPU_DISABLE_CBIDS).
  // False if CUPTI refused the subscription: the library then stays inert.
  bool subscribe();
  // Disables exactly what subscribe() enabled, then unsubscribes.
  void unsubscribe();

  const std::vector<SubscribedCallback> &enabled() const { return enabled_; }
  const LaunchStats &stats() const { return stats_; }

 private:
  static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain,
                                   CUpti_CallbackId cbid, const void *data);
  void on_launch(CbDomain domain, uint32_t cbid, const CUpti_CallbackData *cb);
  void on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData *rd);

  const CuptiApi &cupti_;
  const Config &config_;
  CorrelationTracker &tracker_;
  GraphTracker &graphs_;
  Hooks hooks_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<SubscribedCallback> enabled_;
  LaunchStats stats_;
};

}  // namespace parcagpu
