// Every announced launch whose kernels will not reach consumers, said and counted from the
// correlation tracker's counts: launches left unannounced because the tracker was full, launches
// given up at the age limit, those still waiting when the last kernel consumer left, and at exit
// those still waiting then. Watcher thread, then shutdown (after the watcher stopped).
#pragma once

#include <atomic>
#include <cstdint>

#include "base/config.h"
#include "base/cupti_api.h"

namespace parcagpu {

class CorrelationTracker;

class ActivityLosses {
 public:
  ActivityLosses(const CuptiApi &cupti, const Config &config, CorrelationTracker &tracker)
      : cupti_(cupti), config_(config), tracker_(tracker) {}

  // The last kernel consumer left (its semaphores are down already). What the tracker still
  // waits for reaches nobody either: a loss, said here, and forgotten (a later consumer must not
  // get these kernels).
  void last_consumer_left();
  // What the tracker refused and gave up since the last call, said; once a minute the repeated
  // errors' progress (not at_exit); at exit, the announced launches still without kernels.
  void account(bool at_exit);
  // Launches still waiting for kernels when the last kernel consumer left (any thread).
  uint64_t launches_unheard() const { return launches_unheard_.load(std::memory_order_relaxed); }

 private:
  void say_pending_at_exit(uint64_t pending);

  const CuptiApi &cupti_;
  const Config &config_;
  CorrelationTracker &tracker_;
  // The tracker's counts already said.
  uint64_t refused_seen_ = 0;
  uint64_t expired_seen_ = 0;
  uint64_t next_progress_ns_ = 0;
  std::atomic<uint64_t> launches_unheard_{0};
};

}  // namespace parcagpu
