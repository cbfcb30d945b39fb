#include "base/agent_ring_pacer.h"

namespace parcagpu {

void AgentRingPacer::refill(uint64_t now_ns) {
  if (last_ns_ == 0) last_ns_ = now_ns;  // the first call
  if (now_ns <= last_ns_) return;        // no time passed (or a read older than the last)
  // The bucket is full after kBurstBytes / kBytesPerSecond (31 ms): a longer gap counts as a
  // second, which keeps the product below in range.
  const uint64_t elapsed = now_ns - last_ns_ < 1000000000ull ? now_ns - last_ns_ : 1000000000ull;
  if (elapsed == 1000000000ull) last_ns_ = now_ns - elapsed;
  // Whole bytes only; the remainder of the interval is kept for the next refill.
  const uint64_t bytes = elapsed * kBytesPerSecond / 1000000000ull;
  if (bytes == 0) return;
  last_ns_ += bytes * 1000000000ull / kBytesPerSecond;
  const int64_t cap = static_cast<int64_t>(kBurstBytes);
  tokens_ =
      tokens_ + static_cast<int64_t>(bytes) > cap ? cap : tokens_ + static_cast<int64_t>(bytes);
}

void AgentRingPacer::take(uint64_t bytes, uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  refill(now_ns);
  tokens_ -= static_cast<int64_t>(bytes);
}

uint64_t AgentRingPacer::wait_ns(uint64_t bytes, uint64_t now_ns, uint64_t may_owe) {
  std::lock_guard<std::mutex> lock(mu_);
  refill(now_ns);
  // More than a burst can never be had at once: it waits for a full bucket.
  const int64_t want = static_cast<int64_t>(bytes < kBurstBytes ? bytes : kBurstBytes) -
                       static_cast<int64_t>(may_owe);
  if (tokens_ >= want) return 0;
  const uint64_t missing = static_cast<uint64_t>(want - tokens_);
  return (missing * 1000000000ull + kBytesPerSecond - 1) / kBytesPerSecond;
}

AgentRingPacer &AgentRingPacer::instance() {
  static AgentRingPacer *pacer = new AgentRingPacer;  // never destroyed: used until exit
  return *pacer;
}

}  // namespace parcagpu
