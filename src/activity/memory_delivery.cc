#include "activity/memory_delivery.h"

#include "base/log.h"
#include "base/usdt.h"
#include "trackers/correlation_tracker.h"

namespace parcagpu {
namespace {

RepeatedError g_memory_unheard("activity",
                               "copy and fill records of announced launches fired after the "
                               "last memory_batch consumer left",
                               "records");

}  // namespace

MemoryDelivery::Batch::Batch(MemoryDelivery &owner, uint64_t now_ns)
    : owner_(owner), now_ns_(now_ns), heard_(usdt::memory_batch_consumers() != 0) {}

void MemoryDelivery::Batch::add(const MemoryRecord &record) {
  ++counted_.records;
  // Only records of announced launches (the tracker forgets the launch at its record, as it
  // does an eager kernel's).
  uint32_t deliver_as = 0;
  if (!owner_.tracker_.on_kernel(record.correlation_id, now_ns_, &deliver_as)) return;
  ++counted_.delivered;
  records_[n_] = record;
  records_[n_].correlation_id = deliver_as;
  // By CUPTI's ID (the one the launch path kept it under).
  records_[n_].cpu_blocked_ns = owner_.tracker_.blocked_copies().take(record.correlation_id);
  counted_.blocked += records_[n_].cpu_blocked_ns != 0;
  if (++n_ == PARCAGPU_MEMORY_BATCH_MAX) fire();
}

void MemoryDelivery::Batch::fire() {
  owner_.fire_(records_, n_);
  ++counted_.batches;
  n_ = 0;
}

MemoryDelivery::Batch::~Batch() {
  if (n_ > 0) fire();
  if (!heard_ && counted_.delivered > 0) {
    counted_.unheard = counted_.delivered;
    g_memory_unheard.report_n(counted_.delivered, kErrDataLost,
                              "%llu copy and fill records of announced launches were fired after "
                              "the last memory_batch consumer detached: no consumer got them",
                              static_cast<unsigned long long>(counted_.delivered));
  }
  std::lock_guard<std::mutex> lock(owner_.mu_);
  owner_.stats_.records += counted_.records;
  owner_.stats_.delivered += counted_.delivered;
  owner_.stats_.batches += counted_.batches;
  owner_.stats_.unheard += counted_.unheard;
  owner_.stats_.blocked += counted_.blocked;
}

MemoryStats MemoryDelivery::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace parcagpu
