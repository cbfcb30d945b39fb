#include "activity/kernel_delivery.h"

#include <chrono>
#include <thread>

#include "activity/activity_buffers.h"
#include "activity/graph_kernel_filter.h"
#include "base/agent_ring_pacer.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/usdt.h"
#include "trackers/correlation_tracker.h"

namespace parcagpu {
namespace {

RepeatedError g_kernels_unheard("activity",
                                "kernels of announced launches fired after the last kernel "
                                "consumer left",
                                "kernels");

// One activity_batch firing. Its kernel records take their room in the production agent's ring
// from the pacer that PC firings wait for (agent_ring_pacer.h), waiting only once the bucket owes
// half the ring. Never on the launch path: CUPTI hands buffers back on its own thread, or on the
// one that flushes (the watcher, or the exiting thread).
void fire_activity_batch(const void **records, uint32_t n) {
  AgentRingPacer &pacer = AgentRingPacer::instance();
  const uint64_t bytes = uint64_t{n} * kAgentKernelEventBytes;
  for (uint64_t w;
       (w = pacer.wait_ns(bytes, monotonic_ns(), AgentRingPacer::kKernelDebtBytes)) > 0;)
    std::this_thread::sleep_for(std::chrono::nanoseconds(w));
  pacer.take(bytes, monotonic_ns());
  usdt::activity_batch(records, n);
}

}  // namespace

KernelDelivery::Batch::Batch(KernelDelivery &owner, uint64_t now_ns)
    : owner_(owner),
      now_ns_(now_ns),
      per_kernel_(usdt::kernel_executed_consumers() != 0),
      heard_(per_kernel_ || usdt::activity_batch_consumers() != 0) {}

// Whether a kernel record goes to consumers (its launch was announced), with the ID it goes
// with set in it.
bool KernelDelivery::Batch::deliverable(KernelRecord &k) {
  if (k.correlation_id == 0) {
    // A kernel of a conditional node's body: handed back to the launch that owns the body graph.
    const uint32_t owner = owner_.graphs_.conditional_body_owner(k);
    if (owner == 0) return false;
    k.set_correlation_id(owner);
  }
  uint32_t deliver_as = 0;
  if (!owner_.tracker_.on_kernel(k.correlation_id, now_ns_, &deliver_as)) return false;
  // A multi-device launch's second and later kernels go under IDs of its own
  // (correlation_tracker.h says why).
  if (deliver_as != k.correlation_id) k.set_correlation_id(deliver_as);
  return true;
}

void KernelDelivery::Batch::add(KernelRecord &k) {
  if (owner_.observer_)
    owner_.observer_->on_kernel_record(k.name, k.end > k.start ? k.end - k.start : 0);
  if (!deliverable(k) || owner_.graphs_.made_up_end(k)) return;
  ++counted_.delivered;
  if (const char *fit = owner_.names_.fit(k.name); fit != k.name) k.set_name(fit);
  if (per_kernel_)
    usdt::kernel_executed(k.start, k.end, k.correlation_id, k.device_id, k.stream_id, k.graph_id,
                          k.graph_node_id, k.name);
  records_[n_] = k.record;
  if (++n_ == PARCAGPU_ACTIVITY_BATCH_MAX) fire();
}

void KernelDelivery::Batch::fire() {
  fire_activity_batch(records_, n_);
  ++counted_.batches;
  n_ = 0;
}

KernelDelivery::Batch::~Batch() {
  if (n_ > 0) fire();
  if (!heard_) counted_.unheard = counted_.delivered;
  owner_.account(counted_);
}

void KernelDelivery::account(const KernelDeliveryStats &batch) {
  g_kernels_unheard.report_n(batch.unheard, kErrDataLost,
                             "%llu kernel records of announced launches were fired after the "
                             "last kernel consumer (activity_batch, kernel_executed) detached: "
                             "no consumer got them",
                             static_cast<unsigned long long>(batch.unheard));
  std::lock_guard<std::mutex> lock(mu_);
  stats_ += batch;
}

KernelDeliveryStats KernelDelivery::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace parcagpu
