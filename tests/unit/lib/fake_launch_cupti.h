// The unit tests' fake CUPTI table (FakeCupti, put in a CuptiApi by install()): it records the
// subscription and which callbacks are enabled, and dispatches a callback only while it is
// enabled, as CUPTI does; it counts the activity enables and disables and answers them as a test
// asks; it keeps CUPTI's clock; and it plays the PC Sampling API (fake_pc_cupti.h's FakePc). For
// the tests of LaunchCallbacks, LaunchSwitch, ActivityToggle, ActivitySwitch and PcSession.
//
// LaunchFixture: the launch callbacks (LaunchCallbacks, AnnouncedLaunches, ResourceCallbacks) and
// their watcher's side (LaunchSwitch) built on it as the profiler builds them. Launches are made
// the way CUPTI reports them: ENTER, the nested driver call of a runtime launch, EXIT. For
// launch_callbacks_test.cc and launch_switch_test.cc.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "activity/activity.h"
#include "base/config.h"
#include "base/consumers.h"
#include "base/cupti_api.h"
#include "base/usdt.h"
#include "fake_pc_cupti.h"
#include "launch/launch_callbacks.h"
#include "launch/launch_role.h"
#include "launch/launch_switch.h"
#include "trackers/correlation_tracker.h"
#include "trackers/graph_tracker.h"

namespace parcagpu::fake_launch {

struct FakeCupti {
  CUpti_CallbackFunc callback = nullptr;
  void *userdata = nullptr;
  bool subscribed = false;
  std::set<std::pair<int, uint32_t>> enabled;  // (domain, cbid)
  int launch_disables = 0;                     // cuptiEnableCallback(0) of a launch cbid
  int activity_enables = 0;                    // calls, failed ones included
  int activity_disables = 0;
  int activity_flushes = 0;
  CUptiResult activity_enable_result = CUPTI_SUCCESS;
  CUptiResult activity_disable_result = CUPTI_SUCCESS;
  CUpti_ActivityKind activity_last_kind = CUPTI_ACTIVITY_KIND_INVALID;
  std::function<void()> inside_activity_call;  // what a test sees from inside each of them
  uint64_t timestamp = 1;                      // cuptiGetTimestamp, unless
  std::function<uint64_t()> clock;             // (set) CUPTI's clock follows the test's
  uint32_t graph_id = 0;                       // cuptiGetGraphId
  uint64_t node_id = 0;                        // cuptiGetGraphNodeId
  // Failures on demand: what cuptiSubscribe returns, and cuptiEnableCallback's result for a
  // (domain, cbid, on) (unset: success); a failed call changes nothing.
  CUptiResult subscribe_result = CUPTI_SUCCESS;
  std::function<CUptiResult(CbDomain, uint32_t cbid, uint32_t on)> enable_result;
  CUptiResult register_result = CUPTI_SUCCESS;  // cuptiActivityRegisterCallbacks
  // The calls in order, by name (cuptiEnableCallback as "enable" or "disable"), for a test of
  // their order; under calls_mu while another thread may call (the profiler's watcher).
  std::mutex calls_mu;
  std::vector<std::string> calls;
  void note(const char *call) {
    std::lock_guard<std::mutex> lock(calls_mu);
    calls.push_back(call);
  }
  size_t calls_made() {
    std::lock_guard<std::mutex> lock(calls_mu);
    return calls.size();
  }
  fake_pc::FakePc pc;  // the PC Sampling API (fake_pc_cupti.h)
};
inline FakeCupti *g_fake = nullptr;

inline CUptiResult CUPTIAPI fake_subscribe(CUpti_SubscriberHandle *s, CUpti_CallbackFunc cb,
                                           void *userdata) {
  g_fake->note("subscribe");
  if (g_fake->subscribe_result != CUPTI_SUCCESS) return g_fake->subscribe_result;
  *s = reinterpret_cast<CUpti_SubscriberHandle>(uintptr_t{0x5b});
  g_fake->callback = cb;
  g_fake->userdata = userdata;
  g_fake->subscribed = true;
  return CUPTI_SUCCESS;
}
inline CUptiResult CUPTIAPI fake_unsubscribe(CUpti_SubscriberHandle) {
  g_fake->note("unsubscribe");
  g_fake->subscribed = false;
  return CUPTI_SUCCESS;
}
inline CUptiResult CUPTIAPI fake_enable_callback(uint32_t on, CUpti_SubscriberHandle,
                                                 CUpti_CallbackDomain domain,
                                                 CUpti_CallbackId cbid) {
  const auto key = std::make_pair(static_cast<int>(domain), static_cast<uint32_t>(cbid));
  g_fake->note(on ? "enable" : "disable");
  if (g_fake->enable_result)
    if (const CUptiResult r = g_fake->enable_result(static_cast<CbDomain>(domain), cbid, on);
        r != CUPTI_SUCCESS)
      return r;
  if (on) {
    g_fake->enabled.insert(key);
  } else {
    g_fake->enabled.erase(key);
    const auto *sub = find_subscribed(static_cast<CbDomain>(domain), cbid);
    if (sub && is_launch_role(sub->role)) ++g_fake->launch_disables;
  }
  return CUPTI_SUCCESS;
}
// One cuptiActivityEnable (on) or Disable: counted in `calls`, answered with `result`.
inline CUptiResult fake_activity_switch(CUpti_ActivityKind kind, int *calls, CUptiResult result) {
  g_fake->activity_last_kind = kind;
  ++*calls;
  if (g_fake->inside_activity_call) g_fake->inside_activity_call();
  return result;
}
inline CUptiResult CUPTIAPI fake_activity_enable(CUpti_ActivityKind kind) {
  return fake_activity_switch(kind, &g_fake->activity_enables, g_fake->activity_enable_result);
}
inline CUptiResult CUPTIAPI fake_activity_disable(CUpti_ActivityKind kind) {
  return fake_activity_switch(kind, &g_fake->activity_disables, g_fake->activity_disable_result);
}
inline CUptiResult CUPTIAPI fake_flush_all(uint32_t) {
  ++g_fake->activity_flushes;
  g_fake->note("flush_all");
  return CUPTI_SUCCESS;
}
inline CUptiResult CUPTIAPI fake_timestamp(uint64_t *ts) {
  *ts = g_fake->clock ? g_fake->clock() : g_fake->timestamp;
  return CUPTI_SUCCESS;
}
inline CUptiResult CUPTIAPI fake_graph_id(CUgraph, uint32_t *id) {
  *id = g_fake->graph_id;
  return CUPTI_SUCCESS;
}
inline CUptiResult CUPTIAPI fake_node_id(CUgraphNode, uint64_t *id) {
  *id = g_fake->node_id;
  return CUPTI_SUCCESS;
}

inline CUptiResult CUPTIAPI fake_exec_id(CUgraphExec, uint32_t *id) {
  *id = 0;
  return CUPTI_SUCCESS;
}
inline CUptiResult CUPTIAPI fake_version(uint32_t *v) {
  *v = 24;  // CUDA 12.8's CUPTI
  return CUPTI_SUCCESS;
}
inline CUptiResult CUPTIAPI fake_register_callbacks(CUpti_BuffersCallbackRequestFunc,
                                                    CUpti_BuffersCallbackCompleteFunc) {
  return g_fake->register_result;
}
inline CUptiResult CUPTIAPI fake_next_record(uint8_t *, size_t, CUpti_Activity **) {
  return CUPTI_ERROR_MAX_LIMIT_REACHED;  // no records
}
// `api` handed to resolve_cupti (cupti_api.h) as libcupti's symbols would be: what it leaves null
// becomes the stub of a missing entry point (PC sampling's among them). False if a required one
// is null.
inline bool resolve_fake(const CuptiApi &api, CuptiApi *resolved) {
  std::string error;
  return resolve_cupti(
      [&api](const char *name) -> void * {
#define PARCAGPU_FAKE_ENTRY(fn, ...) \
  if (std::strcmp(name, #fn) == 0) return reinterpret_cast<void *>(api.fn);
        PARCAGPU_CUPTI_REQUIRED(PARCAGPU_FAKE_ENTRY)
        PARCAGPU_CUPTI_OPTIONAL(PARCAGPU_FAKE_ENTRY)
#undef PARCAGPU_FAKE_ENTRY
        return nullptr;
      },
      resolved, &error);
}

// `fake` as the CUPTI of `api` (every entry point it plays), and as the one g_fake names.
inline void install(FakeCupti &fake, CuptiApi &api) {
  g_fake = &fake;
  api.cuptiSubscribe = &fake_subscribe;
  api.cuptiUnsubscribe = &fake_unsubscribe;
  api.cuptiEnableCallback = &fake_enable_callback;
  api.cuptiActivityEnable = &fake_activity_enable;
  api.cuptiActivityDisable = &fake_activity_disable;
  api.cuptiActivityFlushAll = &fake_flush_all;
  api.cuptiGetTimestamp = &fake_timestamp;
  api.cuptiGetGraphId = &fake_graph_id;
  api.cuptiGetGraphNodeId = &fake_node_id;
  api.cuptiGetGraphExecId = &fake_exec_id;
  fake_pc::install(api, fake.pc);
}

// Runs `f` on a thread of its own: a thread's launch state (initial-exec TLS) starts fresh, as
// an application thread's does, whatever another test left on the test's thread.
template <typename F>
void on_new_thread(F f) {
  std::thread(f).join();
}

class LaunchFixture : public ::testing::Test {
 public:
  // Rate limits: far above what the tests launch by default, so the coin's mean stays 1 (every
  // launch picked) and nothing is learned first; a test sets its own before build().
  void SetUp() override {
    install(fake_, api_);
    config_.eager_rate_limit = 1e9;
    config_.graph_rate_limit = 1e9;
    parcagpu_cuda_correlation_semaphore = 1;  // a cuda_correlation consumer is attached
  }
  void TearDown() override {
    if (switch_) switch_->unsubscribe();
    switch_.reset();
    callbacks_.reset();
    parcagpu_cuda_correlation_semaphore = 0;
    g_fake = nullptr;
  }

  // The parts as Profiler::start builds them (no PC sampling, no graph completion), subscribed.
  void build() {
    tracker_ = std::make_unique<CorrelationTracker>(1 << 20, 30'000'000'000ull);
    graphs_ = std::make_unique<GraphTracker>(api_, nullptr);
    activity_ = std::make_unique<ActivityCollector>(api_, config_, *tracker_, *graphs_, nullptr,
                                                    nullptr, nullptr);
    callbacks_ = std::make_unique<LaunchCallbacks>(api_, config_, *tracker_, *graphs_, *activity_,
                                                   nullptr, nullptr);
    switch_ = std::make_unique<LaunchSwitch>(api_, config_, *callbacks_, nullptr);
    ASSERT_TRUE(switch_->subscribe());
  }
  // build() with a cuda_correlation consumer attached at the start (attach_at_start).
  void build_attached() {
    build();
    attach_at_start();
  }
  // build_attached() and a kernel consumer: announced launches are tracked.
  void build_tracking() {
    build_attached();
    activity_->arm(true);
  }
  // The callbacks off once the drain ended: the role off, no launch cbid left on.
  void expect_off() const {
    EXPECT_EQ(phase(), RolePhase::kOff);
    EXPECT_FALSE(any_launch_cbid_on());
  }
  // Launches admitted and not yet left (by their EXIT or given up).
  int inflight() const { return callbacks_->role().inflight.load(); }
  // The launch `corr` left nothing behind: not announced, not tracked, none in flight.
  void expect_left_no_trace(uint32_t corr) const {
    EXPECT_EQ(announced(), 0u);
    EXPECT_FALSE(tracker_->contains(corr));
    EXPECT_EQ(inflight(), 0);
  }
  // A cuda_correlation consumer attached while the library starts (a clean epoch: every thread's
  // first launch is a candidate, launch_gate.h), as Profiler::start serves one.
  void attach_at_start() {
    switch_->set_starting(true);
    switch_->on_consumers(launch_consumer(), {});
    switch_->set_starting(false);
  }
  static Consumers launch_consumer() {
    Consumers c;
    c.cuda_correlation = 1;
    return c;
  }

  bool launch_cbids_on() const {
    for (const auto &cb : kSubscribedCallbacks)
      if (is_launch_role(cb.role) &&
          !fake_.enabled.count({static_cast<int>(cb.domain), static_cast<uint32_t>(cb.cbid)}))
        return false;
    return true;
  }
  bool any_launch_cbid_on() const {
    for (const auto &cb : kSubscribedCallbacks)
      if (is_launch_role(cb.role) &&
          fake_.enabled.count({static_cast<int>(cb.domain), static_cast<uint32_t>(cb.cbid)}))
        return true;
    return false;
  }

  // One callback as CUPTI makes it: only if enabled. True if it was dispatched.
  bool call(CbDomain domain, uint32_t cbid, CUpti_ApiCallbackSite site, uint32_t corr,
            const void *params = nullptr) {
    if (!fake_.enabled.count({static_cast<int>(domain), cbid})) return false;
    CUpti_CallbackData cb{};
    cb.callbackSite = site;
    cb.functionName = "cuLaunchKernel";
    cb.symbolName = "kernel";
    cb.functionParams = params;
    cb.correlationId = corr;
    fake_.callback(fake_.userdata, static_cast<CUpti_CallbackDomain>(domain), cbid, &cb);
    return true;
  }
  void enter(CbDomain d, uint32_t cbid, uint32_t corr, const void *params = nullptr) {
    call(d, cbid, CUPTI_API_ENTER, corr, params);
  }
  void exit(CbDomain d, uint32_t cbid, uint32_t corr, const void *params = nullptr) {
    call(d, cbid, CUPTI_API_EXIT, corr, params);
  }
  // cudaLaunchKernel (211) nesting cuLaunchKernel (307), one correlation ID.
  void runtime_launch(uint32_t corr) {
    enter(CbDomain::Runtime, 211, corr);
    enter(CbDomain::Driver, 307, corr);
    exit(CbDomain::Driver, 307, corr);
    exit(CbDomain::Runtime, 211, corr);
  }
  void driver_launch(uint32_t corr) {
    enter(CbDomain::Driver, 307, corr);
    exit(CbDomain::Driver, 307, corr);
  }
  // cuGraphLaunch (514) of `exec`: its parameters are {exec, stream}.
  void graph_launch(uint32_t corr, const void *exec) {
    const void *params[2] = {exec, nullptr};
    enter(CbDomain::Driver, 514, corr, params);
    exit(CbDomain::Driver, 514, corr, params);
  }

  const LaunchStats &stats() const { return callbacks_->stats(); }
  uint64_t announced() const {
    return stats().announced_eager.load() + stats().announced_graph.load();
  }
  RolePhase phase() const { return callbacks_->role().state.load().phase(); }
  uint64_t epoch() const { return callbacks_->role().state.load().epoch(); }

  FakeCupti fake_;
  CuptiApi api_;
  Config config_;
  std::unique_ptr<CorrelationTracker> tracker_;
  std::unique_ptr<GraphTracker> graphs_;
  std::unique_ptr<ActivityCollector> activity_;
  std::unique_ptr<LaunchCallbacks> callbacks_;
  std::unique_ptr<LaunchSwitch> switch_;
};

}  // namespace parcagpu::fake_launch
