// PcScheduler: when PC sampling is enabled at all (episodes) and what each launch does in one,
// on a fake clock and fake launch counts.
#include "pc/pc_scheduler.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

using Step = PcScheduler::Step;
constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;

PcScheduler::Params episodes() {
  PcScheduler::Params p;
  p.launch_budget = 1000;
  p.max_episode_ns = 500 * kMs;
  p.max_duty = 0.05;
  p.drain_delay_ns = 30 * kMs;
  p.min_episode_charge_ns = 0;  // the duty tests charge what the episodes took
  p.first_enable_quiet_ns = 0;  // the first episode at the first launch (FirstEnable tests below)
  return p;
}

// Episodes charged at least 20 ms each, learning resumed at most `times` times.
PcScheduler::Params resuming_learning(uint32_t times) {
  PcScheduler::Params p = episodes();
  p.min_episode_charge_ns = 20 * kMs;
  p.max_learning_resumes = times;
  return p;
}

// Plays one whole episode from `t`: enable, start, n launches, stop, drain, disable, each step
// 1 ms after the last. Returns the time it ended.
uint64_t play_episode(PcScheduler &s, uint64_t t, uint64_t samples) {
  EXPECT_EQ(s.next_step(t, 0, 0), Step::kEnable);
  s.on_enabled(t);
  t += kMs;
  EXPECT_EQ(s.next_step(t, 1, 0), Step::kStart);
  s.on_started(t);
  const uint32_t n = s.window_limit();
  t += kMs;
  EXPECT_EQ(s.next_step(t, 2, n - 1), Step::kNone);
  EXPECT_EQ(s.next_step(t, 2, n), Step::kStop);
  s.on_stopped(t, n);
  EXPECT_EQ(s.next_step(t + 10 * kMs, 3, 0), Step::kNone) << "drained too early";
  t += 30 * kMs;
  EXPECT_EQ(s.next_step(t, 4, 0), Step::kDrain);
  s.on_drained(samples, n, t);
  t += kMs;
  EXPECT_EQ(s.next_step(t, 5, 0), Step::kDisable);
  s.on_disabled(t);
  EXPECT_FALSE(s.in_episode());
  return t;
}

// The first episode's first step, at time 0: it is enabled.
void enable_first_episode(PcScheduler &s) {
  ASSERT_EQ(s.next_step(0, 0, 0), Step::kEnable);
  s.on_enabled(0);
}

TEST(PcScheduler, TheFirstEpisodeBeginsAtTheFirstLaunch) {
  PcScheduler s(episodes(), {}, 0, 1);
  EXPECT_TRUE(s.episode_due(0));
  EXPECT_EQ(s.next_step(0, 0, 0), Step::kEnable);
  s.on_enabled(0);
  EXPECT_TRUE(s.in_episode());
  EXPECT_EQ(s.next_step(kMs, 1, 0), Step::kStart);
  EXPECT_EQ(s.window_limit(), PcRateController::Params{}.min_launches)
      << "nothing measured yet: the shortest window";
}

TEST(PcScheduler, AnEpisodePutOffIsAskedForAgainOnlyAfterTheDelay) {
  // The GPU is another process's (PcDeviceLocks): the episode waits, nothing else changes.
  PcScheduler s(episodes(), {}, 0, 1);
  ASSERT_EQ(s.next_step(0, 0, 0), Step::kEnable);
  s.put_off(0, 50 * kMs);
  EXPECT_FALSE(s.episode_due(49 * kMs));
  EXPECT_EQ(s.next_step(49 * kMs, 0, 0), Step::kNone);
  EXPECT_TRUE(s.episode_due(50 * kMs));
  EXPECT_EQ(s.next_step(50 * kMs, 0, 0), Step::kEnable);
  s.on_enabled(50 * kMs);
  s.put_off(50 * kMs, 50 * kMs);  // under way: ignored
  EXPECT_TRUE(s.episode_due(60 * kMs));
  EXPECT_EQ(s.next_step(60 * kMs, 1, 0), Step::kStart);
}

TEST(PcScheduler, OneWindowPerEpisodeThenDisabled) {
  PcScheduler s(episodes(), {}, 0, 1);
  const uint64_t end = play_episode(s, 0, 50);
  EXPECT_EQ(s.episodes(), 1u);
  // Between episodes nothing is due, nothing is done.
  EXPECT_FALSE(s.episode_due(end + kMs));
  EXPECT_EQ(s.next_step(end + kMs, 0, 0), Step::kNone);
}

TEST(PcScheduler, EpisodesStayUnderTheirDutyCap) {
  // A rate target the sample budget never binds: only the duties space the episodes.
  PcRateController::Params w;
  w.target_rate = 1e9;
  PcScheduler s(episodes(), w, 0, 7);
  uint64_t t = 0, busy = 0;
  for (int i = 0; i < 50; ++i) {
    while (!s.episode_due(t)) t += kMs;
    const uint64_t start = t;
    t = play_episode(s, t, 1000);
    busy += t - start;
  }
  while (!s.episode_due(t)) t += kMs;  // the last one's gap too
  // 5% duty: an episode of ~34 ms is followed by at least 19 times as long.
  EXPECT_LE(static_cast<double>(busy) / t, 0.05 + 1e-9);
  EXPECT_GE(static_cast<double>(busy) / t, 0.03) << "far sparser than the cap asks";
}

TEST(PcScheduler, AnEpisodeEndedAtOnceIsChargedTheMinimum) {
  // Ended before its window (a graph's first launch, PARCAGPU_PC_GRAPHS=0) after 10 us: the
  // next episode is still spaced as if it had cost min_episode_charge_ns (20 ms at 5%: 0.38 s).
  PcScheduler::Params p = episodes();
  p.min_episode_charge_ns = PcScheduler::Params{}.min_episode_charge_ns;
  PcScheduler s(p, {}, 0, 7);
  ASSERT_EQ(s.next_step(0, 0, 0), Step::kEnable);
  s.on_enabled(0);
  s.on_disabled(10'000);
  const uint64_t gap = static_cast<uint64_t>(p.min_episode_charge_ns * (1 / p.max_duty - 1));
  EXPECT_FALSE(s.episode_due(gap - kMs));
  EXPECT_TRUE(s.episode_due(gap + 10'000));
}

TEST(PcScheduler, TheSampleCreditSpacesEpisodesAtTheTargetRate) {
  PcRateController::Params w;
  w.target_rate = 100;  // (PC, stall) pairs per second
  PcScheduler s(episodes(), w, 0, 3);
  uint64_t t = 0, samples = 0;
  while (t < 60 * kSec) {
    while (!s.episode_due(t) || s.next_step(t, 0, 0) != Step::kEnable) t += kMs;
    // play_episode asks for kEnable again: the scheduler says it again while idle.
    t = play_episode(s, t, 400);
    samples += 400;
  }
  // Each episode yields 400 pairs against a credit of 100/s: about one episode per 4 s.
  EXPECT_NEAR(static_cast<double>(samples) / (t / 1e9), 100.0, 20.0);
}

TEST(PcScheduler, AnEpisodeEndsAtItsLaunchBudgetWhereverItIs) {
  PcScheduler s(episodes(), {}, 0, 1);
  enable_first_episode(s);
  // Enabled, before its window: the launches of other threads spent the budget.
  EXPECT_EQ(s.next_step(kMs, 1000, 0), Step::kDisable);
  s.on_disabled(kMs);
  EXPECT_EQ(s.episodes_cut_by_budget(), 1u);

  // In its window: stopped at once, then drained at once rather than after the delay.
  uint64_t t = 10 * kSec;
  while (s.next_step(t, 0, 0) != Step::kEnable) t += kMs;
  s.on_enabled(t);
  ASSERT_EQ(s.next_step(t, 1, 0), Step::kStart);
  s.on_started(t);
  EXPECT_EQ(s.next_step(t + kMs, 1000, 0), Step::kStop);
  s.on_stopped(t + kMs, 1);
  EXPECT_EQ(s.next_step(t + 2 * kMs, 1001, 0), Step::kDrain);
  s.on_drained(10, 1, t);
  EXPECT_EQ(s.next_step(t + 3 * kMs, 1002, 0), Step::kDisable);
  s.on_disabled(t + 3 * kMs);
  EXPECT_EQ(s.episodes_cut_by_budget(), 2u);
}

TEST(PcScheduler, AnEpisodeEndsAfterItsLongestTime) {
  PcScheduler s(episodes(), {}, 0, 1);
  enable_first_episode(s);
  ASSERT_EQ(s.next_step(kMs, 1, 0), Step::kStart);
  s.on_started(kMs);
  // A window's own deadline (PcRateController's max_window_ns, 250 ms) closes it first.
  const uint64_t deadline = kMs + PcRateController::Params{}.max_window_ns;
  EXPECT_EQ(s.next_step(deadline - kMs, 2, 0), Step::kNone);
  EXPECT_EQ(s.next_step(deadline, 2, 0), Step::kStop);
  s.on_stopped(deadline, 0);
  // The application stops launching for a while: the next launch drains and ends it.
  EXPECT_EQ(s.next_step(600 * kMs, 3, 0), Step::kDrain);
  s.on_drained(0, 0, 600 * kMs);
  EXPECT_EQ(s.next_step(601 * kMs, 3, 0), Step::kDisable);
}

TEST(PcScheduler, ALostContextEndsTheEpisodeOnlyIfOneIsUnderWay) {
  PcScheduler s(episodes(), {}, 0, 1);
  s.on_context_lost(5 * kMs);  // idle: nothing changes
  EXPECT_TRUE(s.episode_due(5 * kMs));
  ASSERT_EQ(s.next_step(5 * kMs, 0, 0), Step::kEnable);
  s.on_enabled(5 * kMs);
  s.on_context_lost(6 * kMs);
  EXPECT_FALSE(s.in_episode());
  EXPECT_EQ(s.next_step(7 * kMs, 0, 0), Step::kNone) << "spaced like any other episode";
}

TEST(PcScheduler, AnEpisodeStaysEnabledWhileKernelsAreFirstUsed) {
  // Kernels first launched between episodes never give PC records (P19, P20): while new ones
  // keep appearing, the episode stays enabled and samples on; it ends once none appeared for
  // first_use_quiet_ns (2 s).
  PcRateController::Params w;
  w.target_rate = 1e9;  // windows as often as the window duty lets them
  PcScheduler s(episodes(), w, 0, 5);
  ASSERT_EQ(s.next_step(0, 0, 0, /*last_first_use_ns=*/0), Step::kEnable);
  s.on_enabled(0);
  uint64_t t = kMs, first_use = kMs;
  ASSERT_EQ(s.next_step(t, 1, 0, first_use), Step::kStart);
  s.on_started(t);
  ASSERT_EQ(s.next_step(t + kMs, 2, s.window_limit(), first_use), Step::kStop);
  s.on_stopped(t + kMs, 1);
  ASSERT_EQ(s.next_step(t + 32 * kMs, 3, 0, first_use), Step::kDrain);
  s.on_drained(100, 1, t + 32 * kMs);
  // New kernels at 0.5 s and 1.5 s: still enabled at 3 s, with more windows meanwhile.
  int windows = 1;
  for (t = 10 * kMs; t < 3400 * kMs; t += 10 * kMs) {
    if (t == 500 * kMs || t == 1500 * kMs) first_use = t;
    const Step st = s.next_step(t, 10, 1, first_use);
    ASSERT_NE(st, Step::kDisable) << "ended at " << t / kMs << " ms, new kernels 1.5 s before";
    if (st == Step::kStart) {
      s.on_started(t);
      ++windows;
      ASSERT_EQ(s.next_step(t + kMs, 11, s.window_limit(), first_use), Step::kStop);
      s.on_stopped(t + kMs, 1);
      ASSERT_EQ(s.next_step(t + 32 * kMs, 11, 0, first_use), Step::kDrain);
      s.on_drained(100, 1, t + 32 * kMs);
    }
  }
  EXPECT_GT(windows, 2);
  // Quiet for 2 s after the last new kernel (1.5 s): over at 3.5 s.
  EXPECT_EQ(s.next_step(3510 * kMs, 12, 0, first_use), Step::kDisable);
  s.on_disabled(3510 * kMs);
  // Charged like an ordinary episode (enable to its first window's drain, 33 ms): the next one
  // is not put off by the 3.5 s of learning.
  EXPECT_TRUE(s.episode_due(3510 * kMs + 2 * kSec));
}

TEST(PcScheduler, LearningEndsAtItsLongestEvenIfKernelsKeepComing) {
  PcScheduler s(episodes(), {}, 0, 1);
  ASSERT_EQ(s.next_step(0, 0, 0, 0), Step::kEnable);
  s.on_enabled(0);
  uint64_t t = 0;
  for (; t < 40 * kSec; t += 100 * kMs)
    if (s.next_step(t, 5, 0, t) == Step::kDisable) break;
  EXPECT_EQ(t, 30 * kSec) << "max_learning_ns";
}

// Plays launches every 10 ms from `from` to `to` through whatever the scheduler asks (windows
// close at once), with a module last loaded at `module_ns`. Returns when it asked to disable, or
// 0 if it never did.
uint64_t launches_until_disabled(PcScheduler &s, uint64_t from, uint64_t to, uint64_t module_ns) {
  for (uint64_t t = from; t < to; t += 10 * kMs) {
    const Step st = s.next_step(t, 10, /*window_launches=*/32, 0, module_ns);
    if (st == Step::kDisable) return t;
    if (st == Step::kStart) s.on_started(t);
    if (st == Step::kStop) s.on_stopped(t, 1);
    if (st == Step::kDrain) s.on_drained(10, 1, t);
  }
  return 0;
}

TEST(PcScheduler, ALearningEpisodeEndedForAGraphBeginsAgainAtTheNextLaunch) {
  // A graph's first launch ends the episode (P21); kernels first launched after it while PC
  // sampling is off would never give records (P20): on two H100s, device 1's kernels, first
  // launched after device 0's first graph, gave none in 40 s. So learning resumes at once.
  PcScheduler::Params p = episodes();
  p.min_episode_charge_ns = 20 * kMs;
  const uint64_t t0 = kSec;  // (a clock at 0 would read as "no first use yet")
  PcRateController::Params w;
  w.target_rate = 1e9;  // no sample credit to wait for: the duty cap alone spaces episodes
  PcScheduler s(p, w, t0, 3);
  ASSERT_EQ(s.next_step(t0, 0, 0, 0), Step::kEnable);
  s.on_enabled(t0);
  // The graph's first launch at 2 ms: the sampler disables and tells the scheduler why.
  s.on_disabled(t0 + 2 * kMs, /*for_graph=*/true);
  EXPECT_TRUE(s.resume_due());
  EXPECT_TRUE(s.episode_due(t0 + 2 * kMs));
  // The next launch (another context, say) enables again, whether a window may open or not.
  ASSERT_EQ(s.next_step(t0 + 3 * kMs, 0, 0), Step::kEnable);
  s.on_enabled(t0 + 3 * kMs);
  EXPECT_FALSE(s.resume_due());
  EXPECT_TRUE(s.learning(t0 + 3 * kMs));
  // Learning is still the first episode's: it ends 2 s after the last first use (t0 here).
  const uint64_t t = launches_until_disabled(s, t0 + 4 * kMs, t0 + 3 * kSec, 0);
  ASSERT_NE(t, 0u) << "the resumed learning episode never ended";
  EXPECT_GE(t, t0 + 2 * kSec) << "ended while kernels were still first used";
  // Ended before a graph's first launch, say: learning is over, so nothing comes back.
  s.on_disabled(t, /*for_graph=*/true);
  EXPECT_FALSE(s.resume_due());
  // Charged up to its first window (a few ms here), not its 2 s: the next one comes within a
  // second or so (the minimum charge's gap, or the window duty's), not 38 s later.
  EXPECT_TRUE(s.episode_due(t + 2 * kSec)) << (s.next_episode_ns() - t) / kMs << " ms";
}

TEST(PcScheduler, LearningResumesAtMostMaxLearningResumesTimes) {
  // A program that creates graphs all the time would enable and disable at every one.
  const PcScheduler::Params p = resuming_learning(4);
  uint64_t t = kSec;
  PcScheduler s(p, {}, t, 3);
  ASSERT_EQ(s.next_step(t, 0, 0, 0), Step::kEnable);
  int resumed = 0;
  for (int i = 0; i < 10; ++i) {
    s.on_enabled(t);
    t += kMs;
    s.on_disabled(t, /*for_graph=*/true);
    if (!s.resume_due()) break;
    ++resumed;
    ASSERT_EQ(s.next_step(t, 0, 0), Step::kEnable);
  }
  EXPECT_EQ(resumed, 4);
  // Then the ordinary schedule: not due right away.
  EXPECT_EQ(s.next_step(t + kMs, 0, 0), Step::kNone);
}

TEST(PcScheduler, ALaterContextBeginsALearningPeriodOfItsOwn) {
  // A GPU that starts launching after the first learning period is over: its kernels are all
  // first launched from its context's creation on.
  PcScheduler::Params p = episodes();
  p.min_episode_charge_ns = 20 * kMs;
  PcScheduler s(p, {}, 0, 3);
  ASSERT_EQ(s.next_step(0, 0, 0, 0), Step::kEnable);
  s.on_enabled(0);
  s.on_disabled(5 * kMs);
  const uint64_t later = 60 * kSec;
  EXPECT_FALSE(s.learning(later));
  s.learn_again(later);
  EXPECT_TRUE(s.resume_due());
  EXPECT_TRUE(s.learning(later + kSec));
  ASSERT_EQ(s.next_step(later + kMs, 0, 0), Step::kEnable);
  s.on_enabled(later + kMs);
  // Its learning lasts first_use_quiet_ns from the creation, windows or not.
  EXPECT_NE(s.next_step(later + kSec, 5, 0), Step::kDisable);
}

TEST(PcScheduler, TheFirstContextsCreationChangesNothing) {
  // Contexts created before the first episode: that episode learns anyway.
  PcScheduler s(episodes(), {}, 0, 3);
  s.learn_again(0);
  EXPECT_FALSE(s.resume_due());
  EXPECT_EQ(s.next_step(0, 0, 0, 0), Step::kEnable);
}

TEST(PcScheduler, AModuleLoadedBetweenEpisodesResumesLearningAtTheNextLaunch) {
  // A PyTorch program paused 4 s after its first launches (building its model), then warmed
  // its step up: the first episode had ended at the warm-up's first launch, whose module then
  // loaded; every kernel first launched after it, outside an episode, went unsampled for good
  // in the graph replays (P20; H200, 2026-11-28: 0 PC records, the next episode 49 s away).
  PcScheduler::Params p = episodes();
  p.min_episode_charge_ns = 20 * kMs;
  const uint64_t t0 = kSec;
  PcScheduler s(p, {}, t0, 3);
  EXPECT_FALSE(s.module_loaded(t0 - kMs)) << "before the first episode: it learns anyway";
  ASSERT_EQ(s.next_step(t0, 0, 0, 0), Step::kEnable);
  s.on_enabled(t0);
  const uint64_t end = launches_until_disabled(s, t0 + 4300 * kMs, t0 + 5 * kSec, 0);
  ASSERT_NE(end, 0u);
  s.on_disabled(end);
  ASSERT_FALSE(s.episode_due(end + kMs)) << "the duty cap puts the next episode off";
  EXPECT_TRUE(s.module_loaded(end + kMs));
  EXPECT_TRUE(s.resume_due());
  EXPECT_TRUE(s.episode_due(end + kMs));
  ASSERT_EQ(s.next_step(end + 2 * kMs, 0, 0, 0, end + kMs), Step::kEnable);
  s.on_enabled(end + 2 * kMs);
  EXPECT_FALSE(s.module_loaded(end + 3 * kMs)) << "under way: it learns on";
  // It learns while modules keep loading, until 2 s after the last.
  const uint64_t last_module = end + 1500 * kMs;
  const uint64_t over = launches_until_disabled(s, end + 3 * kMs, end + 5 * kSec, last_module);
  EXPECT_GE(over, last_module + 2 * kSec);
  EXPECT_LT(over, last_module + 2 * kSec + 50 * kMs);
}

TEST(PcScheduler, AModuleLoadedInALapsedEpisodeKeepsItLearning) {
  // The first episode's window stayed open through a pause (no launch came to close it); a
  // module loaded as the launches came back: the episode goes on learning, not disabled at the
  // first of them.
  PcScheduler s(episodes(), {}, kSec, 3);
  ASSERT_EQ(s.next_step(kSec, 0, 0, 0), Step::kEnable);
  s.on_enabled(kSec);
  ASSERT_EQ(s.next_step(kSec + kMs, 1, 0, 0), Step::kStart);
  s.on_started(kSec + kMs);
  const uint64_t module = 5 * kSec;
  const uint64_t over = launches_until_disabled(s, module + kMs, module + 4 * kSec, module);
  EXPECT_GE(over, module + 2 * kSec) << "disabled " << (over - module) / kMs << " ms after";
}

TEST(PcScheduler, ModuleLoadsResumeLearningAtMostMaxLearningResumesTimes) {
  const PcScheduler::Params p = resuming_learning(3);
  uint64_t t = kSec;
  PcScheduler s(p, {}, t, 3);
  ASSERT_EQ(s.next_step(t, 0, 0, 0), Step::kEnable);
  s.on_enabled(t);
  s.on_disabled(t + kMs);
  int resumed = 0;
  for (int i = 0; i < 10; ++i) {
    t += 10 * kSec;
    if (!s.module_loaded(t)) continue;
    ++resumed;
    ASSERT_EQ(s.next_step(t + kMs, 0, 0, 0, t), Step::kEnable);
    s.on_enabled(t + kMs);
    s.on_disabled(t + 2 * kMs);
  }
  EXPECT_EQ(resumed, 3);
}

// The process's first Enable waits for modules to stop loading: every module loaded after it
// would be loaded whole (P34).
PcScheduler::Params first_enable_after(uint64_t quiet_ns) {
  PcScheduler::Params p = episodes();
  p.first_enable_quiet_ns = quiet_ns;
  p.max_first_enable_wait_ns = 30 * kSec;
  return p;
}

TEST(PcScheduler, TheFirstEnableWaitsUntilModulesStopLoading) {
  const uint64_t t0 = 5 * kSec;  // the consumer attached
  PcScheduler s(first_enable_after(2 * kSec), {}, t0, 1);
  // The first launches load modules inside their calls, after this decision: counted from t0.
  EXPECT_EQ(s.next_step(t0, 0, 0), Step::kNone);
  EXPECT_EQ(s.next_episode_ns(), t0 + 2 * kSec);
  EXPECT_FALSE(s.episode_due(t0 + kSec)) << "launches before it need not reach the sampler";
  // A module loaded at t0 + 1.5 s: nothing before t0 + 3.5 s.
  EXPECT_EQ(s.next_step(t0 + 2 * kSec, 0, 0, 0, t0 + 1500 * kMs), Step::kNone);
  EXPECT_EQ(s.next_episode_ns(), t0 + 3500 * kMs);
  EXPECT_EQ(s.next_step(t0 + 3499 * kMs, 0, 0, 0, t0 + 1500 * kMs), Step::kNone);
  EXPECT_EQ(s.next_step(t0 + 3500 * kMs, 0, 0, 0, t0 + 1500 * kMs), Step::kEnable);
  s.on_enabled(t0 + 3500 * kMs);
  EXPECT_TRUE(s.in_episode());
}

TEST(PcScheduler, ModulesLoadingWithoutEndWaitAtMostTheLongestWait) {
  PcScheduler s(first_enable_after(2 * kSec), {}, 0, 1);
  for (uint64_t t = 0; t < 30 * kSec; t += kSec)
    ASSERT_EQ(s.next_step(t, 0, 0, 0, t), Step::kNone) << "at " << t / kSec << " s";
  EXPECT_EQ(s.next_step(30 * kSec, 0, 0, 0, 30 * kSec), Step::kEnable);
}

TEST(PcScheduler, ModulesLoadedAfterTheFirstEpisodePutNothingOff) {
  PcScheduler::Params p = first_enable_after(2 * kSec);
  p.first_use_quiet_ns = 0;  // the first episode does not learn: one window, then disabled
  PcScheduler s(p, {}, 0, 1);
  const uint64_t end = play_episode(s, 2 * kSec, 50);
  const uint64_t due = s.next_episode_ns();
  ASSERT_GT(due, end);
  // A module loaded just before the next episode is due: it begins all the same.
  EXPECT_EQ(s.next_step(due, 0, 0, 0, due - kMs), Step::kEnable);
}

TEST(PcScheduler, AGraphRegisteredBeforeTheFirstEpisodeBeginsItAtTheNextLaunch) {
  // The registration enabled PC sampling: a kernel first launched from now on outside an
  // episode would be lost (P20), and modules load whole anyway.
  PcScheduler s(first_enable_after(2 * kSec), {}, 0, 1);
  EXPECT_EQ(s.next_step(100 * kMs, 0, 0, 0, 50 * kMs), Step::kNone);
  s.start_up_over(300 * kMs);
  EXPECT_TRUE(s.episode_due(300 * kMs));
  EXPECT_EQ(s.next_step(301 * kMs, 0, 0, 0, 300 * kMs), Step::kEnable);
  s.on_enabled(301 * kMs);
  EXPECT_TRUE(s.learning(302 * kMs)) << "the first episode learns, as ever";
  // After the first episode it changes nothing.
  s.start_up_over(400 * kMs);
  EXPECT_TRUE(s.in_episode());
}

TEST(PcScheduler, NoQuietEnablesAtTheFirstLaunch) {
  PcScheduler s(first_enable_after(0), {}, 0, 1);
  EXPECT_EQ(s.next_step(0, 0, 0, 0, 0), Step::kEnable);
}

}  // namespace
}  // namespace parcagpu
