// The launch path of the CUPTI subscriber (the application's threads: gate, admission, the
// announced launches' work, a claimant closing its window), subscribing and unsubscribing. The
// watcher's side (toggling, reconcile) is launch_roles.cc, the non-launch callbacks
// resource_callbacks.cc.
#include "launch_callbacks.h"

#include <ctime>

#include "activity.h"
#include "clock.h"
#include "correlation_tracker.h"
#include "graph_completion.h"
#include "graph_tracker.h"
#include "log.h"
#include "pc_sampling.h"
#include "process_guard.h"
#include "usdt.h"

namespace parcagpu {
namespace {

// Role of each launch cbid, indexed directly: the launch path must not search the table.
// 0 = not a launch callback, 1 + its kind (kEagerRole, kGraphRole) otherwise.
constexpr uint32_t kMaxCbid = 1024;
struct RoleIndex {
  uint8_t driver[kMaxCbid] = {};
  uint8_t runtime[kMaxCbid] = {};
};
constexpr RoleIndex make_role_index() {
  RoleIndex idx;
  for (const auto &cb : kSubscribedCallbacks) {
    if (!is_launch_role(cb.role)) continue;
    const uint8_t v = 1 + (cb.role == CbRole::GraphLaunch ? kGraphRole : kEagerRole);
    if (cb.domain == CbDomain::Driver) idx.driver[cb.cbid] = v;
    if (cb.domain == CbDomain::Runtime) idx.runtime[cb.cbid] = v;
  }
  return idx;
}
constexpr RoleIndex kRoles = make_role_index();
static_assert(kRoles.driver[514] == 1 + kGraphRole && kRoles.runtime[211] == 1 + kEagerRole);

inline uint8_t role_of(CbDomain domain, uint32_t cbid) {
  if (cbid >= kMaxCbid) return 0;
  return domain == CbDomain::Driver ? kRoles.driver[cbid] : kRoles.runtime[cbid];
}

// What this thread is doing, as far as the callbacks it received tell. Trivially constructible
// and initial-exec TLS: no guard, no __tls_get_addr on the launch path.
struct ThreadLaunch {
  // The outermost launch call in flight (announced or not), this thread's nesting knowledge and
  // its coin (launch_gate.h).
  GateThread g;
  bool announce;
  bool windowed;        // announced through a sampling window (else a continuous subscription)
  bool captured;        // a graph node was created inside it: recorded by stream capture, not run
  bool holds_activity;  // announced and counted in by ActivityCollector::launch_begin: owes its
                        // launch_end
  // A suspect driver call (see clean_epoch) counted at PC sampling's gate, released at its EXIT.
  bool gated;
  uint32_t gated_corr;
  uint32_t capture_graph_id;
  uint64_t capture_node_id;
};
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
RepeatedError g_timestamp_failed("callbacks", "cuptiGetTimestamp failed");
RepeatedError g_capture_ids_failed("callbacks", "graph IDs of captured launches unknown");

// The stream a graph launch call was given: every graph launch's parameters are {exec, stream}
// (cuGraphLaunch_params, cudaGraphLaunch_v10000_params and their _ptsz twins), and the _ptsz
// calls' NULL stream is the calling thread's per-thread default stream.
CUstream graph_launch_stream(CbDomain domain, uint32_t cbid, const CUpti_CallbackData *cb) {
  CUstream stream = nullptr;
  if (cb->functionParams) stream = static_cast<const CUstream *>(cb->functionParams)[1];
  const bool per_thread =
      (domain == CbDomain::Driver && cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) ||
      (domain == CbDomain::Runtime && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000);
  return stream == nullptr && per_thread ? CU_STREAM_PER_THREAD : stream;
}

}  // namespace

LaunchCallbacks::LaunchCallbacks(const CuptiApi &cupti, const Config &config,
                                 CorrelationTracker &tracker, GraphTracker &graphs,
                                 ActivityCollector &activity, PcSampler *pc,
                                 GraphCompletion *completion)
    : cupti_(cupti),
      config_(config),
      tracker_(tracker),
      graphs_(graphs),
      activity_(activity),
      pc_(pc),
      completion_(completion),
      sub_(cupti, config),
      role_(config.eager_rate_limit, config.graph_rate_limit,
            std::max(coarse_resolution_ns(), kSafetyCapBurstNs)) {
  role_.rate_allows_windows = rate_allows_windows(config.eager_rate_limit, config.graph_rate_limit);
  role_.interval_ns = window_interval_ns(window_rate(role_.limit, role_.window_counts));
  role_.coin.set_mean(role_.rate_allows_windows ? kWindowMeanLaunches : 1);
}

bool LaunchCallbacks::subscribe() {
  g_self = this;
  if (!sub_.subscribe(&on_callback, this)) return false;
  role_.cbids = sub_.launch_cbids();
  if (!sub_.enable_from_start()) return false;
  debug_log(
      "subscribed: %zu callbacks from the start; %zu launch callbacks while a consumer "
      "listens, %s; rate limits: eager %g/s, graph %g/s",
      sub_.from_start().size(), role_.cbids.size(),
      role_.rate_allows_windows ? "in sampling windows" : "continuously", config_.eager_rate_limit,
      config_.graph_rate_limit);
  return true;
}

void LaunchCallbacks::unsubscribe() {
  if (!sub_.subscribed()) return;
  {
    Role &r = role_;
    std::lock_guard<std::mutex> lock(r.toggle_mu);
    const RoleState s = r.state.exchange(r.state.load().with(kOff));
    if (s.phase() != kOff) set_cbids_locked(r, false);  // kOff: they are off already
  }
  sub_.unsubscribe();
}

// ---- The launch path ----

void CUPTIAPI LaunchCallbacks::on_callback(void * /*userdata*/, CUpti_CallbackDomain domain,
                                           CUpti_CallbackId cbid, const void *data) {
  LaunchCallbacks *self = g_self;
  if (__builtin_expect(!self || !data, 0)) return;
  // Inert in a forked child (process_guard.h): nothing of the parent's threads is there.
  if (__builtin_expect(process_guard::forked_child(), 0)) return;
  try {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
      self->on_resource(cbid, static_cast<const CUpti_ResourceData *>(data));
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

void LaunchCallbacks::on_enter(CbDomain domain, uint32_t cbid, const CUpti_CallbackData *cb) {
  const uint8_t v = role_of(domain, cbid);
  if (v == 0) {
    // Not a launch: a graph upload or instantiation (whole-domain subscribers see others too).
    const SubscribedCallback *sub = find_subscribed(domain, cbid);
    if (sub && sub->role == CbRole::GraphUpload) on_graph_upload(cb);
    if (sub && sub->role == CbRole::GraphInstantiate && pc_) pc_->on_graph_instantiate();
    return;
  }
  const uint8_t kind = v - 1;
  Role &r = role_;
  ThreadLaunch &t = t_launch;
  const RoleState state = r.state.load(std::memory_order_acquire);
  const uint64_t epoch = state.epoch();
  const GateEnterResult g =
      gate_enter(t.g, r.coin, kind, epoch, r.clean_epoch.load(std::memory_order_relaxed) == epoch,
                 domain, cbid, cb->correlationId);
  if (__builtin_expect(g.stale, 0)) {
    // The launch this thread was in never left as expected: given up.
    if (pc_) pc_->on_launch_exit();
    if (t.announce) abandon(r, epoch, g.stale_corr, t.windowed, t.holds_activity);
  }
  if (g.what == GateEnter::kNotLaunch) return;
  // PC sampling's windows open and close at launch entries, announced or not.
  if (pc_needs_launches_.load(std::memory_order_relaxed)) {
    if (t.gated) release_pc_gate(t, pc_);  // an untracked call that never came back to us
    // A graph's first launch uploads it: not while PC sampling is enabled (P21, PcSampler).
    const bool uploads = kind == kGraphRole && cb->functionParams &&
                         graphs_.take_first_launch(*static_cast<void *const *>(cb->functionParams));
    if (uploads) pc_->on_graph_first_launch();
    pc_->on_launch_enter(cb->context, coarse_ns(), uploads);
  }
  if (g.what == GateEnter::kUntracked) {
    // Not followed (maybe nested in a runtime launch whose ENTER came before the enabling), so
    // not announced. Counted at PC sampling's gate all the same, so no Stop or Disable runs
    // while it is in its call (P15): released at its EXIT.
    if (pc_needs_launches_.load(std::memory_order_relaxed)) {
      t.gated = true;
      t.gated_corr = cb->correlationId;
    }
    return;
  }
  t.captured = false;
  t.holds_activity = false;
  t.windowed = state.phase() == kOpen;
  t.announce = g.what == GateEnter::kPicked && admit(r, state, kind, cb->correlationId);
  if (t.announce) begin_announced(r, state, kind, cb);
}

bool LaunchCallbacks::admit(Role &r, RoleState state, uint8_t kind, uint32_t correlation_id) {
  // Picked by the coin: the one probability every launch has. A launch PC sampling samples is
  // no exception (announcing every launch of a PC window over-weighted whatever ran then, at
  // the slower durations PC sampling gives; its samples go out with correlation ID 0).
  switch (admission(r.limit[kind], state.phase(), usdt::correlation_consumers() != 0)) {
    case Admission::kRefused:
      return false;
    case Admission::kClaim: {
      // The time goes first: the watcher must never read an older claim's time for this one.
      r.claimed_at_ns.store(coarse_ns(), std::memory_order_relaxed);
      RoleState expected = state;  // the epoch too: a window of a later epoch is not ours
      if (!r.state.compare_exchange_strong(expected, state.with(kClaimed))) return false;
      r.claim_corr.store(correlation_id, std::memory_order_relaxed);
      return true;
    }
    case Admission::kContinuous:
      break;
  }
  // The coin meets the rate limits on average; the gate only caps the moment a launch rate
  // jumps, before the watcher has set the coin's mean for it.
  if (!r.safety_cap[kind].try_take(coarse_ns())) {
    stats_.rate_limited.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // Counted in flight before the phase is checked again, so the watcher (which marks
  // kDraining before it reads the count) never turns the cbids off under an admitted launch.
  r.inflight.fetch_add(1);
  if (r.state.load() != state) {
    r.inflight.fetch_sub(1);
    return false;
  }
  return true;
}

// An admitted launch that must not be announced (host functions only) gives its turn back.
void LaunchCallbacks::withdraw_admission(Role &r, RoleState state) {
  if (state.phase() == kOpen) {
    RoleState claimed = state.with(kClaimed);
    r.state.compare_exchange_strong(claimed, state.with(kOpen));  // the next launch may take it
  } else {
    r.inflight.fetch_sub(1);
  }
}

// The end of an admitted launch, whichever way it ends. A windowed one hands its window over
// for closing; false if the watcher abandoned it already (and did the cleaning up). A continuous
// one leaves the in-flight count.
bool LaunchCallbacks::finish_admission(Role &r, uint64_t epoch, bool windowed) {
  if (!windowed) {
    r.inflight.fetch_sub(1);
    return true;
  }
  RoleState claimed{epoch, kClaimed};
  return r.state.compare_exchange_strong(claimed, RoleState{epoch, kClosing});
}

void LaunchCallbacks::abandon(Role &r, uint64_t epoch, uint32_t correlation_id, bool windowed,
                              bool holds_activity) {
  if (!finish_admission(r, epoch, windowed)) return;
  tracker_.remove(correlation_id);
  if (holds_activity) activity_.launch_end();
  stats_.abandoned.fetch_add(1, std::memory_order_relaxed);
  close_if_requested(r);
}

void LaunchCallbacks::begin_announced(Role &r, RoleState state, uint8_t kind,
                                      const CUpti_CallbackData *cb) {
  ThreadLaunch &t = t_launch;
  const bool graph = kind == kGraphRole;
  uint32_t expected_kernels = graph ? 0 : 1;
  const void *conditional_exec = nullptr;  // registered as an open launch of its exec
  if (graph && cb->functionParams) {
    // Every graph launch's parameters start with the exec handle (cuGraphLaunch_params,
    // cudaGraphLaunch_v10000_params and their _ptsz twins).
    const void *exec = *static_cast<void *const *>(cb->functionParams);
    const GraphTracker::ExecFacts f = graphs_.on_launch(exec);
    if (f.known && f.kernel_nodes == 0 && !f.has_conditional) {
      // Host functions only: no kernel will ever carry this ID (docs/cupti-facts.md, fact 8).
      t.announce = false;
      withdraw_admission(r, state);
      graphs_.count_hostonly_launch();
      return;
    }
    if (f.known && !f.has_conditional) expected_kernels = f.kernel_nodes;
    if (f.has_conditional) {
      uint64_t ts = 0;
      if (const CUptiResult tr = cupti_.cuptiGetTimestamp(&ts);
          tr != CUPTI_SUCCESS && cupti_.available(cupti_.cuptiGetTimestamp))
        g_timestamp_failed.report(tr,
                                  "cuptiGetTimestamp failed: %s; conditional body kernels of "
                                  "queued launches are attributed by launch order alone",
                                  cupti_result_string(cupti_, tr));
      graphs_.on_conditional_launch(exec, cb->correlationId, ts);
      conditional_exec = exec;
    }
  }
  // Tracked from ENTER: the kernel may complete and be flushed before our EXIT runs. A full
  // tracker refuses it: not announced, as no kernel of it could be matched (counted there).
  // Not tracked while no consumer wants kernels (one that attached cuda_correlation alone, say):
  // no record would come to match it.
  if (!activity_.armed()) {
    // A kernel consumer attached that the watcher has not armed kernel collection for yet (it
    // sees the semaphores every 100 ms): this launch's kernels would never be collected, a
    // silent loss for that consumer. Not announced.
    if (usdt::activity_batch_consumers() != 0 || usdt::kernel_executed_consumers() != 0) {
      t.announce = false;
      withdraw_admission(r, state);
    }
    return;
  }
  if (!tracker_.insert(cb->correlationId, graph ? LaunchKind::Graph : LaunchKind::Eager,
                       coarse_ns(), expected_kernels)) {
    if (conditional_exec) graphs_.on_conditional_unannounced(conditional_exec, cb->correlationId);
    t.announce = false;
    withdraw_admission(r, state);
    return;
  }
  t.holds_activity = activity_.launch_begin();
  if (state.phase() == kOpen)
    r.claim_holds_activity.store(t.holds_activity, std::memory_order_relaxed);
}

void LaunchCallbacks::on_exit(CbDomain domain, uint32_t cbid, const CUpti_CallbackData *cb) {
  const uint8_t v = role_of(domain, cbid);
  if (v == 0) return;
  Role &r = role_;
  ThreadLaunch &t = t_launch;
  if (t.gated && t.gated_corr == cb->correlationId) release_pc_gate(t, pc_);
  const uint64_t epoch = r.state.load(std::memory_order_acquire).epoch();
  const GateExit ends = gate_exit(t.g, epoch, domain, cbid);
  if (ends == GateExit::kOther) return;  // not the end of the call we followed
  // Counted only if its ENTER was; released whatever the epoch: a count kept past its call
  // would hold off PC sampling's Stop and Disable until their wait times out, on every
  // attempt, for the rest of the process (and its thread would never be counted again).
  if (pc_) pc_->on_launch_exit();
  if (ends == GateExit::kEndsEarlier) return;  // its announcement was settled at the change
  if (!t.announce) return;
  if (t.g.correlation_id != cb->correlationId) {
    // Its EXIT carries another ID than its ENTER: which one its kernels carry is unknown.
    abandon(r, epoch, t.g.correlation_id, t.windowed, t.holds_activity);
    return;
  }
  end_announced(r, epoch, t.g.kind, domain, cbid, cb);
}

void LaunchCallbacks::end_announced(Role &r, uint64_t epoch, uint8_t kind, CbDomain domain,
                                    uint32_t cbid, const CUpti_CallbackData *cb) {
  ThreadLaunch &t = t_launch;
  if (!finish_admission(r, epoch, t.windowed)) return;  // abandoned by the watcher meanwhile
  // A graph's kernels run after its call returns, and one that finishes while kernel activity
  // is off gets a wrong end timestamp (docs/cupti-facts.md): activity stays on until the GPU is
  // past the launch. Eager kernels' records are right either way.
  if (t.holds_activity && !(kind == kGraphRole && !t.captured && completion_ &&
                            completion_->watch(graph_launch_stream(domain, cbid, cb))))
    activity_.launch_end();
  const int32_t scbid = signed_cbid(domain, cbid);
  const char *name = cb->symbolName ? cb->symbolName : cb->functionName;
  if (t.captured) {
    // Recorded into a graph by stream capture: it never runs under this ID.
    tracker_.remove(cb->correlationId);
    stats_.captured.fetch_add(1, std::memory_order_relaxed);
    // Its clones are fired live from now on, until its graph is destroyed.
    graphs_.note_capture_node(t.capture_graph_id, t.capture_node_id);
    usdt::graph_capture_launch(cb->correlationId, scbid, name, t.capture_graph_id,
                               t.capture_node_id);
  } else if (usdt::correlation_consumers() != 0) {
    (kind == kGraphRole ? stats_.announced_graph : stats_.announced_eager)
        .fetch_add(1, std::memory_order_relaxed);
    usdt::cuda_correlation(cb->correlationId, scbid, name);
    if (pc_ && pc_needs_launches_.load(std::memory_order_relaxed))
      pc_->note_announced(cb->correlationId);
  } else {
    // The consumer left during the call: nobody will look for its kernels.
    tracker_.remove(cb->correlationId);
    stats_.left_unannounced.fetch_add(1, std::memory_order_relaxed);
  }
  if (tracker_.pending() >= config_.flush_threshold) activity_.request_flush();
  close_if_requested(r);  // windowed: disables the role's cbids here, unless the watcher holds them
}

// The claimant marks the window kClosing and closes it here, unless the watcher holds the lock
// (enabling another role's... or this one's cbids): then the watcher closes it when it lets go.
// Both sides mark first and try the lock after, so one of them always sees the mark with the
// lock free.
void LaunchCallbacks::close_if_requested(Role &r) {
  while (r.state.load().phase() == kClosing && r.toggle_mu.try_lock()) {
    const RoleState s = r.state.load();
    if (s.phase() == kClosing) {
      set_cbids_locked(r, false);
      r.state.store(s.with(kOff));
    }
    r.toggle_mu.unlock();
  }
}

// A graph node created inside a launch call on this thread: the stream is being captured and the
// launch is recorded into a graph instead of running (docs/cupti-facts.md, fact 5). Returns
// false if this thread is in no launch call of the current epoch.
bool LaunchCallbacks::note_captured_launch(const CUpti_GraphData *gd) {
  ThreadLaunch &t = t_launch;
  if (!t.g.active || t.g.epoch != role_.state.load().epoch()) return false;
  if (!t.announce) return true;  // somebody else's sample: nothing to record
  t.captured = true;
  t.capture_graph_id = 0;
  t.capture_node_id = 0;
  // Each ID on its own: a CUPTI lacking one still gives the other (the node ID is what ties the
  // capture's clones to it, GraphTracker::note_capture_node).
  CUptiResult graph_ir = CUPTI_SUCCESS, node_ir = CUPTI_SUCCESS;
  if (gd && gd->graph) graph_ir = cupti_.cuptiGetGraphId(gd->graph, &t.capture_graph_id);
  if (gd && gd->node) node_ir = cupti_.cuptiGetGraphNodeId(gd->node, &t.capture_node_id);
  const CUptiResult ir = graph_ir != CUPTI_SUCCESS ? graph_ir : node_ir;
  // (A libcupti lacking either was reported once at start.)
  if (ir != CUPTI_SUCCESS && cupti_.available(cupti_.cuptiGetGraphId) &&
      cupti_.available(cupti_.cuptiGetGraphNodeId))
    g_capture_ids_failed.report(ir,
                                "cuptiGetGraphId/cuptiGetGraphNodeId failed: %s; "
                                "graph_capture_launch carries graph and node 0 for such launches",
                                cupti_result_string(cupti_, ir));
  return true;
}

}  // namespace parcagpu
