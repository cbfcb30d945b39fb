// The CUPTI times at which kernel activity was switched off, newest kept: to tell a graph kernel
// record whose end CUPTI wrote after the switch-off from a true one.
//
// Why. Real CUPTI finishes a graph kernel's record after the GPU ran it; a record not finished
// when CONCURRENT_KERNEL activity goes off gets about the next enable's time as its end
// (docs/cupti-facts.md, "The GPU being past a graph launch is not enough"). The library keeps
// activity on until an announced graph launch's kernels are done and GraphCompletion::kGraceNs
// longer, and that is not always enough: on an H200, a PyTorch loop mixing eager steps with graph
// replays (torch_mixed.py, 25 s, no PC consumer) got 12 of 411 announced graph launches with every
// kernel "lasting" 23-146 ms, 9.3 s of made-up GPU time against 0.15 s true. An announced graph
// kernel that truly ran never spans a switch-off (activity stayed on until the GPU was past it),
// so one whose start..end does has a made-up end: it is not delivered, and counted.
//
// One writer (the activity switch, under its lock, at each successful disable), readers on the
// threads that read activity buffers: a ring of atomics, read without a lock. A time overwritten
// while a reader looks costs that reader one judgement on a time older than the ring holds.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace parcagpu {

class ActivityOffTimes {
 public:
  // 1,024 switch-offs: at the ~120 toggles a second of the default rates, the last 8 s, well
  // past the flush interval after which a record is read.
  static constexpr size_t kKept = 1024;

  // A switch-off at `ts` (CUPTI's clock, the clock of kernel records), not earlier than the
  // previous one.
  void add(uint64_t ts) {
    const uint64_t n = count_.load(std::memory_order_relaxed);
    times_[n % kKept].store(ts, std::memory_order_relaxed);
    count_.store(n + 1, std::memory_order_release);
  }

  // Whether activity went off strictly between `start` and `end`. False when no switch-off the
  // ring still holds lies there (a record older than the ring is taken as it is).
  bool went_off_between(uint64_t start, uint64_t end) const {
    if (end <= start) return false;
    const uint64_t n = count_.load(std::memory_order_acquire);
    const uint64_t kept = n < kKept ? n : kKept;
    // Binary search, oldest to newest, for the first switch-off after `start`.
    uint64_t lo = n - kept, hi = n;
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo) / 2;
      if (at(mid) <= start)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo < n && at(lo) < end;
  }

  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  uint64_t at(uint64_t i) const { return times_[i % kKept].load(std::memory_order_relaxed); }

  std::array<std::atomic<uint64_t>, kKept> times_{};
  std::atomic<uint64_t> count_{0};
};

}  // namespace parcagpu
