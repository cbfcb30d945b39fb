#include "pc/pc_episode_timing.h"

#include <algorithm>

namespace parcagpu {

void PcEpisodeTiming::on_enabled(uint64_t now_ns) {
  episode_start_ns_ = now_ns;
  cut_ = false;
  ++episodes_;
}

bool PcEpisodeTiming::over(uint64_t now_ns, uint64_t episode_launches, bool learning) {
  if (episode_launches >= p_.launch_budget) {
    cut_ = true;
    return true;
  }
  return now_ns - episode_start_ns_ >= (learning ? p_.max_learning_ns : p_.max_episode_ns);
}

void PcEpisodeTiming::on_disabled(uint64_t now_ns, uint64_t first_window_drained_ns,
                                  bool kept_learning, bool resumed, uint64_t window_open_ns) {
  const uint64_t spent = now_ns > episode_start_ns_ ? now_ns - episode_start_ns_ : 0;
  if (cut_) ++cut_by_budget_;
  cut_ = false;
  // Time budget: an episode that took `spent` is followed by at least spent * (1/duty - 1). An
  // episode kept enabled while kernels were first used is charged its ordinary length only: that
  // happens while a program starts, and its next episode is not put off by it.
  const double duty = std::clamp(p_.max_duty, 1e-6, 1.0);
  // A resumed episode is the learning period going on: charged its first window only (if any).
  const bool first_window = first_window_drained_ns > episode_start_ns_;
  uint64_t ordinary = spent;
  if (kept_learning || resumed)
    ordinary = first_window ? first_window_drained_ns - episode_start_ns_ : resumed ? 0 : spent;
  const uint64_t charged =
      std::max(p_.min_episode_charge_ns, std::min({spent, ordinary, p_.max_episode_ns}));
  const uint64_t gap = static_cast<uint64_t>(static_cast<double>(charged) * (1.0 / duty - 1.0));
  scheduled_ns_ = std::max(now_ns + gap, window_open_ns);
}

}  // namespace parcagpu
