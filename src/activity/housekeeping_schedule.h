// When the activity housekeeping (ActivityCollector's flush, sticky checks, tracker ages, loss
// accounting) runs on the consumer watcher's tick: one flush interval after the first tick, then
// every interval after the last round ended, or at once after a request (request: from the
// launch path or PC sampling, wakes the watcher and never waits). Pure timing on the times it is
// given; unit-tested in tests/unit/lib/housekeeping_schedule_test.cc.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/subsystem_links.h"

namespace parcagpu {

class HousekeepingSchedule {
 public:
  // `wake` (may be null): how a request wakes the watcher.
  HousekeepingSchedule(uint64_t interval_ns, WatcherWake *wake)
      : interval_ns_(interval_ns), wake_(wake) {}

  // A round soon, on the watcher thread. Once until the watcher takes it (each launch past the
  // flush threshold asks); any thread.
  void request() {
    if (requested_.exchange(true, std::memory_order_relaxed)) return;
    if (wake_) wake_->wake();
  }
  // At a watcher tick at now_ns: whether a round is due; if not, *next_ns is when to tick again.
  // A request waiting is taken here.
  bool due(uint64_t now_ns, uint64_t *next_ns) {
    if (requested_.exchange(false, std::memory_order_relaxed)) return true;
    if (next_ns_ == 0) {
      next_ns_ = now_ns + interval_ns_;  // the first tick: the first round one interval later
    } else if (now_ns >= next_ns_) {
      return true;
    }
    *next_ns = next_ns_;
    return false;
  }
  // A round that was due at now_ns ended at done_ns: when to tick next (now_ns again, at once,
  // when asked meanwhile).
  uint64_t after_round(uint64_t now_ns, uint64_t done_ns) {
    next_ns_ = done_ns + interval_ns_;
    return requested_.load(std::memory_order_relaxed) ? now_ns : next_ns_;
  }

 private:
  const uint64_t interval_ns_;
  WatcherWake *const wake_;
  std::atomic<bool> requested_{false};
  uint64_t next_ns_ = 0;  // the watcher thread's; 0: no tick yet
};

}  // namespace parcagpu
