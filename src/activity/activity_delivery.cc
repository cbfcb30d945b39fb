// ActivityCollector's delivery (activity.h): a completed buffer's records, each to its family's
// consumers (activity_kinds.h) -- kernels of announced launches to activity_batch and
// kernel_executed, copies and fills to memory_batch (memory_delivery.h) -- and what a buffer says
// of losses. Runs where CUPTI hands buffers back: its own thread, or the one that flushes.
#include <chrono>
#include <thread>

#include "activity/activity.h"
#include "activity/activity_buffers.h"
#include "activity/activity_switch.h"
#include "activity/memory_delivery.h"
#include "base/agent_ring_pacer.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/usdt.h"
#include "parcagpu/abi.h"
#include "trackers/correlation_tracker.h"
#include "trackers/graph_tracker.h"

namespace parcagpu {
namespace {

// Every error here can repeat (per buffer, per record): once, then counted.
RepeatedError g_graph_ends_made_up("activity",
                                   "graph kernel records with an end CUPTI wrote after kernel "
                                   "activity went off",
                                   "kernels");
RepeatedError g_next_record_failed("activity", "buffers cut short by cuptiActivityGetNextRecord",
                                   "buffers");
RepeatedError g_dropped_query_failed("activity", "cuptiActivityGetNumDroppedRecords failed");
RepeatedError g_records_dropped("activity", "activity records dropped by CUPTI", "records");
RepeatedError g_conditional_unattributed("activity",
                                         "conditional body kernel records of no known graph exec",
                                         "records");
RepeatedError g_kernels_unheard("activity",
                                "kernels of announced launches fired after the last kernel "
                                "consumer left",
                                "kernels");

}  // namespace

uint32_t ActivityCollector::conditional_body_owner(const KernelRecord &k, uint64_t *unattributed,
                                                   uint64_t *unannounced) {
  if (k.graph_id == 0) return 0;
  bool unknown_graph = false;
  const uint32_t owner = graphs_.conditional_owner(
      k.graph_id, k.start, k.end, [this](uint32_t c) { return tracker_.contains(c); },
      &unknown_graph);
  // Without an open launch it is simply a kernel of an unannounced launch.
  if (owner != 0 || !unknown_graph) return owner;
  // No exec known for the graph: the graph tracker keeps every conditional exec with an
  // announced launch awaiting kernels, so unless it says owners may be unknown (graph IDs
  // unknown at instantiation, execs forgotten at a cap), this is a kernel of an exec none of
  // whose launches was announced, forgotten at its destroy: not a loss (issue 42: 460,534 such
  // records in 10 s of the conditional scenario were said lost).
  if (!graphs_.owners_may_be_unknown()) {
    ++*unannounced;
    return 0;
  }
  ++*unattributed;
  // (Without cuptiGetGraphId no graph is known: reported once at start.)
  if (cupti_.available(cupti_.cuptiGetGraphId))
    g_conditional_unattributed.report(
        kErrDataLost,
        "a kernel record of graph %u carries correlation ID 0 (a conditional body) and no known "
        "graph exec owns that graph (graph IDs unknown at instantiation, or execs forgotten at "
        "a cap, said before): conditional body kernels of such graphs are not delivered",
        k.graph_id);
  return 0;
}

size_t ActivityCollector::dropped_records(CUcontext ctx, uint32_t stream_id) {
  size_t dropped = 0;
  const CUptiResult dr = cupti_.cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped);
  if (dr != CUPTI_SUCCESS) {
    dropped = 0;
    // (A libcupti without it was reported once at start.)
    if (cupti_.available(cupti_.cuptiActivityGetNumDroppedRecords))
      g_dropped_query_failed.report(dr,
                                    "cuptiActivityGetNumDroppedRecords failed: %s; records CUPTI "
                                    "drops (buffers at their cap) go uncounted",
                                    cupti_result_string(cupti_, dr));
  } else if (dropped > 0) {
    g_records_dropped.report_n(dropped, kErrRecordsDropped,
                               "CUPTI dropped %zu activity records, kernels among them are not "
                               "delivered: the activity buffers were at their cap of %u x %u "
                               "KiB (PARCAGPU_MAX_BUFFERS, PARCAGPU_BUFFER_KIB)",
                               dropped, config_.max_buffers, config_.buffer_kib);
  }
  return dropped;
}

// One activity_batch firing. Its kernel records take their room in the production agent's ring
// from the pacer that PC firings wait for (agent_ring_pacer.h), waiting only once the bucket owes
// half the ring. Never on the launch path: CUPTI hands buffers back on its own thread, or on the
// one that flushes (the watcher, or the exiting thread).
void ActivityCollector::fire_activity_batch(const void **records, uint32_t n) {
  AgentRingPacer &pacer = AgentRingPacer::instance();
  const uint64_t bytes = uint64_t{n} * kAgentKernelEventBytes;
  for (uint64_t w;
       (w = pacer.wait_ns(bytes, monotonic_ns(), AgentRingPacer::kKernelDebtBytes)) > 0;)
    std::this_thread::sleep_for(std::chrono::nanoseconds(w));
  pacer.take(bytes, monotonic_ns());
  usdt::activity_batch(records, n);
}

// Whether a kernel record goes to consumers (its launch was announced), with the ID it goes
// with set in it; the buffer is ours, so consumers see the record with that ID.
bool ActivityCollector::deliverable(KernelRecord &k, uint64_t now, uint64_t *unattributed,
                                    uint64_t *unannounced) {
  if (k.correlation_id == 0) {
    // A kernel of a conditional node's body: CUPTI drops the launch's correlation ID (ground
    // truth, fact 7). Hand it back to the launch that owns the body graph.
    const uint32_t owner = conditional_body_owner(k, unattributed, unannounced);
    if (owner == 0) return false;
    k.set_correlation_id(owner);
  }
  uint32_t deliver_as = 0;
  if (!tracker_.on_kernel(k.correlation_id, now, &deliver_as)) return false;
  // A multi-device launch's second and later kernels go under IDs of its own
  // (correlation_tracker.h says why).
  if (deliver_as != k.correlation_id) k.set_correlation_id(deliver_as);
  return true;
}

struct ActivityCollector::BufferTally {
  BufferWalk walk;
  bool heard;
  uint64_t delivered, batches, unattributed, unannounced;
  uint64_t made_up;  // graph kernel records with a made-up end (activity_off_times.h)
};

void ActivityCollector::process_buffer(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                       size_t valid_size) {
  const bool per_kernel = usdt::kernel_executed_consumers() != 0;
  // Nobody attached to either kernel probe: what is delivered now reaches no consumer (the last
  // one left after these launches were announced, before the watcher disarmed).
  BufferTally t{{}, per_kernel || usdt::activity_batch_consumers() != 0, 0, 0, 0, 0, 0};
  const void *batch[PARCAGPU_ACTIVITY_BATCH_MAX];
  uint32_t n = 0;
  const uint64_t now = coarse_ns();
  auto on_kernel = [&](KernelRecord &k) {
    if (kernels_) kernels_->on_kernel_record(k.name, k.end > k.start ? k.end - k.start : 0);
    if (!deliverable(k, now, &t.unattributed, &t.unannounced)) return;
    if (k.graph_id != 0 && switch_->went_off_between(k.start, k.end)) {
      ++t.made_up;  // its launch stays matched: the kernel ran, its time is unknown
      return;
    }
    ++t.delivered;
    if (const char *fit = kernel_names_.fit(k.name); fit != k.name) k.set_name(fit);
    if (per_kernel)
      usdt::kernel_executed(k.start, k.end, k.correlation_id, k.device_id, k.stream_id, k.graph_id,
                            k.graph_node_id, k.name);
    batch[n++] = k.record;
    if (n == PARCAGPU_ACTIVITY_BATCH_MAX) {
      fire_activity_batch(batch, n);
      ++t.batches;
      n = 0;
    }
  };
  {
    // Copies and fills go out in their own batches (memory_batch), fired as they fill and at
    // the end of the walk.
    MemoryDelivery::Batch copies(*memory_, now);
    struct Handlers {
      decltype(on_kernel) *kernel;
      MemoryDelivery::Batch *copies;
    } h{&on_kernel, &copies};
    const RecordSink sink{
        &h, [](void *c, KernelRecord &k) { (*static_cast<Handlers *>(c)->kernel)(k); },
        [](void *c, MemoryRecord &m) { static_cast<Handlers *>(c)->copies->add(m); }};
    t.walk = walk_records(cupti_, buffer, valid_size, sink);
  }
  if (n > 0) {
    fire_activity_batch(batch, n);
    ++t.batches;
  }
  account_buffer(t, ctx, stream_id, valid_size);
}

void ActivityCollector::account_buffer(const BufferTally &t, CUcontext ctx, uint32_t stream_id,
                                       size_t valid_size) {
  if (t.walk.cut_short)
    g_next_record_failed.report(t.walk.error,
                                "cuptiActivityGetNextRecord failed: %s; the rest of a %zu-byte "
                                "buffer (after %llu kernel records) is lost",
                                cupti_result_string(cupti_, t.walk.error), valid_size,
                                static_cast<unsigned long long>(t.walk.kernel_records));
  if (t.made_up > 0)
    g_graph_ends_made_up.report_n(
        t.made_up, kErrDataLost,
        "%llu graph kernel records of announced launches came with an end CUPTI wrote after "
        "kernel activity went off (the next enable's time, docs/cupti-facts.md): not delivered, "
        "their GPU time is unknown",
        static_cast<unsigned long long>(t.made_up));
  const size_t dropped = dropped_records(ctx, stream_id);
  if (!t.heard && t.delivered > 0)
    g_kernels_unheard.report_n(t.delivered, kErrDataLost,
                               "%llu kernel records of announced launches were fired after the "
                               "last kernel consumer (activity_batch, kernel_executed) detached: "
                               "no consumer got them",
                               static_cast<unsigned long long>(t.delivered));
  std::lock_guard<std::mutex> s(stats_mu_);
  if (!t.heard) stats_.kernels_unheard += t.delivered;
  stats_.graph_ends_made_up += t.made_up;
  ++stats_.buffers_completed;
  stats_.kernel_records += t.walk.kernel_records;
  stats_.kernels_delivered += t.delivered;
  stats_.batches_fired += t.batches;
  stats_.records_dropped += dropped;
  stats_.buffers_cut_short += t.walk.cut_short ? 1 : 0;
  stats_.conditional_unattributed += t.unattributed;
  stats_.conditional_unannounced += t.unannounced;
}

}  // namespace parcagpu
