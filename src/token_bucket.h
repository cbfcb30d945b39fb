// Per-thread token bucket for announced launches. Trivially constructible so a thread_local
// instance needs no TLS init guard on the launch path; the rate is passed in on each call.
#pragma once

#include <cstdint>

namespace parcagpu {

struct TokenBucket {
  double tokens;          // available announcements
  uint64_t last_ns;       // last refill time; 0 = never used
  // Takes one token if available. Burst capacity is one second's worth (at least 1), so a
  // thread that was idle may announce a short burst, but never more than the rate sustains.
  bool try_take(double rate_per_s, uint64_t now_ns) {
    if (rate_per_s <= 0) return false;
    const double burst = rate_per_s < 1.0 ? 1.0 : rate_per_s;
    if (last_ns == 0) {
      tokens = burst;
    } else if (now_ns > last_ns) {
      tokens += static_cast<double>(now_ns - last_ns) * 1e-9 * rate_per_s;
      if (tokens > burst) tokens = burst;
    }
    last_ns = now_ns;
    if (tokens < 1.0) return false;
    tokens -= 1.0;
    return true;
  }
};

}  // namespace parcagpu
