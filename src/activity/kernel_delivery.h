// Kernel records to their consumers: each record's function name and GPU time told to PC
// sampling (KernelRecordObserver); a record of an announced launch (the correlation tracker
// says, a graph kernel's fate GraphKernelFilter) fired with one kernel_executed and in
// activity_batch batches of at most PARCAGPU_ACTIVITY_BATCH_MAX records, as CUPTI wrote them
// (the buffer is ours: the correlation ID and a name too long for the consumer are rewritten in
// it). Unannounced launches' records go nowhere. Runs where buffers are read (CUPTI's thread, or
// the one that flushes), one buffer at a time per caller.
#pragma once

#include <cstdint>
#include <mutex>

#include "activity/activity_buffers.h"
#include "base/consumer_names.h"
#include "base/subsystem_links.h"
#include "parcagpu/abi.h"

namespace parcagpu {

class CorrelationTracker;
class GraphKernelFilter;  // graph_kernel_filter.h

struct KernelDeliveryStats {
  uint64_t delivered = 0;  // kernel records of announced launches, fired
  uint64_t batches = 0;    // activity_batch firings
  // Delivered while no kernel consumer (activity_batch, kernel_executed) was attached any more:
  // the last one left after these launches were announced, before the watcher disarmed (said as
  // lost).
  uint64_t unheard = 0;
  KernelDeliveryStats &operator+=(const KernelDeliveryStats &o) {
    delivered += o.delivered;
    batches += o.batches;
    unheard += o.unheard;
    return *this;
  }
};

class KernelDelivery {
 public:
  // `observer` (may be null): told of every kernel record read, before its delivery.
  KernelDelivery(CorrelationTracker &tracker, GraphKernelFilter &graphs,
                 KernelRecordObserver *observer)
      : tracker_(tracker), graphs_(graphs), observer_(observer) {}

  // One buffer's kernel records: a record at a time, then the end (fires what is left, says and
  // counts what reached nobody).
  class Batch {
   public:
    Batch(KernelDelivery &owner, uint64_t now_ns);
    ~Batch();
    void add(KernelRecord &k);

   private:
    bool deliverable(KernelRecord &k);
    void fire();
    KernelDelivery &owner_;
    const uint64_t now_ns_;
    const bool per_kernel_;  // kernel_executed consumers attached
    const bool heard_;       // ... or activity_batch ones
    uint32_t n_ = 0;
    KernelDeliveryStats counted_;
    const void *records_[PARCAGPU_ACTIVITY_BATCH_MAX];
  };

  KernelDeliveryStats stats() const;

 private:
  // One buffer's batch ended: what reached no consumer said as lost (once, then counted), all
  // of it counted.
  void account(const KernelDeliveryStats &batch);

  CorrelationTracker &tracker_;
  GraphKernelFilter &graphs_;
  KernelRecordObserver *const observer_;
  // Kernel names longer than the consumer keeps, as their stand-ins (consumer_names.h).
  FunctionNames names_{PARCAGPU_KERNEL_NAME_MAX, PARCAGPU_KERNEL_NAME_MAX + 1};
  mutable std::mutex mu_;
  KernelDeliveryStats stats_;
};

}  // namespace parcagpu
