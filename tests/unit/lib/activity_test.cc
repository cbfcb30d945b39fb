// ActivityCollector built on a fake CUPTI table as the profiler builds it: registration, arming,
// the housekeeping's schedule (a flush every interval, at once on request), kernels of announced
// launches delivered from the buffers a flush hands back, the losses of a consumer's detach, and
// the drain at exit.
#include "activity/activity.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "fake_activity_cupti.h"
#include "trackers/correlation_tracker.h"
#include "trackers/graph_tracker.h"

namespace parcagpu {
namespace {

using namespace fake_activity;

constexpr uint64_t kMs = 1'000'000;

struct CountedWake : WatcherWake {
  void wake() override { ++wakes; }
  int wakes = 0;
};

class ActivityCollectorTest : public ActivityFixture {
 protected:
  void SetUp() override {
    ActivityFixture::SetUp();
    config_.activity_mode = ActivityMode::WhileConsumer;
    config_.activity_host_memory = false;
    config_.flush_interval_ms = 100;
    collector_ = std::make_unique<ActivityCollector>(api_, config_, tracker_, graphs_, nullptr,
                                                     nullptr, &wake_);
  }
  void TearDown() override {
    collector_.reset();
    ActivityFixture::TearDown();
  }
  bool kernels_enabled() const {
    return std::count(fake_.enabled.begin(), fake_.enabled.end(),
                      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) >
           std::count(fake_.disabled.begin(), fake_.disabled.end(),
                      CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  }

  Config config_;
  CorrelationTracker tracker_{1024, 30'000'000'000ull};
  GraphTracker graphs_{api_, nullptr};
  CountedWake wake_;
  std::unique_ptr<ActivityCollector> collector_;
};

TEST_F(ActivityCollectorTest, ARefusedRegistrationIsSaidAndLeavesNoCollection) {
  fake_.register_result = CUPTI_ERROR_NOT_INITIALIZED;
  testing::internal::CaptureStderr();
  EXPECT_FALSE(collector_->init());
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("kernel timing will not be collected"), std::string::npos) << said;
}

TEST_F(ActivityCollectorTest, TheHousekeepingFlushesEveryIntervalOnceArmed) {
  ASSERT_TRUE(collector_->init());
  const uint64_t t = 5'000 * kMs;
  EXPECT_EQ(collector_->on_tick(t), ~uint64_t{0}) << "nothing before the first arm";
  collector_->arm(true);
  EXPECT_TRUE(kernels_enabled());
  EXPECT_EQ(collector_->on_tick(t), t + 100 * kMs) << "the first round one interval later";
  EXPECT_EQ(fake_.flushes, 0);
  EXPECT_EQ(collector_->on_tick(t + 99 * kMs), t + 100 * kMs);
  EXPECT_EQ(fake_.flushes, 0);
  EXPECT_GT(collector_->on_tick(t + 100 * kMs), t + 100 * kMs);
  EXPECT_EQ(fake_.flushes, 1);
  EXPECT_EQ(collector_->stats().buffers.flushes, 1u);
}

TEST_F(ActivityCollectorTest, ARequestedFlushWakesTheWatcherOnceAndRunsAtItsNextTick) {
  ASSERT_TRUE(collector_->init());
  collector_->arm(true);
  const uint64_t t = 5'000 * kMs;
  collector_->on_tick(t);
  collector_->request_flush();
  collector_->request_flush();
  EXPECT_EQ(wake_.wakes, 1) << "once until the watcher takes it";
  collector_->on_tick(t + kMs);
  EXPECT_EQ(fake_.flushes, 1);
}

TEST_F(ActivityCollectorTest, KernelsOfAnnouncedLaunchesArriveWithAFlush) {
  ASSERT_TRUE(collector_->init());
  collector_->arm(true);
  for (uint32_t c = 1; c <= 3; ++c) ASSERT_TRUE(tracker_.insert(c, LaunchKind::Eager, 1));
  for (uint32_t c = 1; c <= 4; ++c) add_kernel(&fake_.on_flush, c);  // 4: not announced
  collector_->request_flush();
  collector_->on_tick(5'000 * kMs);
  const ActivityStats s = collector_->stats();
  EXPECT_EQ(s.buffers.completed, 1u);
  EXPECT_EQ(s.buffers.kernel_records, 4u);
  EXPECT_EQ(s.kernels.delivered, 3u);
  EXPECT_EQ(s.kernels.batches, 1u);
  EXPECT_EQ(tracker_.pending(), 0u);
}

// The last kernel consumer left with announced launches still waiting: they reach nobody, said,
// counted and forgotten.
TEST_F(ActivityCollectorTest, DisarmingSaysLaunchesStillWaitingUnheard) {
  ASSERT_TRUE(collector_->init());
  collector_->arm(true);
  ASSERT_TRUE(tracker_.insert(5, LaunchKind::Eager, 1));
  ASSERT_TRUE(tracker_.insert(6, LaunchKind::Eager, 1));
  collector_->arm(false);
  EXPECT_FALSE(kernels_enabled());
  EXPECT_EQ(fake_.flushes, 1) << "disarming flushes what was collected";
  EXPECT_EQ(collector_->stats().launches_unheard, 2u);
  EXPECT_EQ(tracker_.pending(), 0u);
}

// At exit the kernels of launches still waiting come with the exit's flush: delivered, not
// dropped as unheard by the disarm, and activity is switched off.
TEST_F(ActivityCollectorTest, ShutdownDeliversWhatItsFlushBringsAndSwitchesOff) {
  ASSERT_TRUE(collector_->init());
  collector_->arm(true);
  for (uint32_t c = 7; c <= 8; ++c) {
    ASSERT_TRUE(tracker_.insert(c, LaunchKind::Eager, 1));
    add_kernel(&fake_.on_flush, c);
  }
  collector_->shutdown();
  EXPECT_FALSE(kernels_enabled());
  EXPECT_GE(fake_.flushes, 1);
  EXPECT_EQ(collector_->stats().kernels.delivered, 2u);
  EXPECT_EQ(collector_->stats().launches_unheard, 0u);
  EXPECT_EQ(tracker_.pending(), 0u);
}

}  // namespace
}  // namespace parcagpu
