// The CUPTI callback and the application threads' launch path: the gate, PC sampling's launch
// hooks, handing picked launches to AnnouncedLaunches and the rest to ResourceCallbacks.
#include "launch/launch_callbacks.h"

#include <algorithm>
#include <ctime>

#include "base/clock.h"
#include "base/config.h"
#include "base/log.h"
#include "base/own_cuda_calls.h"
#include "base/process_guard.h"
#include "launch/launch_path.h"
#include "pc/pc_sampling.h"
#include "trackers/graph_tracker.h"

namespace parcagpu {
namespace {

__attribute__((tls_model("initial-exec"))) thread_local ThreadLaunch t_launch;

void release_pc_gate(ThreadLaunch &t, PcSampler *pc) {
  t.gated = false;
  if (pc) pc->on_launch_exit();
}

// The callback's `this`. CUPTI passes back the userdata given to cuptiSubscribe, but a CUPTI
// (or a harness standing in for one) may pass NULL: the callback never relies on it.
LaunchCallbacks *g_self = nullptr;

uint64_t coarse_resolution_ns() {
  timespec res{};
  if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0) return 10000000;
  return static_cast<uint64_t>(res.tv_sec) * 1000000000ull + static_cast<uint64_t>(res.tv_nsec);
}

RepeatedError g_callback_exception("callbacks", "exceptions caught in the CUPTI callback");

}  // namespace

LaunchCallbacks::LaunchCallbacks(const CuptiApi &cupti, const Config &config,
                                 CorrelationTracker &tracker, GraphTracker &graphs,
                                 ActivityCollector &activity, PcSampler *pc,
                                 GraphCompletion *completion)
    : graphs_(graphs),
      pc_(pc),
      role_(config.eager_rate_limit, config.graph_rate_limit,
            std::max(coarse_resolution_ns(), kSafetyCapBurstNs)),
      announced_(cupti, config, tracker, graphs, activity, pc, completion, role_, stats_),
      resources_(cupti, graphs, pc, role_),
      nvtx_(&monotonic_ns) {
  g_self = this;
}

LaunchCallbacks::~LaunchCallbacks() {
  if (g_self == this) g_self = nullptr;
}

void CUPTIAPI LaunchCallbacks::on_callback(void * /*userdata*/, CUpti_CallbackDomain domain,
                                           CUpti_CallbackId cbid, const void *data) {
  LaunchCallbacks *self = g_self;
  if (__builtin_expect(!self || !data, 0)) return;
  // Inert in a forked child (process_guard.h): nothing of the parent's threads is there.
  if (__builtin_expect(process_guard::forked_child(), 0)) return;
  try {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
      self->resources_.on_resource(t_launch, cbid, static_cast<const CUpti_ResourceData *>(data));
      return;
    }
    if (__builtin_expect(domain == CUPTI_CB_DOMAIN_NVTX, 0)) {
      self->nvtx_.on_callback(cbid, data);
      return;
    }
    const auto *cb = static_cast<const CUpti_CallbackData *>(data);
    if (cb->callbackSite == CUPTI_API_ENTER)
      self->on_enter(static_cast<CbDomain>(domain), cbid, cb);
    else
      self->on_exit(static_cast<CbDomain>(domain), cbid, cb);
  } catch (...) {
    // No exception may reach CUPTI: the caller has no C++ unwinding.
    self->stats_.callback_errors.fetch_add(1, std::memory_order_relaxed);
    g_callback_exception.report(kErrInternal, "exception in a CUPTI callback (domain %d, cbid %u)",
                                static_cast<int>(domain), static_cast<unsigned>(cbid));
  }
}

void LaunchCallbacks::on_other_enter(CbDomain domain, uint32_t cbid, const CUpti_CallbackData *cb) {
  // Not a launch: a graph upload or instantiation (whole-domain subscribers see others too),
  // unless it is the library's own (PC sampling's graph registration).
  if (t_in_own_cuda_calls) return;
  const SubscribedCallback *sub = find_subscribed(domain, cbid);
  if (sub && sub->role == CbRole::GraphUpload) resources_.on_graph_upload(cb);
  if (sub && sub->role == CbRole::GraphInstantiate && pc_) {
    // Every instantiation's parameters start with the exec's address, then the graph
    // (cudaGraphInstantiate_v10000_params, ...WithFlags, ...WithParams and their driver
    // twins; tests/unit/lib/graph_params_test.cc holds the toolkit's structs to it).
    const auto *params = static_cast<void *const *>(cb->functionParams);
    pc_->on_graph_instantiate(params ? static_cast<CUgraph>(params[1]) : nullptr, cb->context,
                              domain == CbDomain::Runtime);
  }
}

void LaunchCallbacks::on_enter(CbDomain domain, uint32_t cbid, const CUpti_CallbackData *cb) {
  const uint8_t v = followed_role(domain, cbid);
  if (v == kNotFollowed) return;  // a copy or fill nobody takes (launch_path.h)
  if (v == 0) return on_other_enter(domain, cbid, cb);
  const uint8_t kind = v - 1;
  ThreadLaunch &t = t_launch;
  const RoleState state = role_.state.load(std::memory_order_acquire);
  const uint64_t epoch = state.epoch();
  const GateEnterResult g = gate_enter(t.g, role_.coin, kind, epoch,
                                       role_.clean_epoch.load(std::memory_order_relaxed) == epoch,
                                       domain, cbid, cb->correlationId);
  if (__builtin_expect(g.stale, 0)) {
    // The launch this thread was in never left as expected: given up.
    if (pc_) pc_->on_launch_exit();
    if (t.announce) announced_.abandon(g.stale_corr, t.holds_activity);
  }
  if (g.what == GateEnter::kNotLaunch) return;
  if (role_.pc_needs_launches.load(std::memory_order_relaxed)) {  // PC windows: at launch entries
    if (t.gated) release_pc_gate(t, pc_);  // an untracked call that never came back to us
    // A graph's first launch uploads it: not while PC sampling is enabled (P21, PcSampler).
    const bool uploads = kind == kGraphRole && cb->functionParams &&
                         graphs_.take_first_launch(*static_cast<void *const *>(cb->functionParams));
    if (uploads) pc_->on_graph_first_launch();
    pc_->on_launch_enter(cb->context, coarse_ns(), uploads,
                         kind == kGraphRole ? nullptr : cb->symbolName);
  }
  if (g.what == GateEnter::kUntracked) {
    // Not followed (maybe nested in a runtime launch whose ENTER came before the enabling), so
    // not announced. Counted at PC sampling's gate all the same, so no Stop or Disable runs
    // while it is in its call (P15): released at its EXIT.
    if (role_.pc_needs_launches.load(std::memory_order_relaxed)) {
      t.gated = true;
      t.gated_corr = cb->correlationId;
    }
    return;
  }
  t.captured = false;
  t.holds_activity = false;
  t.conditional_watched = false;
  t.announce = g.what == GateEnter::kPicked && announced_.admit(state, kind);
  if (t.announce)
    announced_.begin(t, kind, cb);
  else if (kind == kGraphRole && graphs_.conditional_execs_live())
    announced_.watch_unannounced_conditional(t, cb);
}

void LaunchCallbacks::on_exit(CbDomain domain, uint32_t cbid, const CUpti_CallbackData *cb) {
  // A copy or fill not followed at its ENTER is not the call the gate follows (kOther below).
  const uint8_t v = role_of(domain, cbid) & ~kMemoryLaunchBit;
  if (v == 0) return;
  ThreadLaunch &t = t_launch;
  if (t.gated && t.gated_corr == cb->correlationId) release_pc_gate(t, pc_);
  const uint64_t epoch = role_.state.load(std::memory_order_acquire).epoch();
  const GateExit ends = gate_exit(t.g, epoch, domain, cbid);
  if (ends == GateExit::kOther) return;  // not the end of the call we followed
  if (t.conditional_watched) announced_.settle_unannounced_conditional(t, cb);
  // Counted only if its ENTER was; released whatever the epoch: a count kept past its call
  // would hold off PC sampling's Stop and Disable until their wait times out, on every
  // attempt, for the rest of the process (and its thread would never be counted again).
  if (pc_) pc_->on_launch_exit();
  if (ends == GateExit::kEndsEarlier) return;  // its announcement was settled at the change
  if (!t.announce) return;
  if (t.g.correlation_id != cb->correlationId) {
    // Its EXIT carries another ID than its ENTER: which one its kernels carry is unknown.
    announced_.abandon(t.g.correlation_id, t.holds_activity);
    return;
  }
  announced_.end(t, t.g.kind, domain, cbid, cb);
}

}  // namespace parcagpu
