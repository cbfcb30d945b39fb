// PC sampling's learning: whether kernels are still being used for the first time, when an
// episode is kept enabled for them or begun again at the next launch (a resume), and how long
// the process's first episode waits for start-up's module loads. Kernels first launched, and
// graphs first uploaded, while PC sampling is disabled between episodes never give PC records
// (docs/pc-sampling.md P19, P20): learning keeps an episode enabled while they come.
//
// Part of PcScheduler (pc_scheduler.h), which holds it by value and calls it under the sampler's
// lock; pure, no clock of its own. Unit-tested in tests/unit/lib/pc_learning_test.cc.
#pragma once

#include <cstdint>

#include "pc/pc_episode_params.h"

namespace parcagpu {

class PcLearning {
 public:
  // began_ns: when the scheduler began (a consumer attached).
  PcLearning(const PcEpisodeParams &params, uint64_t began_ns) : p_(params), began_ns_(began_ns) {}

  // Kernels are still being used for the first time: one was last seen less than
  // first_use_quiet_ns ago, and the learning period is not over max_learning_ns.
  bool learning(uint64_t now_ns) const;
  // What a launch asking for a step saw: when a kernel was last first used and a module last
  // loaded (0: never). After the first episode began, a module loaded is a kernel first used.
  void note_uses(uint64_t last_first_use_ns, uint64_t last_module_load_ns, bool after_first);
  // Before the process's first episode: the time it may begin (first_enable_quiet_ns after the
  // last module load, at most max_first_enable_wait_ns after the start; 0 once start-up is over).
  uint64_t first_enable_ns() const;
  // Start-up is over (PcScheduler::start_up_over): true if it was not before.
  bool end_start_up();
  // After the first episode began: a module was loaded (module_loaded) or a context created
  // (learn_again); learning goes on or begins again. True if a resume was armed, which only
  // happens with no episode under way (idle).
  bool module_loaded(uint64_t now_ns, bool idle);
  bool learn_again(uint64_t now_ns, bool idle);

  // The next episode resumes learning, at the next launch.
  bool resume_due() const { return resume_; }
  // At the launch that finds an episode due: whether it resumes learning (then it is enabled
  // whether a window may open or not). The resume stays due until on_enabled.
  bool resume_now(uint64_t now_ns) {
    resumed_ = resume_ && learning(now_ns);
    return resumed_;
  }
  // A resume found learning over: dropped. True if one was due.
  bool drop_resume();
  // The episode under way resumed learning.
  bool resumed() const { return resumed_; }
  // The episode under way was kept enabled past its first window for first uses.
  void keep_learning() { learned_ = true; }
  bool kept_learning() const { return learned_; }

  // An episode was enabled (first: the process's first).
  void on_enabled(uint64_t now_ns, bool first);
  // The episode ended; for_graph: before a graph's step. True if the next launch resumes
  // learning (kernels still first used, fewer than max_learning_resumes resumes so far).
  bool on_disabled(uint64_t now_ns, bool for_graph);

 private:
  const PcEpisodeParams p_;
  const uint64_t began_ns_;
  uint64_t last_module_load_ns_ = 0;
  bool start_up_over_ = false;  // end_start_up: the first episode waits no longer
  uint64_t last_first_use_ns_ = 0;
  bool learned_ = false;            // this episode was kept enabled for first uses
  uint64_t learning_since_ns_ = 0;  // the learning period's start (max_learning_ns)
  bool resume_ = false;             // the next episode resumes learning, at the next launch
  bool resumed_ = false;            // this episode resumed learning
  uint32_t resumes_ = 0;            // since the process began, or a context was created
};

}  // namespace parcagpu
