// Copies and fills (the Memory family of activity_kinds.h) to memory_batch: a record goes to
// consumers only under a launch announced by cuda_correlation (a copy or fill cbid of
// cbid_table.h, picked by the same coin as kernel launches), in batches of at most
// PARCAGPU_MEMORY_BATCH_MAX contiguous records of the probe ABI's layout, each with the time its
// copy's call held its thread (measured on the launch path, kept by
// CorrelationTracker::blocked_copies() until its record comes here). Runs where buffers are read
// (CUPTI's thread, or the one that flushes), one buffer at a time per caller.
#pragma once

#include <cstdint>
#include <mutex>

#include "activity/activity_kinds.h"
#include "base/usdt.h"

namespace parcagpu {

class CorrelationTracker;

struct MemoryStats {
  uint64_t records = 0;    // copy and fill records read
  uint64_t delivered = 0;  // ... of announced launches, fired
  uint64_t batches = 0;
  uint64_t unheard = 0;  // delivered while no memory_batch consumer was attached (said as lost)
  uint64_t blocked = 0;  // delivered with the time of their call
};

class MemoryDelivery {
 public:
  // How a batch goes out: usdt::memory_batch (a unit test reads the batches instead).
  using Fire = void (*)(const void *records, uint32_t count);
  explicit MemoryDelivery(CorrelationTracker &tracker, Fire fire = &usdt::memory_batch)
      : tracker_(tracker), fire_(fire) {}

  // One buffer's copies and fills: begin, a record at a time, then end (fires what is left).
  class Batch {
   public:
    Batch(MemoryDelivery &owner, uint64_t now_ns);
    ~Batch();
    void add(const MemoryRecord &record);

   private:
    void fire();
    MemoryDelivery &owner_;
    const uint64_t now_ns_;
    const bool heard_;
    uint32_t n_ = 0;
    MemoryStats counted_;
    MemoryRecord records_[PARCAGPU_MEMORY_BATCH_MAX];
  };

  MemoryStats stats() const;

 private:
  CorrelationTracker &tracker_;
  const Fire fire_;
  mutable std::mutex mu_;
  MemoryStats stats_;
};

}  // namespace parcagpu
