#include "pc/pc_rate_controller.h"

#include <algorithm>
#include <cmath>

namespace parcagpu {

PcRateController::PcRateController(const Params &params, uint64_t now_ns, uint64_t seed)
    : p_(params),
      // Start with a full second's credit: the first window opens at the first launch.
      credit_(params.target_rate * params.burst_s),
      credit_at_ns_(now_ns),
      rng_(seed | 1) {
  next_open_ns_.store(now_ns, std::memory_order_relaxed);
}

void PcRateController::accrue(uint64_t now_ns) {
  if (now_ns <= credit_at_ns_) return;
  const double cap = p_.target_rate * p_.burst_s;
  credit_ = std::min(cap, credit_ + p_.target_rate * (now_ns - credit_at_ns_) * 1e-9);
  credit_at_ns_ = now_ns;
}

double PcRateController::jitter() {
  // xorshift64*: cheap, and good enough to break phase locking.
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  const uint64_t r = rng_ * 0x2545F4914F6CDD1Dull;
  return 0.5 + static_cast<double>(r >> 11) / static_cast<double>(1ull << 53);
}

uint32_t PcRateController::should_open(uint64_t now_ns) {
  if (now_ns < next_open_ns()) return 0;
  if (p_.target_rate > 0) {
    accrue(now_ns);
    if (credit_ <= 0) {
      // Not before the credit is back above zero.
      const double wait_s = -credit_ / p_.target_rate;
      next_open_ns_.store(now_ns + static_cast<uint64_t>(wait_s * 1e9) + 1,
                          std::memory_order_relaxed);
      return 0;
    }
  }
  if (samples_per_launch_ <= 0) {
    // Nothing measured yet (or windows yield nothing): the shortest window first; a workload
    // whose windows keep yielding nothing gets the longest windows the duty cap allows.
    return samples_per_launch_ < 0 ? std::max<uint32_t>(1, p_.min_launches) : p_.max_launches;
  }
  const double want = p_.target_rate > 0 ? credit_ : p_.target_rate * p_.burst_s;
  const double n = std::ceil(std::max(want, 1.0) / samples_per_launch_);
  const double lo = std::clamp<double>(p_.min_launches, 1.0, p_.max_launches);
  return static_cast<uint32_t>(std::clamp(n, lo, static_cast<double>(p_.max_launches)));
}

void PcRateController::on_window_closed(uint64_t start_ns, uint64_t end_ns, uint32_t /*launches*/) {
  // A window is closed at the first launch after max_window_ns; time past that is time no launch
  // entered (the application was setting up, synchronizing, loading modules: the first window
  // after an enable also carries CUPTI's first Start), which sampling did not make dearer. On
  // the H100 an uncapped first window of 318 ms kept the next one 15 s away (one window per
  // short process). So the duty is charged at most 1.25 max_window_ns per window (the quarter:
  // a window ordinarily overruns its length by up to one launch).
  const uint64_t spent = std::min<uint64_t>(end_ns > start_ns ? end_ns - start_ns : 0,
                                            p_.max_window_ns + p_.max_window_ns / 4);
  // Time budget: a window that took `spent` is followed by at least spent * (1/duty - 1).
  const double duty = std::clamp(p_.max_duty, 1e-6, 1.0);
  const double gap = std::max(static_cast<double>(p_.min_gap_ns), spent * (1.0 / duty - 1.0));
  next_open_ns_.store(end_ns + static_cast<uint64_t>(gap * jitter()), std::memory_order_relaxed);
}

void PcRateController::on_samples(uint64_t samples, uint32_t launches) {
  if (p_.target_rate > 0) credit_ -= static_cast<double>(samples);
  if (launches == 0) return;
  const double per_launch = static_cast<double>(samples) / launches;
  samples_per_launch_ =
      samples_per_launch_ < 0 ? per_launch : 0.7 * samples_per_launch_ + 0.3 * per_launch;
  if (p_.target_rate > 0 && credit_ <= 0) {
    // Paid for more than the credit: no window before it is earned back.
    const uint64_t at = credit_at_ns_ + static_cast<uint64_t>(-credit_ / p_.target_rate * 1e9);
    if (at > next_open_ns()) next_open_ns_.store(at, std::memory_order_relaxed);
  }
}

}  // namespace parcagpu
