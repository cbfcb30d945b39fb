// Which correlation IDs were announced by cuda_correlation, so that kernel records reach
// consumers only for those (the agent keeps every unmatched side waiting in its maps).
//
// An eager launch expects one kernel and is forgotten at its first record. A graph launch fans
// out into every kernel of the graph, all with its ID: its entry stays until the expected number
// of kernels arrived (when instantiation told us how many) or it ages out. Launches whose kernels
// never come (dropped records, failed launches) must not grow memory: the table has a fixed cap
// and entries older than the age limit are expired.
//
// At the cap a new launch is refused (not announced) rather than an older one evicted: records
// arrive in launch order, so the oldest entries are the next to be matched, and evicting them
// under sustained load (kernel records processed later than the cap's worth of launches) loses
// nearly every kernel while announcing launches nobody can match. Before refusing, graph entries
// of unknown kernel count that already got kernels are retired (they are done once they go
// quiet). Every refusal and expiry is counted.
//
// A launch on several GPUs at once (cu/cudaLaunchCooperativeKernelMultiDevice) is eager with one
// kernel per device, all with its ID; the production agent matches an eager launch's first
// kernel only and forgets it (interpreter/gpu/cuda.go), so the others would be orphans there.
// Such a launch gets IDs of its own, one per device after the first, taken from the top of the
// 32-bit range downwards (CUPTI counts its IDs up from 1: they meet after 4 billion API calls);
// the launch path announces them beside the launch's (own_ids), and each device's kernel after
// the first is delivered under one of them (on_kernel's deliver_as).
//
// Thread-safe: launch threads insert (rate-limited, so rarely), the activity thread looks up.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "trackers/blocked_copies.h"

namespace parcagpu {

enum class LaunchKind : uint8_t { Eager, Graph };

struct TrackerStats {
  uint64_t inserted = 0;
  uint64_t completed = 0;          // eager: kernel seen; graph: all expected kernels seen
  uint64_t kernels_matched = 0;    // records delivered
  uint64_t kernels_unmatched = 0;  // records of launches never announced (or already gone)
  uint64_t expired = 0;            // aged out
  uint64_t expired_unseen = 0;     // ... of which no kernel was ever seen
  uint64_t refused = 0;            // not inserted at the cap: the launch was not announced
  uint64_t retired_at_cap = 0;   // graph entries of unknown count, with kernels, let go at the cap
  uint64_t removed = 0;          // withdrawn by the caller (e.g. captured launches)
  uint64_t dropped_unheard = 0;  // still waiting when the last kernel consumer left: lost
  uint64_t live = 0;             // entries now
  uint64_t pending = 0;          // entries that have seen no kernel yet
};

class CorrelationTracker {
 public:
  // max_blocked_copies: the cap of blocked_copies() (config.h, max_blocked_copies).
  CorrelationTracker(uint32_t max_entries, uint64_t max_age_ns, uint32_t max_blocked_copies = 1024)
      : max_entries_(max_entries),
        max_age_ns_(max_age_ns),
        blocked_copies_(max_blocked_copies, max_age_ns) {}

  // expected_kernels: 0 = unknown (graphs until instantiation is known); eager: 1, or the
  // number of GPUs of a multi-device launch (which then gets expected_kernels - 1 IDs of its
  // own). False when the table is full: the launch must not be announced.
  bool insert(uint32_t correlation_id, LaunchKind kind, uint64_t now_ns,
              uint32_t expected_kernels = 0);

  // A kernel record arrived. True if its launch was announced (deliver it); *deliver_as (if
  // given) is the ID to deliver it with: the launch's, or for a multi-device launch's second and
  // later kernels one of its own IDs.
  bool on_kernel(uint32_t correlation_id, uint64_t now_ns, uint32_t *deliver_as = nullptr);

  // A multi-device launch's own IDs, once, for its announcement: the first in *first, then
  // counting down; how many (0 for any other launch).
  uint32_t take_own_ids(uint32_t correlation_id, uint32_t *first);
  // The top of the own IDs' range, and how far down they go before starting over.
  static constexpr uint32_t kOwnIdTop = 0xffffffffu;
  static constexpr uint32_t kOwnIdSpan = 1u << 24;

  // Whether the launch is still tracked.
  bool contains(uint32_t correlation_id) const;

  // Forget an entry without a kernel (the launch turned out not to execute).
  void remove(uint32_t correlation_id);

  // The last kernel consumer left: every entry still waiting for kernels is given up (its
  // kernels reach nobody) and counted in dropped_unheard; graph entries of unknown kernel count
  // that already got kernels are done (completed). Returns how many were still waiting.
  uint64_t drop_all();

  // Drops entries past the age limit. Returns how many.
  uint64_t expire(uint64_t now_ns);

  // Entries that have seen no kernel yet: a flush is worth it when this grows.
  uint64_t pending() const;
  // Launches refused at the cap so far (without the lock).
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  TrackerStats stats() const;

  // Announced copies' and fills' call times, until their records take them (same age
  // limit as the launches).
  BlockedCopies &blocked_copies() { return blocked_copies_; }

 private:
  struct Entry {
    uint64_t inserted_ns;
    uint64_t last_ns;  // last kernel seen, or insertion
    uint32_t kernels_seen;
    uint32_t expected;  // 0 = unknown
    LaunchKind kind;
  };
  // A multi-device launch's own IDs: `first` downwards, `count` of them; `announced` once its
  // launch path took them (until then they outlive a completed entry).
  struct OwnIds {
    uint32_t first, count;
    bool announced, entry_gone;
  };
  void erase_locked(std::unordered_map<uint32_t, Entry>::iterator it);
  void add_own_ids_locked(uint32_t correlation_id, uint32_t count);
  uint64_t expire_locked(uint64_t now_ns);

  const uint32_t max_entries_;
  const uint64_t max_age_ns_;
  mutable std::mutex mu_;
  std::unordered_map<uint32_t, Entry> entries_;
  // Insertion order, for aging. May hold IDs already erased (skipped lazily).
  std::deque<uint32_t> order_;
  // Graph entries of unknown kernel count that got a kernel, oldest first: what may go at the
  // cap without a loss. May hold IDs already erased.
  std::deque<uint32_t> settled_;
  std::atomic<uint64_t> pending_{0};  // read without the lock on the launch path
  std::atomic<uint64_t> refused_{0};
  std::unordered_map<uint32_t, OwnIds> own_ids_;  // multi-device launches only (rare)
  uint32_t next_own_id_ = kOwnIdTop;
  TrackerStats stats_;
  BlockedCopies blocked_copies_;
};

}  // namespace parcagpu
