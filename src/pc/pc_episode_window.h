// PC sampling's window within an episode: the one planned (its length in launches, from the rate
// controller), the one open (until its launch limit or deadline), the drain due drain_delay_ns
// after Stop, and whether and when the episode's first window was drained.
//
// Part of PcScheduler (pc_scheduler.h), which holds it by value and calls it under the sampler's
// lock; pure, no clock of its own. Unit-tested in tests/unit/lib/pc_episode_window_test.cc.
#pragma once

#include <cstdint>

namespace parcagpu {

class PcEpisodeWindow {
 public:
  // max_window_ns: PcRateController::Params::max_window_ns; drain_delay_ns:
  // PcEpisodeParams::drain_delay_ns.
  PcEpisodeWindow(uint64_t max_window_ns, uint64_t drain_delay_ns)
      : max_window_ns_(max_window_ns), drain_delay_ns_(drain_delay_ns) {}

  // A window of `launches` launches is to open (0: none may open now).
  void plan(uint32_t launches) {
    limit_ = launches;
    pending_ = launches != 0;
  }
  // A window is planned and not yet opened.
  bool pending() const { return pending_; }
  // A window of this episode was drained.
  bool done() const { return done_; }
  // Launches the window planned last spans at most, and the open window's deadline.
  uint32_t limit() const { return limit_; }
  uint64_t deadline_ns() const { return deadline_ns_; }
  uint64_t started_ns() const { return started_ns_; }
  // When the episode's first window was drained (0: none was).
  uint64_t first_drained_ns() const { return first_drained_ns_; }

  // An episode was enabled; resumed: it resumed learning, and with no window planned it goes
  // straight on as if its first window were done (windows as the controller allows).
  void on_episode_enabled(bool resumed) {
    first_drained_ns_ = 0;
    done_ = resumed && !pending_;
  }
  void on_started(uint64_t now_ns) {
    pending_ = false;
    started_ns_ = now_ns;
    deadline_ns_ = now_ns + max_window_ns_;
  }
  // The open window closes: its launch limit reached or its deadline past.
  bool full(uint64_t now_ns, uint32_t window_launches) const {
    return window_launches >= limit_ || now_ns >= deadline_ns_;
  }
  void on_stopped(uint64_t now_ns) { drain_due_ns_ = now_ns + drain_delay_ns_; }
  bool drain_due(uint64_t now_ns) const { return now_ns >= drain_due_ns_; }
  void on_drained(uint64_t now_ns) {
    if (!done_) first_drained_ns_ = now_ns;
    done_ = true;
  }
  void on_episode_over() {
    pending_ = false;
    done_ = false;
  }

 private:
  const uint64_t max_window_ns_;
  const uint64_t drain_delay_ns_;
  bool pending_ = false;  // due when the episode was enabled: opens at once
  bool done_ = false;
  uint32_t limit_ = 0;
  uint64_t deadline_ns_ = 0;
  uint64_t started_ns_ = 0;
  uint64_t drain_due_ns_ = 0;
  uint64_t first_drained_ns_ = 0;  // an episode kept for learning is charged up to here
};

}  // namespace parcagpu
