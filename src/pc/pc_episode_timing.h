// PC sampling's episode timing: when the episode under way began, whether it must end (its launch
// budget spent, its longest time past), and, once it ended, what it is charged and so when the
// next one may begin: episodes take at most max_duty of the wall time (enable to disable), an
// episode kept enabled for kernels' first uses charged its ordinary length only.
//
// Part of PcScheduler (pc_scheduler.h), which holds it by value and calls it under the sampler's
// lock; pure, no clock of its own. Unit-tested in tests/unit/lib/pc_episode_timing_test.cc.
#pragma once

#include <cstdint>

#include "pc/pc_episode_params.h"

namespace parcagpu {

class PcEpisodeTiming {
 public:
  explicit PcEpisodeTiming(const PcEpisodeParams &params) : p_(params) {}

  // An episode was enabled at now_ns.
  void on_enabled(uint64_t now_ns);
  // Whether the episode under way must end: launch_budget launches entered during it (the
  // episode is then counted as cut by its budget, once), or max_episode_ns past its enable
  // (max_learning_ns while it learns).
  bool over(uint64_t now_ns, uint64_t episode_launches, bool learning);
  // The episode ended at now_ns. first_window_drained_ns: when its first window was drained (0:
  // none was); kept_learning: kept enabled past that window for first uses; resumed: it resumed
  // learning (charged its first window only); window_open_ns: the earliest the rate controller
  // opens the next window. Sets scheduled_ns.
  void on_disabled(uint64_t now_ns, uint64_t first_window_drained_ns, bool kept_learning,
                   bool resumed, uint64_t window_open_ns);

  // The next episode by the duty cap (a resumed learning episode comes before it).
  uint64_t scheduled_ns() const { return scheduled_ns_; }
  uint64_t episodes() const { return episodes_; }
  uint64_t episodes_cut_by_budget() const { return cut_by_budget_; }

 private:
  const PcEpisodeParams p_;
  uint64_t episode_start_ns_ = 0;
  bool cut_ = false;  // this episode hit its launch budget
  uint64_t scheduled_ns_ = 0;
  uint64_t episodes_ = 0;
  uint64_t cut_by_budget_ = 0;
};

}  // namespace parcagpu
