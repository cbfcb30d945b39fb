#include "launch_callbacks.h"

#include "activity.h"
#include "log.h"
#include "token_bucket.h"
#include "usdt.h"

namespace parcagpu {
namespace {

// Role of each cbid, indexed directly: the launch path must not search the table.
constexpr uint32_t kMaxCbid = 1024;
enum : uint8_t { kNotLaunch = 0, kEager = 1, kGraph = 2 };
struct RoleIndex {
  uint8_t driver[kMaxCbid] = {};
  uint8_t runtime[kMaxCbid] = {};
};
constexpr RoleIndex make_role_index() {
  RoleIndex idx;
  for (const auto &cb : kSubscribedCallbacks) {
    if (cb.role == CbRole::GraphResource) continue;
    uint8_t role = cb.role == CbRole::GraphLaunch ? kGraph : kEager;
    if (cb.domain == CbDomain::Driver) idx.driver[cb.cbid] = role;
    if (cb.domain == CbDomain::Runtime) idx.runtime[cb.cbid] = role;
  }
  return idx;
}
constexpr RoleIndex kRoles = make_role_index();
static_assert(kRoles.driver[514] == kGraph && kRoles.driver[515] == kGraph);

// The outermost launch API call in flight on this thread. A runtime launch nests the driver
// launch under it with the same correlation ID: only the outermost one is announced.
// Trivially constructible and initial-exec TLS: no guard, no __tls_get_addr on the launch path.
struct ThreadLaunch {
  uint32_t correlation_id;
  uint32_t cbid;
  CbDomain domain;
  bool active;
  bool announce;
  bool captured;  // a graph node was created inside it: recorded by stream capture, not run
  uint32_t capture_graph_id;
  uint64_t capture_node_id;
  TokenBucket eager_bucket;
  TokenBucket graph_bucket;
};
__attribute__((tls_model("initial-exec"))) thread_local ThreadLaunch t_launch;

LaunchCallbacks *g_callbacks = nullptr;

}  // namespace

LaunchCallbacks::LaunchCallbacks(const CuptiApi &cupti, const Config &config,
                                 CorrelationTracker &tracker, GraphTracker &graphs, Hooks hooks)
    : cupti_(cupti), config_(config), tracker_(tracker), graphs_(graphs), hooks_(hooks) {}

bool LaunchCallbacks::subscribe() {
  g_callbacks = this;
  CUptiResult r = cupti_.cuptiSubscribe(&subscriber_, &on_callback, this);
  if (r != CUPTI_SUCCESS) {
    report_error(r, "callbacks",
                 "cuptiSubscribe failed: %s (another CUPTI client such as Nsight attached?); "
                 "parcagpu stays inert",
                 cupti_result_string(cupti_, r));
    subscriber_ = nullptr;
    return false;
  }
  for (const auto &cb : kSubscribedCallbacks) {
    bool disabled = false;
    for (const auto &d : config_.disabled_cbids) disabled |= d.domain == cb.domain && d.cbid == cb.cbid;
    if (disabled) {
      debug_log("not subscribing %s (PARCAGPU_DISABLE_CBIDS)", cb.name);
      continue;
    }
    if (!callback_known_to(cb, cupti_.major)) {
      debug_log("not subscribing %s: new in CUDA %u, CUPTI is CUDA %d's", cb.name, cb.since_cuda,
                cupti_.major);
      continue;
    }
    r = cupti_.cuptiEnableCallback(1, subscriber_, static_cast<CUpti_CallbackDomain>(cb.domain),
                                   cb.cbid);
    if (r != CUPTI_SUCCESS) {
      report_error(r, "callbacks", "cuptiEnableCallback(%s) failed: %s; that path is not profiled",
                   cb.name, cupti_result_string(cupti_, r));
      continue;
    }
    enabled_.push_back(cb);
  }
  debug_log("subscribed %zu of %zu callbacks", enabled_.size(), kNumSubscribedCallbacks);
  return true;
}

void LaunchCallbacks::unsubscribe() {
  if (!subscriber_) return;
  for (const auto &cb : enabled_) {
    CUptiResult r = cupti_.cuptiEnableCallback(
        0, subscriber_, static_cast<CUpti_CallbackDomain>(cb.domain), cb.cbid);
    if (r != CUPTI_SUCCESS)
      report_error(r, "callbacks", "disabling %s failed: %s", cb.name,
                   cupti_result_string(cupti_, r));
  }
  enabled_.clear();
  CUptiResult r = cupti_.cuptiUnsubscribe(subscriber_);
  if (r != CUPTI_SUCCESS)
    report_error(r, "callbacks", "cuptiUnsubscribe failed: %s", cupti_result_string(cupti_, r));
  subscriber_ = nullptr;
}

void CUPTIAPI LaunchCallbacks::on_callback(void * /*userdata*/, CUpti_CallbackDomain domain,
                                           CUpti_CallbackId cbid, const void *data) {
  // Not userdata: some CUPTI harnesses call back with NULL there.
  LaunchCallbacks *self = g_callbacks;
  if (__builtin_expect(!self, 0)) return;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    try {
      self->on_resource(cbid, static_cast<const CUpti_ResourceData *>(data));
    } catch (...) {
      self->stats_.callback_errors.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  // The no-consumer path: one semaphore read. The consumer_changed check notices a detach,
  // so kernel activity is switched off again even while nobody listens.
  if (__builtin_expect(usdt::correlation_consumers() == 0, 1)) {
    if (__builtin_expect(self->hooks_.consumer_changed(), 0)) self->hooks_.sync_consumers();
    return;
  }
  try {
    self->on_launch(static_cast<CbDomain>(domain), cbid,
                    static_cast<const CUpti_CallbackData *>(data));
  } catch (...) {
    // No exception may reach CUPTI: the caller has no C++ unwinding.
    self->stats_.callback_errors.fetch_add(1, std::memory_order_relaxed);
  }
}

void LaunchCallbacks::on_launch(CbDomain domain, uint32_t cbid, const CUpti_CallbackData *cb) {
  ThreadLaunch &t = t_launch;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    // The driver call nested under a runtime launch: same ID, already handled.
    if (t.active && t.correlation_id == cb->correlationId) return;
    if (hooks_.consumer_changed()) hooks_.sync_consumers();
    const uint8_t role = cbid < kMaxCbid ? (domain == CbDomain::Driver ? kRoles.driver[cbid]
                                                                       : kRoles.runtime[cbid])
                                         : static_cast<uint8_t>(kNotLaunch);
    if (role == kNotLaunch) return;  // only whole-domain subscribers see others
    t.active = true;
    t.correlation_id = cb->correlationId;
    t.domain = domain;
    t.cbid = cbid;
    t.captured = false;
    const uint64_t now = coarse_ns();
    const bool graph = role == kGraph;
    t.announce = graph ? t.graph_bucket.try_take(config_.graph_rate_limit, now)
                       : t.eager_bucket.try_take(config_.eager_rate_limit, now);
    if (!t.announce) {
      stats_.rate_limited.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    uint32_t expected_kernels = graph ? 0 : 1;
    if (graph && cb->functionParams) {
      // Every graph launch's parameters start with the exec handle (cuGraphLaunch_params,
      // cudaGraphLaunch_v10000_params and their _ptsz twins).
      const void *exec = *static_cast<void *const *>(cb->functionParams);
      const GraphTracker::ExecFacts f = graphs_.facts(exec);
      if (f.known && f.kernel_nodes == 0 && !f.has_conditional) {
        // Host functions only: no kernel will ever carry this ID (docs/cupti-facts.md, fact 8).
        t.announce = false;
        graphs_.count_hostonly_launch();
        return;
      }
      if (f.known && !f.has_conditional) expected_kernels = f.kernel_nodes;
      if (f.has_conditional) {
        uint64_t ts = 0;
        cupti_.cuptiGetTimestamp(&ts);
        graphs_.on_conditional_launch(exec, cb->correlationId, ts);
      }
    }
    // Tracked from ENTER: the kernel may complete and be flushed before our EXIT runs.
    tracker_.insert(cb->correlationId, graph ? LaunchKind::Graph : LaunchKind::Eager, now,
                    expected_kernels);
    hooks_.launch_begin();
    return;
  }
  // EXIT: only the outermost call's.
  if (!t.active || t.correlation_id != cb->correlationId || t.domain != domain || t.cbid != cbid)
    return;
  t.active = false;
  if (!t.announce) return;
  hooks_.launch_end();
  const int32_t scbid = signed_cbid(domain, cbid);
  const char *name = cb->symbolName ? cb->symbolName : cb->functionName;
  if (t.captured) {
    // Recorded into a graph by stream capture: it never runs under this ID.
    tracker_.remove(cb->correlationId);
    stats_.captured.fetch_add(1, std::memory_order_relaxed);
    usdt::graph_capture_launch(cb->correlationId, scbid, name, t.capture_graph_id,
                               t.capture_node_id);
    return;
  }
  const bool graph = (domain == CbDomain::Driver ? kRoles.driver[cbid] : kRoles.runtime[cbid]) == kGraph;
  (graph ? stats_.announced_graph : stats_.announced_eager).fetch_add(1, std::memory_order_relaxed);
  usdt::cuda_correlation(cb->correlationId, scbid, name);
  if (tracker_.pending() >= config_.flush_threshold) hooks_.request_flush();
}

void LaunchCallbacks::on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData *rd) {
  const auto *gd = rd ? static_cast<const CUpti_GraphData *>(rd->resourceDescriptor) : nullptr;
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED: {
      // A node created inside a launch call on this thread: the stream is being captured and
      // the launch is recorded into a graph instead of running (docs/cupti-facts.md, fact 5).
      ThreadLaunch &t = t_launch;
      if (!t.active) {
        graphs_.on_node_created(gd);  // graph building or instantiation
        break;
      }
      t.captured = true;
      t.capture_graph_id = 0;
      t.capture_node_id = 0;
      if (gd && gd->graph) cupti_.cuptiGetGraphId(gd->graph, &t.capture_graph_id);
      if (gd && gd->node) cupti_.cuptiGetGraphNodeId(gd->node, &t.capture_node_id);
      break;
    }
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED: graphs_.on_node_cloned(gd); break;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED: graphs_.on_exec_created(gd); break;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING: graphs_.on_exec_destroyed(gd); break;
    default: break;
  }
}

}  // namespace parcagpu
