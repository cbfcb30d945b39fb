#include "launch/launch_gate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "launch/role_state.h"

namespace parcagpu {
namespace {

constexpr int kEager = 0, kGraph = 1;

// One launch call as CUPTI delivers it on a thread: a runtime launch fires RT ENTER, DRV ENTER
// (same correlation ID), DRV EXIT, RT EXIT; a driver launch its ENTER and EXIT alone.
struct Launch {
  CbDomain domain;
  uint32_t cbid;
  uint32_t nested;  // the driver cbid under a runtime one, 0 for a driver launch
};
constexpr Launch kRt211{CbDomain::Runtime, 211, 307};
constexpr Launch kDrv307{CbDomain::Driver, 307, 0};
constexpr Launch kRt311{CbDomain::Runtime, 311, 514};
constexpr Launch kDrv514{CbDomain::Driver, 514, 0};

// Feeds a whole launch through the gate; returns what its outermost ENTER was judged, and
// checks the nested ENTER and the EXITs are judged consistently.
GateEnter launch(GateThread &t, LaunchCoin &coin, int role, uint64_t epoch, bool clean,
                 const Launch &l, uint32_t corr) {
  const GateEnterResult outer = gate_enter(t, coin, role, epoch, clean, l.domain, l.cbid, corr);
  EXPECT_FALSE(outer.stale);
  if (l.nested) {
    const GateEnterResult inner =
        gate_enter(t, coin, role, epoch, clean, CbDomain::Driver, l.nested, corr);
    // Nested in a followed runtime call: not a launch of its own.
    EXPECT_EQ(inner.what, GateEnter::kNotLaunch);
    EXPECT_EQ(gate_exit(t, epoch, CbDomain::Driver, l.nested), GateExit::kOther);
  }
  const bool ended = gate_exit(t, epoch, l.domain, l.cbid) == GateExit::kEnds;
  EXPECT_EQ(ended, outer.what != GateEnter::kUntracked);
  EXPECT_FALSE(t.active);
  return outer.what;
}

TEST(LaunchGate, RuntimeLaunchIsOneLaunchWithItsNestedDriverCall) {
  GateThread t{};
  LaunchCoin coin(1);  // every candidate picked
  // Clean epoch (the library starting): the first launch is a candidate.
  EXPECT_EQ(launch(t, coin, kEager, 1, true, kRt211, 10), GateEnter::kPicked);
  EXPECT_EQ(launch(t, coin, kEager, 1, true, kDrv307, 11), GateEnter::kPicked);
  EXPECT_EQ(launch(t, coin, kEager, 1, true, kRt211, 12), GateEnter::kPicked);
}

TEST(LaunchGate, FirstLaunchOfAThreadInAnEpochIsNeverACandidateWhateverItsApi) {
  LaunchCoin coin(1);
  for (const Launch &first : {kRt211, kDrv307}) {
    GateThread t{};
    const GateEnter want =
        first.domain == CbDomain::Driver ? GateEnter::kUntracked : GateEnter::kFirst;
    EXPECT_EQ(launch(t, coin, kEager, 5, false, first, 100), want);
    EXPECT_EQ(launch(t, coin, kEager, 5, false, kDrv307, 101), GateEnter::kPicked);
    EXPECT_EQ(launch(t, coin, kEager, 5, false, kRt211, 102), GateEnter::kPicked);
    // A new epoch (the callbacks were off and on again): first again.
    EXPECT_EQ(launch(t, coin, kEager, 6, false, first, 103), want);
    EXPECT_EQ(launch(t, coin, kEager, 6, false, first, 104), GateEnter::kPicked);
  }
}

TEST(LaunchGate, DriverCallNestedInARuntimeLaunchThatEnteredBeforeTheEnablingIsNotALaunch) {
  // The callbacks go on while the thread is inside cudaLaunchKernel (its RT ENTER unseen): the
  // first callback is its nested cuLaunchKernel ENTER, with the runtime launch's ID.
  GateThread t{};
  LaunchCoin coin(1);
  const GateEnterResult e = gate_enter(t, coin, kEager, 3, false, CbDomain::Driver, 307, 50);
  EXPECT_EQ(e.what, GateEnter::kUntracked);  // never announced as a driver launch
  EXPECT_EQ(gate_exit(t, 3, CbDomain::Driver, 307), GateExit::kOther);
  EXPECT_EQ(gate_exit(t, 3, CbDomain::Runtime, 211), GateExit::kOther);  // the unseen launch ends
  // From here the thread's nesting is known: a driver launch is a launch, a runtime one too.
  EXPECT_EQ(launch(t, coin, kEager, 3, false, kDrv307, 51), GateEnter::kPicked);
  EXPECT_EQ(launch(t, coin, kEager, 3, false, kRt211, 52), GateEnter::kPicked);
}

TEST(LaunchGate, EnabledBetweenTheNestedDriverExitAndTheRuntimeExit) {
  GateThread t{};
  LaunchCoin coin(1);
  EXPECT_EQ(gate_exit(t, 2, CbDomain::Runtime, 211),
            GateExit::kOther);  // the only callback of it seen
  EXPECT_EQ(launch(t, coin, kEager, 2, false, kRt211, 61), GateEnter::kFirst);
  EXPECT_EQ(launch(t, coin, kEager, 2, false, kRt211, 62), GateEnter::kPicked);
}

TEST(LaunchGate, AnExitThatNeverCameIsGivenUpAtTheNextLaunch) {
  GateThread t{};
  LaunchCoin coin(1);
  GateEnterResult e = gate_enter(t, coin, kGraph, 1, true, CbDomain::Runtime, 311, 70);
  EXPECT_EQ(e.what, GateEnter::kPicked);
  // Its EXIT never comes; the next launch of the thread has another ID.
  e = gate_enter(t, coin, kGraph, 1, true, CbDomain::Driver, 514, 71);
  EXPECT_TRUE(e.stale);
  EXPECT_EQ(e.stale_corr, 70u);
  EXPECT_EQ(e.what, GateEnter::kPicked);
  EXPECT_EQ(gate_exit(t, 1, CbDomain::Driver, 514), GateExit::kEnds);
}

// The callbacks go off and on (a new epoch) while a thread is inside a followed launch: its EXIT
// still ends that call, told apart from one of this epoch, so that what the thread holds for the
// call (PC sampling's launch gate) is let go; nothing of it is announced.
TEST(LaunchGate, AnExitInALaterEpochEndsTheCallItsEnterBegan) {
  GateThread t{};
  LaunchCoin coin(1);
  EXPECT_EQ(gate_enter(t, coin, kGraph, 4, true, CbDomain::Runtime, 311, 80).what,
            GateEnter::kPicked);
  EXPECT_EQ(gate_exit(t, 5, CbDomain::Driver, 514), GateExit::kOther);  // its nested call
  EXPECT_EQ(gate_exit(t, 5, CbDomain::Runtime, 311), GateExit::kEndsEarlier);
  EXPECT_FALSE(t.active);
  EXPECT_EQ(gate_exit(t, 5, CbDomain::Runtime, 311), GateExit::kOther);  // only once
}

// Eager and graph launches share one epoch: a thread's first launch of the epoch, whatever its
// kind, tells its nesting, and every later one is a candidate. (With an epoch per kind, a
// thread's first graph launch of each epoch was never a candidate: in a loop of many eager
// launches and one graph launch, nearly no graph launch would ever be picked.)
TEST(LaunchGate, KindsShareOneEpoch) {
  GateThread t{};
  LaunchCoin coin(1);
  EXPECT_EQ(launch(t, coin, kEager, 4, false, kRt211, 1), GateEnter::kFirst);
  EXPECT_EQ(launch(t, coin, kGraph, 4, false, kDrv514, 2), GateEnter::kPicked);
  EXPECT_EQ(launch(t, coin, kEager, 4, false, kDrv307, 3), GateEnter::kPicked);
  EXPECT_EQ(launch(t, coin, kGraph, 4, false, kRt311, 4), GateEnter::kPicked);
  // A new epoch: the first launch, a graph one, is not a candidate; the eager one after it is.
  EXPECT_EQ(launch(t, coin, kGraph, 5, false, kRt311, 5), GateEnter::kFirst);
  EXPECT_EQ(launch(t, coin, kEager, 5, false, kRt211, 6), GateEnter::kPicked);
}

// One inclusion probability: whatever the mix of kinds, each kind's launches are picked at the
// coin's one rate, and each kind's candidates are counted apart.
TEST(LaunchCoin, EveryKindIsPickedWithTheSameProbabilityAndCountedApart) {
  LaunchCoin coin(40);
  GateThread t{};
  uint64_t picks[2] = {0, 0}, tossed[2] = {0, 0};
  uint64_t corr = 1;
  for (int i = 0; i < 600000; ++i) {
    // Two eager launches then one graph launch, as a prefill/decode loop might.
    const int kind = i % 3 == 2 ? kGraph : kEager;
    const GateEnter e = launch(t, coin, kind, 1, true, kind == kGraph ? kDrv514 : kRt211, corr++);
    tossed[kind]++;
    picks[kind] += e == GateEnter::kPicked;
  }
  coin.set_mean(40);  // the next toss flushes what the thread counted
  launch(t, coin, kEager, 1, true, kRt211, corr++);
  EXPECT_EQ(coin.take_counted(kEager), tossed[kEager] + 1);
  EXPECT_EQ(coin.take_counted(kGraph), tossed[kGraph]);
  for (int k : {kEager, kGraph}) {
    const double expect = tossed[k] / 40.0;
    EXPECT_NEAR(picks[k], expect, 5 * std::sqrt(expect)) << k;
  }
}

// The one probability from the kinds' limits: the tightest limit binds every kind.
TEST(InclusionRate, ContinuousMeanMeetsTheTightestLimit) {
  const double limit[2] = {100, 20};
  {
    const double rate[2] = {2000, 1000};  // eager 20x its limit, graph 50x: 50 binds
    EXPECT_DOUBLE_EQ(inclusion_mean(limit, rate), 50);
  }
  {
    const double rate[2] = {10000, 100};  // eager 100x binds
    EXPECT_DOUBLE_EQ(inclusion_mean(limit, rate), 100);
  }
  {
    const double rate[2] = {50, -1};  // graph unknown, eager under its limit: every launch
    EXPECT_DOUBLE_EQ(inclusion_mean(limit, rate), 1);
  }
  {
    const double off[2] = {100, 0};  // graph never announced: it does not lower the eager one
    const double rate[2] = {1000, 100000};
    EXPECT_DOUBLE_EQ(inclusion_mean(off, rate), 10);
  }
}

// The coin takes each launch with probability 1/mean whatever the API: a mix of runtime and
// driver launches of both roles on several threads is sampled in proportion.
TEST(LaunchGate, MixedApisAndThreadsAreSampledInProportion) {
  LaunchCoin coin(16);
  std::vector<GateThread> threads(4, GateThread{});
  const Launch apis[] = {kRt211, kDrv307, kRt211, kDrv307, kRt211};
  std::map<uint32_t, int> launched, picked;
  uint32_t corr = 1;
  for (int round = 0; round < 40000; ++round)
    for (size_t i = 0; i < threads.size(); ++i) {
      const Launch &l = apis[(round + i) % 5];
      const GateEnter e = launch(threads[i], coin, kEager, 1, false, l, corr++);
      if (e == GateEnter::kUntracked || e == GateEnter::kFirst) continue;
      launched[l.cbid]++;
      picked[l.cbid] += e == GateEnter::kPicked;
    }
  for (uint32_t cbid : {211u, 307u}) {
    const double fraction = static_cast<double>(picked[cbid]) / launched[cbid];
    EXPECT_NEAR(fraction, 1.0 / 16, 0.1 / 16) << cbid;
  }
}

// The launch after a stall is no likelier to be picked than any other: the coin never looks at
// time. Positions in a periodic loop of three launches are picked equally often.
TEST(LaunchGate, PositionInAPeriodicLoopDoesNotMatter) {
  LaunchCoin coin(8);
  GateThread t{};
  int picked[3] = {};
  uint32_t corr = 1;
  for (int step = 0; step < 60000; ++step)
    for (int op = 0; op < 3; ++op)
      picked[op] += launch(t, coin, kEager, 1, true, op == 1 ? kDrv307 : kRt211, corr++) ==
                    GateEnter::kPicked;
  for (int op = 0; op < 3; ++op) EXPECT_NEAR(picked[op], 60000 / 8, 60000 / 8 * 0.06) << op;
}

TEST(LaunchCoin, CountsEveryCandidateOnceAcrossMeanChanges) {
  LaunchCoin coin(10);
  GateThread a{}, b{};
  uint64_t counted = 0, launches = 0, picks = 0;
  for (int phase = 0; phase < 20; ++phase) {
    for (int i = 0; i < 5000; ++i) {
      picks += coin.toss(a, kEager);
      picks += coin.toss(b, kEager);
      launches += 2;
    }
    counted += coin.take_counted(kEager);
    coin.set_mean(phase % 2 ? 10 : 50);  // each thread flushes its count at its next toss
  }
  // The two tosses after the last change flush what came before, themselves included.
  coin.toss(a, kEager);
  coin.toss(b, kEager);
  counted += coin.take_counted(kEager);
  EXPECT_EQ(counted, launches + 2);
  EXPECT_EQ(coin.take_counted(kGraph), 0u);
  EXPECT_GT(picks, launches / 50 * 0.8);
  EXPECT_LT(picks, launches / 10 * 1.2);
}

TEST(LaunchCoin, MeanOfOnePicksEveryLaunch) {
  LaunchCoin coin(1);
  GateThread t{};
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(coin.toss(t, kGraph));
  EXPECT_EQ(coin.take_counted(kGraph), 1000u);
}

TEST(LaunchCoin, PickRateFollowsTheMean) {
  for (double mean : {2.0, 7.5, 100.0, 5000.0}) {
    LaunchCoin coin(mean);
    GateThread t{};
    const int n = 2000000;
    int picks = 0;
    for (int i = 0; i < n; ++i) picks += coin.toss(t, kEager);
    EXPECT_NEAR(picks, n / mean, 5 * std::sqrt(n / mean) + 1) << mean;
  }
}

// A role's epoch and phase share one word (LaunchRole::state): each reads back what was packed, and
// a phase change keeps the epoch.
TEST(RoleState, EpochAndPhaseReadBackAsPacked) {
  static_assert(RoleState{}.epoch() == 0 && RoleState{}.phase() == RolePhase::kOff);
  for (uint64_t epoch :
       {uint64_t{0}, uint64_t{1}, uint64_t{255}, uint64_t{256}, (uint64_t{1} << 56) - 1})
    for (RolePhase p : {RolePhase::kOff, RolePhase::kContinuous, RolePhase::kDraining}) {
      const RoleState s{epoch, p};
      EXPECT_EQ(s.epoch(), epoch);
      EXPECT_EQ(s.phase(), p);
      EXPECT_EQ(s.with(RolePhase::kDraining), (RoleState{epoch, RolePhase::kDraining}));
      EXPECT_EQ(s.next_epoch(RolePhase::kContinuous),
                (RoleState{epoch + 1, RolePhase::kContinuous}));
    }
}

// An admitted launch compares the whole word: the same phase of another epoch is another state.
TEST(RoleState, SamePhaseOfAnotherEpochDiffers) {
  const RoleState on{7, RolePhase::kContinuous};
  EXPECT_NE(on, on.next_epoch(RolePhase::kContinuous));
  EXPECT_NE(on, on.with(RolePhase::kDraining));
  EXPECT_EQ(on, on.with(RolePhase::kDraining).with(RolePhase::kContinuous));
}

}  // namespace
}  // namespace parcagpu
