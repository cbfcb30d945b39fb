// A cap on how many launches are announced (the safety cap behind the launch coin,
// subscription_plan.h; PC sampling's graph registrations): a process-wide limiter
// (GCRA, the "virtual scheduling" form of a token bucket), one atomic word shared by every
// launching thread. A launch is let through if the next allowed time is not more than
// `tolerance` ahead of now; letting it through moves that time on by one interval.
//
// The tolerance absorbs the launch path's clock, CLOCK_MONOTONIC_COARSE, which only advances
// once per kernel tick (1 to 10 ms): without it, a rate of thousands per second would allow one
// launch per tick. It also bounds the burst after a quiet spell to tolerance / interval + 1, so
// a process that starts or idles does not announce a second's worth of launches at once.
#pragma once

#include <atomic>
#include <cstdint>

namespace parcagpu {

class RateGate {
 public:
  // rate_per_s <= 0 lets nothing through.
  RateGate(double rate_per_s, uint64_t tolerance_ns)
      : interval_ns_(rate_per_s > 0 ? static_cast<uint64_t>(1e9 / rate_per_s) : 0),
        tolerance_ns_(tolerance_ns),
        open_(rate_per_s > 0) {}

  bool try_take(uint64_t now_ns) {
    if (!open_) return false;
    uint64_t next = next_ns_.load(std::memory_order_relaxed);
    for (;;) {
      if (next > now_ns + tolerance_ns_) return false;
      const uint64_t after = (next > now_ns ? next : now_ns) + interval_ns_;
      if (next_ns_.compare_exchange_weak(next, after, std::memory_order_relaxed)) return true;
    }
  }

  // Whether try_take(now_ns) would let one through now (for a caller that takes only after other
  // checks pass, and is the gate's only taker meanwhile).
  bool ready(uint64_t now_ns) const {
    return open_ && next_ns_.load(std::memory_order_relaxed) <= now_ns + tolerance_ns_;
  }

  uint64_t interval_ns() const { return interval_ns_; }

 private:
  const uint64_t interval_ns_;
  const uint64_t tolerance_ns_;
  const bool open_;
  std::atomic<uint64_t> next_ns_{0};
};

}  // namespace parcagpu
