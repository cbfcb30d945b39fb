// decide_pc_step (src/pc/pc_step.h): the step a launch takes for PC sampling, on a fake clock, fake
// contexts and fake launch sequences. A small simulated sampler carries each action out as
// PcSampler does (enabled flags, window numbers, the scheduler told what was done), with no CUPTI.
#include "pc/pc_step.h"

#include <gtest/gtest.h>

#include <ostream>
#include <set>
#include <vector>

namespace parcagpu {

// Failures name the action (gtest finds it by ADL).
static std::ostream &operator<<(std::ostream &os, PcAction a) {
  static const char *const names[] = {
      "kNone", "kEndForNoConsumer", "kJoin", "kEnable", "kStart", "kStop", "kDrain", "kDisable"};
  return os << names[static_cast<int>(a)];
}

namespace {

constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;

PcScheduler::Params episodes(uint64_t quiet_ns = 0) {
  PcScheduler::Params p;
  p.launch_budget = 100000;
  p.max_episode_ns = 500 * kMs;
  p.drain_delay_ns = 0;
  p.first_use_quiet_ns = quiet_ns;  // 0: no learning, one window per episode
  p.first_enable_quiet_ns = 0;      // the first episode at the first launch
  return p;
}

struct FakeContext {
  bool enabled = false, ever_enabled = false;
  uint64_t last_window = 0;
};

// What PcSampler keeps, and what it does with each action, without CUPTI.
struct FakeSampler {
  explicit FakeSampler(size_t contexts, uint64_t quiet_ns = 0)
      : scheduler(episodes(quiet_ns), {}, 0, 1), ctx(contexts) {}

  PcStepEvent event(size_t c, uint64_t now, bool may_enable, bool want) const {
    PcStepEvent e;
    e.now_ns = now;
    e.want = want;
    e.may_enable = may_enable;
    e.launches_observed = observed;
    e.any_enabled = any_enabled();
    e.episode_under_way = episode >= 0;
    e.here_is_episode = episode == static_cast<int>(c);
    e.here_enabled = ctx[c].enabled;
    e.here_ever_enabled = ctx[c].ever_enabled;
    e.here_last_window = ctx[c].last_window;
    for (size_t o = 0; o < ctx.size(); ++o) {
      if (o == c) continue;
      e.oldest_other_window = std::min(e.oldest_other_window, ctx[o].last_window);
      if (ctx[o].enabled)
        e.oldest_other_enabled_window = std::min(e.oldest_other_enabled_window, ctx[o].last_window);
    }
    e.episode_launches = episode_launches;
    e.window_launches = window_launches;
    e.last_first_use_ns = last_first_use_ns;
    return e;
  }
  bool any_enabled() const {
    for (const auto &c : ctx)
      if (c.enabled) return true;
    return false;
  }
  void apply(PcAction a, size_t c, uint64_t now) {
    switch (a) {
      case PcAction::kNone:
        break;
      case PcAction::kJoin:
        ctx[c].enabled = ctx[c].ever_enabled = true;
        break;
      case PcAction::kEnable:
        ctx[c].enabled = ctx[c].ever_enabled = true;
        episode = static_cast<int>(c);
        episode_launches = 0;
        scheduler.on_enabled(now);
        break;
      case PcAction::kStart:
        episode = static_cast<int>(c);
        scheduler.on_started(now);
        ctx[c].last_window = ++windows;
        window_launches = 0;
        window_open = true;
        break;
      case PcAction::kStop:
        scheduler.on_stopped(now, window_launches);
        window_open = false;
        break;
      case PcAction::kDrain:
        scheduler.on_drained(100, window_launches, now);
        break;
      case PcAction::kEndForNoConsumer:
      case PcAction::kDisable:
        for (auto &x : ctx) x.enabled = false;
        window_open = false;
        episode = -1;
        scheduler.on_disabled(now);
        break;
    }
  }
  // A launch on context c entering at `now`: the step it takes, then it is counted.
  PcAction launch(size_t c, uint64_t now, bool may_enable = true, bool want = true) {
    const PcAction a = decide_pc_step(state, scheduler, event(c, now, may_enable, want));
    apply(a, c, now);
    if (any_enabled()) ++episode_launches;
    if (window_open) ++window_launches;
    return a;
  }

  PcScheduler scheduler;
  PcStepState state;
  std::vector<FakeContext> ctx;
  int episode = -1;
  uint64_t windows = 0, episode_launches = 0, last_first_use_ns = 0;
  uint32_t window_launches = 0;
  bool window_open = false, observed = true;
};

// Launches on c every `step` from `t` until `want` comes back; the launches it took (-1: not in
// `limit`).
int launches_until(FakeSampler &s, size_t c, uint64_t &t, PcAction want, int limit = 1000,
                   uint64_t step = kMs) {
  for (int i = 0; i < limit; ++i, t += step)
    if (s.launch(c, t) == want) return i;
  return -1;
}

TEST(PcStep, AWholeEpisodeOnOneContextInOrder) {
  FakeSampler s(1);
  uint64_t t = kSec;
  EXPECT_EQ(s.launch(0, t), PcAction::kEnable);
  EXPECT_GE(launches_until(s, 0, t, PcAction::kStart), 0);
  EXPECT_TRUE(s.window_open);
  // The launch that opened it is the window's first: window_limit() launches in all.
  EXPECT_EQ(launches_until(s, 0, t, PcAction::kStop),
            static_cast<int>(s.scheduler.window_limit()) - 1);
  EXPECT_EQ(s.launch(0, t += kMs), PcAction::kDrain);
  EXPECT_EQ(s.launch(0, t += kMs), PcAction::kDisable);
  EXPECT_FALSE(s.any_enabled());
  // The next episode only when the duty cap allows: not at the next launch.
  EXPECT_EQ(s.launch(0, t += kMs), PcAction::kNone);
}

TEST(PcStep, NoConsumerEndsTheEpisodeUnderWayAndAsksNothingElse) {
  FakeSampler s(1);
  EXPECT_EQ(s.launch(0, kSec, true, /*want=*/false), PcAction::kNone);
  EXPECT_FALSE(s.scheduler.in_episode()) << "the scheduler was asked with no consumer";
  EXPECT_EQ(s.launch(0, kSec), PcAction::kEnable);
  EXPECT_EQ(s.launch(0, kSec + kMs, true, /*want=*/false), PcAction::kEndForNoConsumer);
  EXPECT_EQ(s.episode, -1);
}

TEST(PcStep, AnEpisodeBeginsOnlyWhereEveryLaunchIsSeenAndItMayEnable) {
  FakeSampler s(1);
  s.observed = false;
  EXPECT_EQ(s.launch(0, kSec), PcAction::kNone);
  s.observed = true;
  // A graph's first launch (PARCAGPU_PC_GRAPHS=0) is uploaded with PC sampling off.
  EXPECT_EQ(s.launch(0, kSec, /*may_enable=*/false), PcAction::kNone);
  EXPECT_FALSE(s.scheduler.in_episode());
  EXPECT_EQ(s.launch(0, kSec), PcAction::kEnable);
}

TEST(PcStep, TheWindowOpensZeroToSevenLaunchesAfterItIsDue) {
  FakeSampler s(1);
  std::set<int> skips;
  uint64_t t = kSec;
  for (int episode = 0; episode < 40; ++episode) {
    ASSERT_GE(launches_until(s, 0, t, PcAction::kEnable, 100000), 0) << "episode " << episode;
    const int skipped = launches_until(s, 0, t, PcAction::kStart);
    ASSERT_GE(skipped, 0);
    EXPECT_LE(skipped, 7);
    skips.insert(skipped);
    ASSERT_GE(launches_until(s, 0, t, PcAction::kDisable), 0);
    t += 10 * kSec;  // past the duty cap's gap
  }
  EXPECT_GE(skips.size(), 4u) << "the dice always gave the same launch";
}

TEST(PcStep, AContextThatLaunchesDuringAnEpisodeJoinsIt) {
  FakeSampler s(2);
  EXPECT_EQ(s.launch(0, kSec), PcAction::kEnable);
  // Never enabled: it joins (enabled, not started), whether learning or not.
  EXPECT_EQ(s.launch(1, kSec + kMs), PcAction::kJoin);
  EXPECT_TRUE(s.ctx[1].enabled);
  // Not at a graph's first launch.
  FakeSampler g(2);
  EXPECT_EQ(g.launch(0, kSec), PcAction::kEnable);
  EXPECT_EQ(g.launch(1, kSec + kMs, /*may_enable=*/false), PcAction::kNone);
  EXPECT_FALSE(g.ctx[1].enabled);
}

TEST(PcStep, AContextEnabledBeforeJoinsAgainOnlyWhileKernelsAreFirstUsed) {
  FakeSampler s(2, /*quiet_ns=*/2 * kSec);
  s.ctx[1].ever_enabled = true;
  uint64_t t = 100 * kSec;
  s.last_first_use_ns = 0;
  ASSERT_EQ(s.launch(0, t), PcAction::kEnable);  // the first episode learns: first uses now
  EXPECT_EQ(s.launch(1, t + kMs), PcAction::kJoin);
  FakeSampler q(2);  // no learning
  q.ctx[1].ever_enabled = true;
  ASSERT_EQ(q.launch(0, t), PcAction::kEnable);
  EXPECT_EQ(q.launch(1, t + kMs), PcAction::kNone);
  EXPECT_FALSE(q.ctx[1].enabled);
}

TEST(PcStep, AnEpisodeWaitsForAContextNeverSampledThenGoesAnyway) {
  FakeSampler s(2);
  s.ctx[0].last_window = 1;  // sampled before; context 1 never was
  s.windows = 1;
  uint64_t t = kSec;
  int waited = 0;
  while (s.launch(0, t += 1000) == PcAction::kNone) ++waited;
  EXPECT_EQ(waited, static_cast<int>(kUnsampledWaitLaunches));
  EXPECT_TRUE(s.ctx[0].enabled);
  // One launch on the never-sampled context goes first at once.
  FakeSampler u(2);
  u.ctx[0].last_window = 1;
  u.windows = 1;
  EXPECT_EQ(u.launch(0, kSec), PcAction::kNone);
  EXPECT_EQ(u.launch(1, kSec + 1000), PcAction::kEnable);
  EXPECT_EQ(u.state.unsampled_waits, 0u) << "reset when a context goes";
}

TEST(PcStep, TheWindowGoesToTheEnabledContextWhoseLastWindowIsOldest) {
  PcStepState st;
  uint32_t waits = 0;
  EXPECT_TRUE(pc_older_goes_first(5, 3, true, waits));
  EXPECT_EQ(waits, 1u);
  EXPECT_FALSE(pc_older_goes_first(5, 3, /*may_wait=*/false, waits));
  EXPECT_EQ(waits, 0u);
  EXPECT_FALSE(pc_older_goes_first(3, 5, true, waits));
  EXPECT_FALSE(pc_older_goes_first(3, kNoOtherContext, true, waits));
  // A window due on a context that is not enabled: nothing (it is not the episode's).
  FakeSampler s(1);
  PcStepEvent e = s.event(0, kSec, true, true);
  e.any_enabled = true;
  EXPECT_EQ(pc_scheduled_action(st, PcScheduler::Step::kStart, e), PcAction::kNone);
  e.here_enabled = true;
  int skipped = 0;
  while (pc_scheduled_action(st, PcScheduler::Step::kStart, e) == PcAction::kNone) ++skipped;
  EXPECT_LE(skipped, 7);
  e.oldest_other_enabled_window = 0;
  e.here_last_window = 4;
  st.open_skip = 0;  // the dice let it open now
  EXPECT_EQ(pc_scheduled_action(st, PcScheduler::Step::kStart, e), PcAction::kNone);
  EXPECT_EQ(st.start_waits, 1u);
}

}  // namespace
}  // namespace parcagpu
