// The mock CUPTI, libcupti.so.13: subscription and callbacks, correlation IDs, the CUPTI id
// queries, and the report of what the library left behind. Activity records and buffers live in
// cupti_mock_activity.cc, fault injection in cupti_mock_faults.cc.
//
// Like real CUPTI it delivers a callback only for a (domain, cbid) pair its one subscriber has
// enabled, and it instruments the (mock) driver from the inside: its constructor registers the
// hooks through which the driver reports every API call, resource event and kernel.
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#pragma GCC visibility push(default)
#include <cupti.h>

#include "mock_cupti_control.h"
#pragma GCC visibility pop

#include "cupti_mock_internal.h"
#include "parcagpu/cbid_table.h"

// The opaque subscriber handle of cupti_callbacks.h.
struct CUpti_Subscriber_st {
  CUpti_CallbackFunc callback;
  void *userdata;
};

namespace mockcupti {
namespace {

constexpr uint32_t kNumDomains = CUPTI_CB_DOMAIN_SIZE;
constexpr uint32_t kMaxCbid = 1024;  // above every domain's size (static_assert in faults)
constexpr uint32_t kWords = kMaxCbid / 64;

// The enabled set: one bit per (domain, cbid), read on every callback without a lock.
std::atomic<uint64_t> g_enabled[kNumDomains][kWords];
std::atomic<uint64_t> g_ever_enabled[kNumDomains][kWords];
std::atomic<CUpti_Subscriber_st *> g_subscriber{nullptr};
std::mutex g_subscribe_mutex;  // subscribe / unsubscribe / finalize; never held in a callback

// One process-wide counter, starting high like real CUPTI's (122 and 125 seen on the H100,
// docs/cupti-facts.md).
std::atomic<uint32_t> g_next_correlation_id{100};
thread_local mockbridge::ApiFrame *t_frame = nullptr;

bool bit(const std::atomic<uint64_t> (&set)[kNumDomains][kWords], uint32_t domain, uint32_t cbid) {
  return (set[domain][cbid / 64].load(std::memory_order_relaxed) >> (cbid % 64)) & 1;
}

void set_bit(uint32_t domain, uint32_t cbid, bool on) {
  const uint64_t mask = 1ull << (cbid % 64);
  if (on) {
    g_enabled[domain][cbid / 64].fetch_or(mask, std::memory_order_relaxed);
    g_ever_enabled[domain][cbid / 64].fetch_or(mask, std::memory_order_relaxed);
  } else {
    g_enabled[domain][cbid / 64].fetch_and(~mask, std::memory_order_relaxed);
  }
}

bool valid_pair(uint32_t domain, uint32_t cbid) {
  const uint32_t size = domain_size(domain);
  return size != 0 && cbid > 0 && cbid < size;
}

bool is_current(CUpti_SubscriberHandle subscriber) {
  return subscriber && subscriber == g_subscriber.load(std::memory_order_acquire);
}

// Enables or disables (domain, cbid) as the subscriber asked; MOCK_CUPTI_REFUSE'd pairs stay off.
void enable_pair(uint32_t domain, uint32_t cbid, bool on) {
  if (on && enable_refused(static_cast<CUpti_CallbackDomain>(domain), cbid)) {
    Stats::add(stat::refused_enables);
    return;
  }
  set_bit(domain, cbid, on);
}

void enable_whole_domain(uint32_t domain, bool on) {
  for (uint32_t cbid = 1; cbid < domain_size(domain); ++cbid) enable_pair(domain, cbid, on);
}

void dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data) {
  CUpti_Subscriber_st *s = g_subscriber.load(std::memory_order_acquire);
  if (s && domain < kNumDomains && cbid < kMaxCbid && bit(g_enabled, domain, cbid)) {
    Stats::add(stat::callbacks_dispatched);
    // Launch callbacks apart, so that a measure of what launches cost is not confused by the
    // graph API callbacks the library always takes.
    if (parcagpu::is_launch_cbid(static_cast<parcagpu::CbDomain>(domain), cbid))
      Stats::add(stat::launch_callbacks_dispatched);
    s->callback(s->userdata, domain, cbid, data);
  } else {
    Stats::add(stat::callbacks_suppressed);
  }
}

// ---- Hooks called by the mock driver ----

void api_enter(mockbridge::ApiFrame *frame) {
  frame->outer = t_frame;
  t_frame = frame;
  // A driver call made by a runtime call shares its correlation ID (docs/cupti-facts.md, fact 1).
  frame->data.correlationId = frame->outer
                                  ? frame->outer->data.correlationId
                                  : g_next_correlation_id.fetch_add(1, std::memory_order_relaxed);
  frame->data.correlationData = &frame->correlation_data;
  frame->data.callbackSite = CUPTI_API_ENTER;
  dispatch(frame->domain, frame->cbid, &frame->data);
}

void api_exit(mockbridge::ApiFrame *frame) {
  frame->data.callbackSite = CUPTI_API_EXIT;
  dispatch(frame->domain, frame->cbid, &frame->data);
  t_frame = frame->outer;
}

void domain_event(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, void *data) {
  // CUPTI knows a module's functions from the moment it is loaded (PC records name them).
  const auto *rd = static_cast<const CUpti_ResourceData *>(data);
  uint32_t context_id = 0;
  const bool module_event =
      domain == CUPTI_CB_DOMAIN_RESOURCE && rd &&
      (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED ||
       cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING) &&
      mock_bridge_context_ids(rd->context, &context_id, nullptr) == CUDA_SUCCESS;
  if (module_event && cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
    const auto *m = static_cast<const CUpti_ModuleResourceData *>(rd->resourceDescriptor);
    if (m) pc_module_loaded(context_id, m->pCubin, m->cubinSize);
  }
  dispatch(domain, cbid, data);
  if (module_event && cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING)
    pc_module_unloaded(context_id);
}

// A child forked while the parent ran other threads may call only async-signal-safe functions:
// any lock another thread held at the fork (the allocator's, under a sanitizer) stays held. Such
// a child (parcagpu-mockapp --fork-children) prints no exit report; one forked from a
// single-threaded parent (--procs) does. The parent's thread count is read in the prepare
// handler, without allocating.
int g_threads_at_fork = 0;
bool g_child_of_threads = false;

int count_threads() {
  char buf[1024];
  const int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *p = std::strrchr(buf, ')');  // the command may hold spaces
  for (int field = 2; p && *p && field < 20; ++p)
    if (*p == ' ') ++field;
  return p ? std::atoi(p) : 0;  // field 20: num_threads
}

__attribute__((constructor)) void register_exit_report_fork_handler() {
  pthread_atfork([] { g_threads_at_fork = count_threads(); }, nullptr,
                 [] { g_child_of_threads = g_threads_at_fork > 1; });
}

void process_exit() {
  if (g_child_of_threads) return;
  const std::string line = "MOCK_CUPTI_EXIT " + report_json() + "\n";
  // One write: forked processes share stderr and their lines must not interleave.
  ssize_t unused = write(STDERR_FILENO, line.data(), line.size());
  (void)unused;
}

constexpr mockbridge::CuptiHooks kHooks = {
    api_enter,  api_exit,          domain_event,          kernel_activity_enabled,
    kernel_ran, pc_graph_uploaded, pc_graph_instantiated, pc_graph_destroyed,
    process_exit, activity_kind_enabled, memory_ran,
};

size_t list_pairs(const std::atomic<uint64_t> (&set)[kNumDomains][kWords], MockCuptiPair *out,
                  size_t capacity) {
  size_t n = 0;
  for (uint32_t d = 1; d < kNumDomains; ++d)
    for (uint32_t c = 0; c < kMaxCbid; ++c)
      if (bit(set, d, c)) {
        if (out && n < capacity) out[n] = MockCuptiPair{d, c};
        ++n;
      }
  return n;
}

// "DRIVER_API:514" for every pair set in `set`.
std::vector<std::string> pair_labels(const std::atomic<uint64_t> (&set)[kNumDomains][kWords]) {
  std::vector<std::string> labels;
  for (uint32_t d = 1; d < kNumDomains; ++d)
    for (uint32_t c = 0; c < kMaxCbid; ++c)
      if (bit(set, d, c)) labels.push_back(std::string(domain_name(d)) + ":" + std::to_string(c));
  return labels;
}

// A driver-side ID lookup as a CUPTI result: `otherwise` when the driver said no.
CUptiResult bridged(CUresult r, CUptiResult otherwise) {
  return r == CUDA_SUCCESS ? CUPTI_SUCCESS : error(otherwise);
}

}  // namespace

// An NVTX call made through the mock's NVTX injection (cupti_mock_nvtx.cc): dispatched like real
// CUPTI's, once per call and only while the subscriber enabled its cbid.
void nvtx_event(CUpti_CallbackId cbid, const void *data) {
  dispatch(CUPTI_CB_DOMAIN_NVTX, cbid, data);
}

std::string report_json() {
  MockCuptiStats st;
  mock_cupti_get_stats(&st);
  nlohmann::ordered_json stats;
#define MOCK_CUPTI_STAT_KEY(name) stats[#name] = st.name;
  MOCK_CUPTI_STATS(MOCK_CUPTI_STAT_KEY)
#undef MOCK_CUPTI_STAT_KEY
  const nlohmann::ordered_json report = {
      {"pid", getpid()},
      {"subscribed", mock_cupti_subscribed() != 0},
      {"still_enabled", pair_labels(g_enabled)},
      {"ever_enabled", pair_labels(g_ever_enabled)},
      {"activity_kinds_still_enabled", activity_kinds(false)},
      {"activity_kinds_ever_enabled", activity_kinds(true)},
      {"activity_buffers", activity_buffers_placed()},
      {"stats", stats},
      {"pc_sampling", pc_report()},
  };
  return report.dump();
}

}  // namespace mockcupti

using namespace mockcupti;

extern "C" {

// ---- Subscription and callbacks ----

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                           void *userdata) {
  MOCK_CUPTI_FAULT_POINT(cuptiSubscribe);
  if (!subscriber || !callback) return error(CUPTI_ERROR_INVALID_PARAMETER);
  std::lock_guard<std::mutex> lock(g_subscribe_mutex);
  if (g_subscriber.load(std::memory_order_relaxed))
    return error(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
  // A new subscriber starts with nothing enabled. Subscribers are never freed: a callback racing
  // with cuptiUnsubscribe on another thread may still read the old one. They stay listed, so
  // LeakSanitizer sees them reachable.
  for (auto &domain : g_enabled)
    for (auto &word : domain) word.store(0, std::memory_order_relaxed);
  // MOCK_CUPTI_NULL_USERDATA=1: call back with NULL userdata, as some CUPTI harnesses do.
  static const bool null_userdata = [] {
    const char *v = std::getenv("MOCK_CUPTI_NULL_USERDATA");
    return v && *v && *v != '0';
  }();
  static auto *all_subscribers = new std::vector<CUpti_Subscriber_st *>;
  auto *s = new CUpti_Subscriber_st{callback, null_userdata ? nullptr : userdata};
  all_subscribers->push_back(s);
  g_subscriber.store(s, std::memory_order_release);
  *subscriber = s;
  Stats::add(stat::subscribe_calls);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  MOCK_CUPTI_FAULT_POINT(cuptiUnsubscribe);
  std::lock_guard<std::mutex> lock(g_subscribe_mutex);
  if (!is_current(subscriber)) return error(CUPTI_ERROR_INVALID_PARAMETER);
  // Dispatch stops; the enabled set stays readable, so the exit report shows what the library
  // left enabled (teardown must disable what it enabled).
  g_subscriber.store(nullptr, std::memory_order_release);
  Stats::add(stat::unsubscribe_calls);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  MOCK_CUPTI_FAULT_POINT(cuptiEnableCallback);
  if (!is_current(subscriber) || !valid_pair(domain, cbid))
    return error(CUPTI_ERROR_INVALID_PARAMETER);
  enable_pair(domain, cbid, enable != 0);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                              CUpti_CallbackDomain domain) {
  MOCK_CUPTI_FAULT_POINT(cuptiEnableDomain);
  if (!is_current(subscriber) || domain_size(domain) == 0)
    return error(CUPTI_ERROR_INVALID_PARAMETER);
  enable_whole_domain(domain, enable != 0);
  if (enable) Stats::add(stat::whole_domain_enables);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableAllDomains(uint32_t enable, CUpti_SubscriberHandle subscriber) {
  MOCK_CUPTI_FAULT_POINT(cuptiEnableAllDomains);
  if (!is_current(subscriber)) return error(CUPTI_ERROR_INVALID_PARAMETER);
  for (uint32_t d = 1; d < kNumDomains; ++d) enable_whole_domain(d, enable != 0);
  if (enable) Stats::add(stat::whole_domain_enables);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetCallbackState(uint32_t *enable, CUpti_SubscriberHandle subscriber,
                                  CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  MOCK_CUPTI_FAULT_POINT(cuptiGetCallbackState);
  if (!enable || !is_current(subscriber) || !valid_pair(domain, cbid))
    return error(CUPTI_ERROR_INVALID_PARAMETER);
  *enable = bit(g_enabled, domain, cbid);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiFinalize(void) {
  MOCK_CUPTI_FAULT_POINT(cuptiFinalize);
  Stats::add(stat::finalize_calls);
  finalize_activity();  // delivers what is buffered, disables all activity
  std::lock_guard<std::mutex> lock(g_subscribe_mutex);
  g_subscriber.store(nullptr, std::memory_order_release);
  return CUPTI_SUCCESS;
}

// ---- Version, results, time ----

CUptiResult cuptiGetVersion(uint32_t *version) {
  MOCK_CUPTI_FAULT_POINT(cuptiGetVersion);
  if (!version) return error(CUPTI_ERROR_INVALID_PARAMETER);
  // 130001 as the H100's CUPTI 13.0 (docs/cupti-facts.md), or 19 (CUDA 12.0).
  *version = api_version();
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char **str) {
  MOCK_CUPTI_FAULT_POINT(cuptiGetResultString);
  if (!str) return error(CUPTI_ERROR_INVALID_PARAMETER);
  const char *name = result_name(result);
  if (!name) {
    *str = "CUPTI_ERROR_<unrecognized result>";
    return error(CUPTI_ERROR_INVALID_PARAMETER);
  }
  *str = name;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiGetLastError(void) {
  MOCK_CUPTI_FAULT_POINT(cuptiGetLastError);
  return take_last_error();
}

CUptiResult cuptiGetTimestamp(uint64_t *timestamp) {
  MOCK_CUPTI_FAULT_POINT(cuptiGetTimestamp);
  if (!timestamp) return error(CUPTI_ERROR_INVALID_PARAMETER);
  *timestamp = mockbridge::now_ns();
  return CUPTI_SUCCESS;
}

// ---- IDs of driver objects ----

CUptiResult cuptiGetGraphId(CUgraph graph, uint32_t *id) {
  MOCK_CUPTI_FAULT_POINT(cuptiGetGraphId);
  return bridged(mock_bridge_graph_id(graph, id), CUPTI_ERROR_INVALID_PARAMETER);
}

CUptiResult cuptiGetGraphNodeId(CUgraphNode node, uint64_t *id) {
  MOCK_CUPTI_FAULT_POINT(cuptiGetGraphNodeId);
  return bridged(mock_bridge_graph_node_id(node, id), CUPTI_ERROR_INVALID_PARAMETER);
}

CUptiResult cuptiGetGraphExecId(CUgraphExec exec, uint32_t *id) {
  MOCK_CUPTI_FAULT_POINT(cuptiGetGraphExecId);
  return bridged(mock_bridge_graph_exec_id(exec, id), CUPTI_ERROR_INVALID_PARAMETER);
}

CUptiResult cuptiGetContextId(CUcontext context, uint32_t *context_id) {
  MOCK_CUPTI_FAULT_POINT(cuptiGetContextId);
  if (!context_id) return error(CUPTI_ERROR_INVALID_PARAMETER);
  return bridged(mock_bridge_context_ids(context, context_id, nullptr),
                 CUPTI_ERROR_INVALID_CONTEXT);
}

CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t *device_id) {
  MOCK_CUPTI_FAULT_POINT(cuptiGetDeviceId);
  if (!device_id) return error(CUPTI_ERROR_INVALID_PARAMETER);
  return bridged(mock_bridge_context_ids(context, nullptr, device_id), CUPTI_ERROR_INVALID_CONTEXT);
}

CUptiResult cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t per_thread_stream,
                               uint32_t *stream_id) {
  MOCK_CUPTI_FAULT_POINT(cuptiGetStreamIdEx);
  if (!stream_id) return error(CUPTI_ERROR_INVALID_PARAMETER);
  const CUresult r = mock_bridge_stream_id(context, stream, per_thread_stream, stream_id);
  if (r == CUDA_SUCCESS) return CUPTI_SUCCESS;
  return error(r == CUDA_ERROR_INVALID_CONTEXT ? CUPTI_ERROR_INVALID_CONTEXT
                                               : CUPTI_ERROR_INVALID_STREAM);
}

// ---- Introspection (mock_cupti_control.h) ----

const char *mock_cupti_domain_name(uint32_t domain) { return domain_name(domain); }

size_t mock_cupti_enabled_callbacks(MockCuptiPair *out, size_t capacity) {
  return list_pairs(g_enabled, out, capacity);
}

size_t mock_cupti_ever_enabled_callbacks(MockCuptiPair *out, size_t capacity) {
  return list_pairs(g_ever_enabled, out, capacity);
}

int mock_cupti_callback_enabled(uint32_t domain, uint32_t cbid) {
  return domain < kNumDomains && cbid < kMaxCbid && bit(g_enabled, domain, cbid);
}

uint64_t mock_cupti_whole_domain_enables(void) { return Stats::sum(stat::whole_domain_enables); }

int mock_cupti_subscribed(void) { return g_subscriber.load(std::memory_order_acquire) != nullptr; }

void mock_cupti_get_stats(MockCuptiStats *out) {
  if (out) Stats::sum_into(out);
}

size_t mock_cupti_report_json(char *out, size_t capacity) {
  const std::string json = report_json();
  if (out && capacity) std::snprintf(out, capacity, "%s", json.c_str());
  return json.size();
}

}  // extern "C"

__attribute__((constructor)) static void mock_cupti_load() {
  load_personality();
  load_fault_injection();
  mock_bridge_register_cupti(&kHooks);
}
