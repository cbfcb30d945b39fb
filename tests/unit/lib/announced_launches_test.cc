// AnnouncedLaunches (announced_launches.h), called directly on the parts Profiler::start builds
// (fake_launch_cupti.h): which picked launch is admitted (the phase, the learning, the safety cap,
// a phase moved meanwhile), what its ENTER does (tracked with the kernels it will run, or not
// announced: host-only graphs, a full tracker, a kernel consumer not armed yet), what its EXIT
// does (announced, captured, or the consumer gone), and a launch given up. Each path leaves the
// in-flight count as it found it.
#include "launch/announced_launches.h"

#include <gtest/gtest.h>

#include "base/clock.h"
#include "fake_launch_cupti.h"
#include "launch/launch_path.h"

namespace parcagpu::fake_launch {
namespace {

class AnnouncedLaunchesTest : public LaunchFixture {
 public:
  // An AnnouncedLaunches of its own over the fixture's parts, with a role and totals of its own:
  // the launch callbacks' (which LaunchFixture builds too) stay out of it.
  void build_announced(double eager_limit = 1e9, double graph_limit = 1e9) {
    build();
    role_ = std::make_unique<LaunchRole>(eager_limit, graph_limit, 0);
    role_->state.store(kOn);
    role_->rate_learned.store(true);
    announced_ = std::make_unique<AnnouncedLaunches>(api_, config_, *tracker_, *graphs_, *activity_,
                                                     nullptr, nullptr, *role_, stats_);
  }
  static constexpr RoleState kOn{3, RolePhase::kContinuous};

  // A cuLaunchKernel (307) or cuGraphLaunch (514) of `exec` with correlation ID `corr`.
  CUpti_CallbackData launch_data(uint32_t corr, const void *const *params = nullptr) {
    CUpti_CallbackData cb{};
    cb.correlationId = corr;
    cb.functionName = "cuLaunchKernel";
    cb.symbolName = "kernel";
    cb.functionParams = params;
    return cb;
  }
  // The thread's launch as LaunchCallbacks hands it over: admitted, to be announced.
  static ThreadLaunch admitted(uint32_t cbid) {
    ThreadLaunch t{};
    t.g.domain = CbDomain::Driver;
    t.g.cbid = cbid;
    t.g.active = true;
    t.announce = true;
    return t;
  }
  // One admitted launch through begin and end, as the launch path calls them.
  ThreadLaunch run(uint8_t kind, uint32_t cbid, const CUpti_CallbackData &cb) {
    EXPECT_TRUE(announced_->admit(kOn, kind));
    ThreadLaunch t = admitted(cbid);
    announced_->begin(t, kind, &cb);
    if (t.announce) announced_->end(t, kind, CbDomain::Driver, cbid, &cb);
    return t;
  }
  // One admitted launch's ENTER, what `between` does to it, and its EXIT (unless `exits` is
  // false: then it is returned as its thread left it).
  template <typename F>
  ThreadLaunch admit_begin_end(uint32_t corr, F between, bool exits = true) {
    const CUpti_CallbackData cb = launch_data(corr);
    ThreadLaunch t{};
    on_new_thread([&] {
      ASSERT_TRUE(announced_->admit(kOn, kEagerRole));
      t = admitted(307);
      announced_->begin(t, kEagerRole, &cb);
      between(t);
      if (exits) announced_->end(t, kEagerRole, CbDomain::Driver, 307, &cb);
    });
    return t;
  }
  int inflight() const { return role_->inflight.load(); }
  // An exec `exec` instantiated with `nodes` nodes of `type`, as its resource callbacks tell it.
  CUgraphExec instantiate(uintptr_t exec, CUgraphNodeType type, int nodes) {
    CUpti_GraphData gd{};
    gd.nodeType = type;
    for (int i = 0; i < nodes; ++i) graphs_->on_node_cloned(&gd);
    gd.graphExec = reinterpret_cast<CUgraphExec>(exec);
    graphs_->on_exec_created(&gd);
    return gd.graphExec;
  }

  std::unique_ptr<LaunchRole> role_;
  LaunchStats stats_;
  std::unique_ptr<AnnouncedLaunches> announced_;
};

TEST_F(AnnouncedLaunchesTest, APickIsAdmittedOnlyWhileOnWithAConsumerAndTheRateLearned) {
  build_announced(1e9, 0);  // graph launches: never announced
  EXPECT_FALSE(announced_->admit(kOn, kGraphRole)) << "a kind whose limit is 0";
  EXPECT_FALSE(announced_->admit(kOn.with(RolePhase::kDraining), kEagerRole));
  parcagpu_cuda_correlation_semaphore = 0;
  EXPECT_FALSE(announced_->admit(kOn, kEagerRole)) << "no cuda_correlation consumer";
  parcagpu_cuda_correlation_semaphore = 1;
  role_->rate_learned.store(false);
  EXPECT_FALSE(announced_->admit(kOn, kEagerRole));
  EXPECT_EQ(stats_.learning.load(), 1u) << "a pick while learning is counted";
  role_->rate_learned.store(true);
  EXPECT_EQ(inflight(), 0);
  EXPECT_TRUE(announced_->admit(kOn, kEagerRole));
  EXPECT_EQ(inflight(), 1) << "counted in flight until its end";
}

// The phase read at ENTER moved before the launch was counted in flight (the watcher began
// draining, or a new epoch): not admitted, and not left counted.
TEST_F(AnnouncedLaunchesTest, APickWhoseStateMovedMeanwhileIsNotAdmitted) {
  build_announced();
  role_->state.store(kOn.with(RolePhase::kDraining));
  EXPECT_FALSE(announced_->admit(kOn, kEagerRole));
  role_->state.store(kOn.next_epoch(RolePhase::kContinuous));
  EXPECT_FALSE(announced_->admit(kOn, kEagerRole));
  EXPECT_EQ(inflight(), 0);
}

// Above the safety cap (a launch rate that jumped before the coin's mean followed) a pick is
// counted rate-limited, not admitted.
TEST_F(AnnouncedLaunchesTest, PicksAboveTheSafetyCapAreCountedRateLimited) {
  build_announced(1, 1);  // a cap of a few picks a second, no burst
  int admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += announced_->admit(kOn, kEagerRole);
  EXPECT_GE(admitted, 1);
  EXPECT_LT(admitted, 10);
  EXPECT_EQ(stats_.rate_limited.load(), 100u - admitted);
  EXPECT_EQ(inflight(), admitted);
}

// Tracked from ENTER with the kernels its exec runs: the entry is done after that many kernels.
// Announced at EXIT; the in-flight count back where it was.
TEST_F(AnnouncedLaunchesTest, AGraphLaunchIsTrackedForItsExecsKernelsAndAnnounced) {
  build_announced();
  activity_->arm(true);
  const void *params[2] = {instantiate(0xe1, CU_GRAPH_NODE_TYPE_KERNEL, 2), nullptr};
  const CUpti_CallbackData cb = launch_data(61, params);
  on_new_thread([&] { run(kGraphRole, 514, cb); });
  EXPECT_EQ(stats_.announced_graph.load(), 1u);
  EXPECT_EQ(inflight(), 0);
  ASSERT_TRUE(tracker_->contains(61));
  tracker_->on_kernel(61, coarse_ns());
  EXPECT_TRUE(tracker_->contains(61)) << "one of its two kernels";
  tracker_->on_kernel(61, coarse_ns());
  EXPECT_FALSE(tracker_->contains(61));
}

// An exec of host functions only runs no kernel its ID could match: not announced.
TEST_F(AnnouncedLaunchesTest, AHostOnlyGraphLaunchIsNotAnnounced) {
  build_announced();
  activity_->arm(true);
  const void *params[2] = {instantiate(0xe2, CU_GRAPH_NODE_TYPE_HOST, 1), nullptr};
  ThreadLaunch t{};
  on_new_thread([&] { t = run(kGraphRole, 514, launch_data(62, params)); });
  EXPECT_FALSE(t.announce);
  EXPECT_FALSE(tracker_->contains(62));
  EXPECT_EQ(stats_.announced_graph.load(), 0u);
  EXPECT_EQ(graphs_->stats().hostonly_launches, 1u);
  EXPECT_EQ(inflight(), 0);
}

// A full tracker refuses the launch: no kernel of it could be matched, so it is not announced.
TEST_F(AnnouncedLaunchesTest, ALaunchTheFullTrackerRefusesIsNotAnnounced) {
  build_announced();
  activity_->arm(true);
  tracker_ = std::make_unique<CorrelationTracker>(1, 30'000'000'000ull);
  announced_ = std::make_unique<AnnouncedLaunches>(api_, config_, *tracker_, *graphs_, *activity_,
                                                   nullptr, nullptr, *role_, stats_);
  ThreadLaunch first{}, second{};
  on_new_thread([&] {
    first = run(kEagerRole, 307, launch_data(71));
    second = run(kEagerRole, 307, launch_data(72));
  });
  EXPECT_TRUE(first.announce);
  EXPECT_FALSE(second.announce);
  EXPECT_EQ(stats_.announced_eager.load(), 1u);
  EXPECT_EQ(tracker_->refused(), 1u);
  EXPECT_EQ(inflight(), 0);
}

// A kernel consumer the watcher has not armed kernel collection for yet: the launch's kernels
// would never be collected, so it is not announced. With no kernel consumer at all it is announced
// (cuda_correlation alone) and not tracked.
TEST_F(AnnouncedLaunchesTest, ALaunchWhoseKernelsWouldNotBeCollectedIsNotAnnounced) {
  build_announced();
  ThreadLaunch unarmed{}, alone{};
  on_new_thread([&] {
    parcagpu_kernel_executed_semaphore = 1;
    unarmed = run(kEagerRole, 307, launch_data(81));
    parcagpu_kernel_executed_semaphore = 0;
    alone = run(kEagerRole, 307, launch_data(82));
  });
  EXPECT_FALSE(unarmed.announce);
  EXPECT_TRUE(alone.announce);
  EXPECT_FALSE(tracker_->contains(82));
  EXPECT_EQ(stats_.announced_eager.load(), 1u);
  EXPECT_EQ(inflight(), 0);
}

// Recorded by stream capture (ResourceCallbacks marked it): announced as a capture, untracked,
// and the captured node's clones are watched from now on.
TEST_F(AnnouncedLaunchesTest, ACapturedLaunchIsAnnouncedAsACaptureAndItsNodeWatched) {
  build_announced();
  activity_->arm(true);
  admit_begin_end(91, [&](ThreadLaunch &t) {
    EXPECT_TRUE(tracker_->contains(91));
    t.captured = true;  // as ResourceCallbacks marks it
    t.capture_graph_id = 5;
    t.capture_node_id = 50;
  });
  EXPECT_EQ(stats_.captured.load(), 1u);
  EXPECT_EQ(stats_.announced_eager.load(), 0u);
  EXPECT_FALSE(tracker_->contains(91));
  EXPECT_EQ(graphs_->clones().stats().wanted, 1u);
  EXPECT_EQ(inflight(), 0);
}

// The consumer left during the call: not announced, its entry dropped, counted.
TEST_F(AnnouncedLaunchesTest, ALaunchWhoseConsumerLeftDuringTheCallIsDropped) {
  build_announced();
  activity_->arm(true);
  admit_begin_end(95, [](ThreadLaunch &) { parcagpu_cuda_correlation_semaphore = 0; });
  EXPECT_EQ(stats_.left_unannounced.load(), 1u);
  EXPECT_EQ(stats_.announced_eager.load(), 0u);
  EXPECT_FALSE(tracker_->contains(95));
  EXPECT_EQ(inflight(), 0);
}

// Given up (its EXIT never came as expected): out of flight, untracked, its hold on kernel
// activity released, counted.
TEST_F(AnnouncedLaunchesTest, AnAbandonedLaunchReleasesWhatItHeld) {
  build_announced();
  activity_->arm(true);
  const ThreadLaunch t = admit_begin_end(
      99, [](ThreadLaunch &) {}, false);
  ASSERT_TRUE(t.holds_activity);
  EXPECT_EQ(inflight(), 1);
  announced_->abandon(99, t.holds_activity);
  EXPECT_EQ(stats_.abandoned.load(), 1u);
  EXPECT_FALSE(tracker_->contains(99));
  EXPECT_EQ(inflight(), 0);
}

}  // namespace
}  // namespace parcagpu::fake_launch
