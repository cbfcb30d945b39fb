// PC sampling's episode parameters: how long an episode may last and how many launches it may
// take, how long it learns kernels' first uses, how much of the wall time episodes may take.
// One struct read by the scheduler's parts (PcScheduler, pc_scheduler.h, whose Params it is;
// PcLearning, PcEpisodeTiming, PcEpisodeWindow); set by PcEpisodes::start from the configuration.
#pragma once

#include <cstdint>

namespace parcagpu {

struct PcEpisodeParams {
  // Launches (of any thread) entering during one episode, at most. Every one of them leaves a
  // kernel record (activity is on for all of them); see pc_episodes.cc for the default.
  uint64_t launch_budget = 50000;
  uint64_t max_episode_ns = 1'000'000'000;
  // Kernels first launched, and graphs first uploaded, while PC sampling is disabled between
  // episodes never give PC records (docs/pc-sampling.md P19, P20): an episode stays enabled,
  // with more windows as the controller allows, until no kernel has been seen for the first time
  // for first_use_quiet_ns, at most max_learning_ns from its start. The launch budget still ends
  // it.
  uint64_t first_use_quiet_ns = 2'000'000'000;
  uint64_t max_learning_ns = 30'000'000'000;
  // Once PC sampling has been enabled on a context, every module loaded after is loaded whole,
  // every kernel's code on the GPU, where lazy loading would load only the kernels used
  // (docs/pc-sampling.md P34: a PyTorch MLP step took 66 MiB more); kernels first launched
  // before any Enable give records all the same (P20). So the process's first episode may wait
  // for start-up to be over: until no module has been loaded for first_enable_quiet_ns, at
  // most max_first_enable_wait_ns after the scheduler began (a consumer attached). Not by
  // default: a graph uploaded before the first Enable never gives records (P19).
  uint64_t first_enable_quiet_ns = 0;  // PARCAGPU_PC_START_QUIET_MS (config.h)
  uint64_t max_first_enable_wait_ns = 30'000'000'000;
  // A graph's first launch ends a learning episode (PcSampler::on_graph_first_launch, P21);
  // the next launch begins another at once, this many times in the process at most, and as
  // many again for each context created later (a program that creates graphs all the time
  // would otherwise enable and disable at each one).
  // Without it every kernel first launched after a program's first graph, on any GPU, was
  // lost for good: on two H100s not one sample of device 1 in 40 s (issue 19).
  uint32_t max_learning_resumes = 32;
  // Episode time (enable to disable) over wall time. Launches are slow while PC sampling is
  // enabled (a graph launch 2.65x, a sampled one ~1 ms), so a launch-bound program loses
  // about this share of its throughput: 2%, not the 5% first chosen (an H100 graph-launch loop
  // at 1.096 without episodes would be ~1.15 with them).
  double max_duty = 0.02;
  // An episode is charged at least this: one ended before its window (a graph's first launch
  // under PARCAGPU_PC_GRAPHS=0) took microseconds, and the next must not begin at once (the
  // mock's graph-creating loop went through 5696 episodes in 3 s). At 2% duty the next comes
  // 0.98 s later; such an episode costs an Enable and a Disable never started (~0.3 ms, P13).
  uint64_t min_episode_charge_ns = 20'000'000;
  // Get Data this long after Stop: CUPTI's worker threads decode the hardware buffer
  // periodically (their sleep span) and an early Get Data cannot be repeated.
  uint64_t drain_delay_ns = 120'000'000;
};

}  // namespace parcagpu
