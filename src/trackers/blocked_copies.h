// The time application threads spent in copy and fill calls, from the launch path to the copy's
// memory record. The launch path measures an announced copy's call at its EXIT (put), whatever
// its API (an "Async" one to or from pageable host memory waits too); its record comes later, out
// of an activity buffer (MemoryDelivery takes it by correlation ID, and the record carries it to
// memory_batch as cpu_blocked_ns).
//
// Bounded: a fixed number of entries, allocated up front (the launch path never allocates). At
// the cap, entries older than the age limit (their record never came: dropped records, a
// consumer gone) are expired first; if none is, the new time is dropped. Both are counted and
// said (error probe, once a site): that copy's record then says 0. A record read before its
// copy's EXIT (a buffer flushed in the microseconds between the copy's end and the call's
// return) finds nothing; its time, put afterwards, expires.
//
// Entries are few (copies announced since the last buffer was read: the coin's rate, the flush
// interval) and looked up by a scan under a mutex: only announced copies and fills and the
// delivery of their records pay it, and take() returns without the lock while the table is
// empty.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace parcagpu {

struct BlockedCopiesStats {
  uint64_t kept = 0;     // times put
  uint64_t taken = 0;    // ... taken by their record
  uint64_t dropped = 0;  // not kept: the table was full (their records say 0)
  uint64_t expired = 0;  // kept past the age limit with no record taking them, let go at the cap
  uint64_t live = 0;     // entries now
};

class BlockedCopies {
 public:
  BlockedCopies(uint32_t capacity, uint64_t max_age_ns);

  // A copy announced under correlation_id held its caller for blocked_ns. False if
  // the table was full (counted and said).
  bool put(uint32_t correlation_id, uint64_t blocked_ns, uint64_t now_ns);
  // The time kept for correlation_id, forgotten; 0 if none.
  uint64_t take(uint32_t correlation_id);

  uint32_t capacity() const { return capacity_; }
  BlockedCopiesStats stats() const;

 private:
  struct Entry {
    uint32_t correlation_id;
    uint64_t blocked_ns;
    uint64_t put_ns;
  };
  uint64_t expire_locked(uint64_t now_ns);

  const uint32_t capacity_;
  const uint64_t max_age_ns_;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;     // unordered; reserved to capacity_
  std::atomic<uint32_t> live_{0};  // entries_.size(), read without the lock
  BlockedCopiesStats stats_;
};

}  // namespace parcagpu
