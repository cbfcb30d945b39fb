// Which graph kernel records of announced launches go to consumers, for KernelDelivery
// (kernel_delivery.h): a conditional body's kernel comes with correlation ID 0 (CUPTI drops its
// launch's, ground truth fact 7) and is handed back to the announced launch that owns its graph;
// a graph kernel whose end CUPTI wrote after kernel activity went off (activity_off_times.h) is
// held back, its time unknown. Runs where buffers are read (CUPTI's thread, or the one that
// flushes); the retired execs are let go on the watcher's.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/cupti_api.h"

namespace parcagpu {

class ActivitySwitch;  // activity_switch.h
class CorrelationTracker;
class GraphTracker;
struct KernelRecord;  // activity_buffers.h

struct GraphKernelStats {
  uint64_t conditional_unattributed = 0;  // correlation-0 records of no known exec: lost
  // ... of no exec known here because none of its launches was announced: not a loss.
  uint64_t conditional_unannounced = 0;
  // Graph kernel records of announced launches with an end CUPTI made up: not delivered.
  uint64_t made_up_ends = 0;
};

class GraphKernelFilter {
 public:
  GraphKernelFilter(const CuptiApi &cupti, CorrelationTracker &tracker, GraphTracker &graphs,
                    const ActivitySwitch &activity)
      : cupti_(cupti), tracker_(tracker), graphs_(graphs), activity_(activity) {}

  // A conditional body's kernel (correlation ID 0): the announced launch that owns its graph, or
  // 0. Counted when no exec is known for the graph: unattributed (a loss, said once) where an
  // announced launch may have owned it, unannounced where none can have.
  uint32_t conditional_body_owner(const KernelRecord &k);
  // A graph kernel record of an announced launch that ran while kernel activity went off: its
  // end is the next enable's time, made up (said as lost once, counted). Its launch stays
  // matched: the kernel ran.
  bool made_up_end(const KernelRecord &k);
  // Retired conditional execs kept for their body kernels are let go once no announced launch
  // of theirs is tracked (the activity housekeeping, watcher thread).
  void prune_retired();
  GraphKernelStats stats() const;

 private:
  const CuptiApi &cupti_;
  CorrelationTracker &tracker_;
  GraphTracker &graphs_;
  const ActivitySwitch &activity_;
  std::atomic<uint64_t> unattributed_{0}, unannounced_{0}, made_up_{0};
};

}  // namespace parcagpu
