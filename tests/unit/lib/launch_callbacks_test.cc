// The application threads' launch path (LaunchCallbacks, AnnouncedLaunches, ResourceCallbacks)
// on a fake CUPTI table (fake_launch_cupti.h): which launches are admitted and announced, under
// which correlation ID, what the coin picks once the watcher set its mean, and launches given up.
#include <gtest/gtest.h>

#include <cmath>

#include "base/clock.h"
#include "fake_launch_cupti.h"

namespace parcagpu::fake_launch {
namespace {

using LaunchPath = LaunchFixture;

// A picked launch is tracked from its ENTER under that callback's correlation ID and announced
// at its EXIT, once per launch call: the driver call nested in a runtime launch is no launch of
// its own.
TEST_F(LaunchPath, EveryPickedLaunchIsTrackedUnderItsCorrelationIdAndAnnouncedOnce) {
  build_tracking();
  const int graph_exec = 0;
  on_new_thread([&] {
    runtime_launch(11);
    driver_launch(12);
    graph_launch(13, &graph_exec);
  });
  EXPECT_TRUE(tracker_->contains(11));
  EXPECT_TRUE(tracker_->contains(12));
  EXPECT_TRUE(tracker_->contains(13));
  EXPECT_FALSE(tracker_->contains(14));
  EXPECT_EQ(stats().announced_eager.load(), 2u);
  EXPECT_EQ(stats().announced_graph.load(), 1u);
  EXPECT_EQ(inflight(), 0) << "each admitted launch left at its EXIT";
  EXPECT_GT(fake_.activity_enables, 0) << "kernel activity on around the announced launches";
}

// No consumer of cuda_correlation at its ENTER: not admitted. One that left during the call: not
// announced, and its tracker entry is dropped (nobody will look for its kernels).
TEST_F(LaunchPath, NoLaunchIsAnnouncedToAConsumerThatIsGone) {
  build_tracking();
  on_new_thread([&] {
    parcagpu_cuda_correlation_semaphore = 0;
    driver_launch(21);
    parcagpu_cuda_correlation_semaphore = 1;
    enter(CbDomain::Driver, 307, 22);
    EXPECT_TRUE(tracker_->contains(22));
    parcagpu_cuda_correlation_semaphore = 0;
    exit(CbDomain::Driver, 307, 22);
  });
  EXPECT_FALSE(tracker_->contains(21));
  EXPECT_EQ(stats().left_unannounced.load(), 1u);
  expect_left_no_trace(22);
}

// An EXIT with another ID than its ENTER's: which one its kernels carry is unknown. Given up.
TEST_F(LaunchPath, ALaunchWhoseExitCarriesAnotherIdIsAbandoned) {
  build_tracking();
  on_new_thread([&] {
    enter(CbDomain::Driver, 307, 31);
    exit(CbDomain::Driver, 307, 32);
  });
  expect_left_no_trace(31);
  EXPECT_EQ(stats().abandoned.load(), 1u) << "counted as given up";
}

// A launch whose EXIT never came is given up at its thread's next launch, which is announced.
TEST_F(LaunchPath, ALaunchWhoseExitNeverCameIsAbandonedAtTheThreadsNextLaunch) {
  build_tracking();
  on_new_thread([&] {
    enter(CbDomain::Driver, 307, 41);
    driver_launch(42);
  });
  EXPECT_EQ(stats().abandoned.load(), 1u);
  EXPECT_FALSE(tracker_->contains(41));
  EXPECT_TRUE(tracker_->contains(42));
  EXPECT_EQ(stats().announced_eager.load(), 1u);
  EXPECT_EQ(inflight(), 0);
}

// A graph node created inside a launch call on the same thread: stream capture recorded the
// launch instead of running it. Not announced as a launch (it never runs under this ID): counted
// as captured, untracked.
TEST_F(LaunchPath, ALaunchRecordedByStreamCaptureIsNotAnnouncedAsALaunch) {
  build_tracking();
  fake_.graph_id = 7;
  fake_.node_id = 70;
  on_new_thread([&] {
    enter(CbDomain::Driver, 307, 51);
    CUpti_GraphData gd{};
    gd.graph = reinterpret_cast<CUgraph>(0x9);
    gd.node = reinterpret_cast<CUgraphNode>(0x10);
    CUpti_ResourceData rd{};
    rd.resourceDescriptor = &gd;
    fake_.callback(fake_.userdata, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,
                   &rd);
    exit(CbDomain::Driver, 307, 51);
  });
  EXPECT_EQ(stats().captured.load(), 1u);
  expect_left_no_trace(51);
}

// At low rate limits the launch rate is learned first: the coin's picks meanwhile are counted,
// not announced (subscription_plan.h, kLearnNs).
TEST_F(LaunchPath, PicksWhileTheLaunchRateIsLearnedAreCountedNotAnnounced) {
  config_.eager_rate_limit = 100;
  config_.graph_rate_limit = 20;
  build_attached();
  on_new_thread([&] {
    for (uint32_t i = 1; i <= 50; ++i) driver_launch(i);
  });
  EXPECT_EQ(announced(), 0u);
  EXPECT_EQ(stats().learning.load(), 50u);
  EXPECT_EQ(inflight(), 0);
}

// The watcher sets the coin's mean from the launches it counted (LaunchSwitch::adapt_coin); the
// launch path then picks one launch in `mean`, by count: over 20,000 launches the picks are
// within five standard deviations of 20,000 / mean. (Picks are announced or, above the safety
// cap, counted rate_limited: both are the coin's.)
TEST_F(LaunchPath, TheCoinPicksOneLaunchInItsMeanOnceTheWatcherSetIt) {
  config_.eager_rate_limit = 2000;  // above kLowRateLimit: nothing to learn
  config_.graph_rate_limit = 20;
  build_attached();
  EXPECT_EQ(callbacks_->role().coin.mean(), 1);
  constexpr uint32_t kN = 20000;
  on_new_thread([&] {
    for (uint32_t i = 1; i <= kN; ++i) driver_launch(i);
  });
  // At least the coin's interval after the callbacks went on: 20,000 launches in that time or a
  // few seconds are thousands a second, at least twice the limit.
  switch_->on_tick(monotonic_ns() + kCoinTickNs);
  const double mean = callbacks_->role().coin.mean();
  ASSERT_GE(mean, 2) << "the mean follows the launch rate counted";
  const uint64_t picks_before = announced() + stats().rate_limited.load();
  on_new_thread([&] {
    for (uint32_t i = kN + 1; i <= 2 * kN; ++i) driver_launch(i);
  });
  const double picks =
      static_cast<double>(announced() + stats().rate_limited.load() - picks_before);
  const double expected = kN / mean;
  EXPECT_NEAR(picks, expected, 5 * std::sqrt(expected) + 2) << "mean " << mean;
}

}  // namespace
}  // namespace parcagpu::fake_launch
