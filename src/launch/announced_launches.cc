// The launch path's cold part (announced_launches.h): a picked launch admitted, announced or
// given up.
#include "launch/announced_launches.h"

#include "activity/activity.h"
#include "activity/activity_toggle.h"
#include "base/clock.h"
#include "base/config.h"
#include "base/cupti_api.h"
#include "base/log.h"
#include "base/usdt.h"
#include "launch/launch_path.h"
#include "launch/launch_role.h"
#include "launch/multi_device_launch.h"
#include "nvtx/nvtx_thread.h"
#include "pc/pc_sampling.h"
#include "trackers/correlation_tracker.h"
#include "trackers/graph_completion.h"
#include "trackers/graph_tracker.h"

namespace parcagpu {
namespace {

RepeatedError g_timestamp_failed("callbacks", "cuptiGetTimestamp failed");

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

// A multi-device launch's kernels after the first are delivered under IDs of its own
// (correlation_tracker.h): each is announced as a launch of the same stack, so that the agent,
// which matches one kernel per eager launch, gets every device's kernel.
void announce_own_ids(CorrelationTracker &tracker, uint32_t correlation_id, int32_t scbid,
                      const char *name) {
  uint32_t first = 0;
  const uint32_t n = tracker.take_own_ids(correlation_id, &first);
  for (uint32_t i = 0; i < n; ++i) usdt::cuda_correlation(first - i, scbid, name);
}

}  // namespace

bool AnnouncedLaunches::admit(RoleState state, uint8_t kind) {
  LaunchRole &r = role_;
  // Picked by the coin: the one probability every launch has. A launch PC sampling samples is
  // no exception (announcing every launch of a PC window over-weighted whatever ran then, at
  // the slower durations PC sampling gives; its samples go out with correlation ID 0).
  switch (admission(r.limit[kind], state.phase(), usdt::correlation_consumers() != 0,
                    r.rate_learned.load(std::memory_order_relaxed))) {
    case Admission::kRefused:
      return false;
    case Admission::kLearning:
      stats_.learning.fetch_add(1, std::memory_order_relaxed);
      return false;
    case Admission::kAdmit:
      break;
  }
  // The coin meets the rate limits on average; the gate only caps the moment a launch rate
  // jumps, before the watcher has set the coin's mean for it.
  if (!r.safety_cap.try_take(coarse_ns())) {
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

// Also of one that must not be announced (host functions only).
void AnnouncedLaunches::finish_admission() { role_.inflight.fetch_sub(1); }

void AnnouncedLaunches::abandon(uint32_t correlation_id, bool holds_activity) {
  finish_admission();
  tracker_.remove(correlation_id);
  if (holds_activity) activity_.launch_end();
  stats_.abandoned.fetch_add(1, std::memory_order_relaxed);
}

void AnnouncedLaunches::begin(ThreadLaunch &t, uint8_t kind, const CUpti_CallbackData *cb) {
  const bool graph = kind == kGraphRole;
  // One kernel per GPU of a multi-device launch (multi_device_launch.h), else one.
  uint32_t expected_kernels = graph ? 0 : launch_devices(t.g.domain, t.g.cbid, cb->functionParams);
  const void *conditional_exec = nullptr;  // registered as an open launch of its exec
  if (graph && cb->functionParams) {
    // Every graph launch's parameters start with the exec handle (cuGraphLaunch_params,
    // cudaGraphLaunch_v10000_params and their _ptsz twins).
    const void *exec = *static_cast<void *const *>(cb->functionParams);
    const GraphTracker::ExecFacts f = graphs_.on_launch(exec);
    if (f.known && f.kernel_nodes == 0 && !f.has_conditional) {
      // Host functions only: no kernel will ever carry this ID (docs/cupti-facts.md, fact 8).
      t.announce = false;
      finish_admission();  // (on_launch counted it as a host-only launch)
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
      finish_admission();
    }
    return;
  }
  if (!tracker_.insert(cb->correlationId, graph ? LaunchKind::Graph : LaunchKind::Eager,
                       coarse_ns(), expected_kernels)) {
    if (conditional_exec) graphs_.on_conditional_unannounced(conditional_exec, cb->correlationId);
    t.announce = false;
    finish_admission();
    return;
  }
  t.holds_activity = activity_.launch_begin();
}

// Every graph launch's parameters start with the exec handle (cuGraphLaunch_params,
// cudaGraphLaunch_v10000_params and their _ptsz twins).
static const void *graph_launch_exec(const CUpti_CallbackData *cb) {
  return cb->functionParams ? *static_cast<void *const *>(cb->functionParams) : nullptr;
}

void AnnouncedLaunches::watch_unannounced_conditional(ThreadLaunch &t,
                                                      const CUpti_CallbackData *cb) {
  const void *exec = graph_launch_exec(cb);
  if (!exec) return;
  t.conditional_watched = true;
  t.conditional_noted = false;
  t.recording_at_enter = activity_.recording_word();
  // Its launch time whatever the switch does next: a kernel of it may start before its EXIT.
  // (A cuptiGetTimestamp failure was said at announced launches.)
  t.conditional_ts = 0;
  cupti_.cuptiGetTimestamp(&t.conditional_ts);
  // Off: nothing to note unless it is switched on before the EXIT (settled there).
  if (!ActivityToggle::recording_on(t.recording_at_enter)) return;
  t.conditional_noted =
      graphs_.on_conditional_recorded(exec, cb->correlationId, t.conditional_ts, true);
}

void AnnouncedLaunches::settle_unannounced_conditional(ThreadLaunch &t,
                                                       const CUpti_CallbackData *cb) {
  t.conditional_watched = false;
  const uint64_t now = activity_.recording_word();
  if (ActivityToggle::recording_settled(t.recording_at_enter, now)) return;  // as noted
  // Switched during the call: whether its kernels are recorded is not known.
  const void *exec = graph_launch_exec(cb);
  if (t.conditional_noted) return graphs_.on_conditional_maybe_unrecorded(exec, cb->correlationId);
  graphs_.on_conditional_recorded(exec, cb->correlationId, t.conditional_ts, false);
}

void AnnouncedLaunches::end(ThreadLaunch &t, uint8_t kind, CbDomain domain, uint32_t cbid,
                            const CUpti_CallbackData *cb) {
  finish_admission();
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
    graphs_.clones().note_capture_node(t.capture_graph_id, t.capture_node_id);
    usdt::graph_capture_launch(cb->correlationId, scbid, name, t.capture_graph_id,
                               t.capture_node_id);
  } else if (usdt::correlation_consumers() != 0) {
    (kind == kGraphRole ? stats_.announced_graph : stats_.announced_eager)
        .fetch_add(1, std::memory_order_relaxed);
    // This thread's NVTX ranges that enclose the launch reach the consumer before it.
    nvtx_before_announce(cb->correlationId);
    usdt::cuda_correlation(cb->correlationId, scbid, name);
    if (kind != kGraphRole && launch_devices(domain, cbid, cb->functionParams) > 1)
      announce_own_ids(tracker_, cb->correlationId, scbid, name);
    if (pc_ && role_.pc_needs_launches.load(std::memory_order_relaxed))
      pc_->note_announced(cb->correlationId);
  } else {
    // The consumer left during the call: nobody will look for its kernels.
    tracker_.remove(cb->correlationId);
    stats_.left_unannounced.fetch_add(1, std::memory_order_relaxed);
  }
  if (tracker_.pending() >= config_.flush_threshold) activity_.request_flush();
}

}  // namespace parcagpu
