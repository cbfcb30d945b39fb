// The profiler's wiring (profiler.h) on the fake CUPTI table (fake_launch_cupti.h, resolved as
// libcupti's symbols would be): it starts on it and serves a consumer attached before it started;
// a CUPTI call that fails is said once, counted, and the application goes on; shutdown delivers
// what was collected before it lets go of the subscription, once.
#include "profiler/profiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "error_sites.h"
#include "fake_launch_cupti.h"

namespace parcagpu::fake_launch {
namespace {

using testing_sites::site_count;

// The fake table of the launch tests (LaunchFixture, nothing built) with what the profiler calls
// besides, resolved as libcupti's would be.
class ProfilerTest : public LaunchFixture {
 public:
  void SetUp() override {
    LaunchFixture::SetUp();
    api_.cuptiGetVersion = &fake_version;
    api_.cuptiActivityRegisterCallbacks = &fake_register_callbacks;
    api_.cuptiActivityGetNextRecord = &fake_next_record;
    ASSERT_TRUE(resolve_fake(api_, &resolved_));
    config_.pc_sampling = false;
  }
  void TearDown() override {
    parcagpu_kernel_executed_semaphore = 0;
    LaunchFixture::TearDown();
  }
  bool on(CbDomain d, uint32_t cbid) const {
    return fake_.enabled.count({static_cast<int>(d), cbid}) != 0;
  }
  // A profiler started for a cuda_correlation consumer, and shut down if it started: whether it
  // started, whether the launch cbids were on meanwhile, and what it said.
  struct Run {
    bool started;
    bool launches_on;
    std::string said;
  };
  Run start_and_stop() {
    parcagpu_cuda_correlation_semaphore = 1;
    testing::internal::CaptureStderr();
    Run run{};
    {
      Profiler profiler(config_);
      run.started = profiler.start(resolved_, nullptr);
      run.launches_on = on(CbDomain::Driver, 307);
      if (run.started) profiler.shutdown();
    }
    run.said = testing::internal::GetCapturedStderr();
    return run;
  }

  CuptiApi resolved_;
};

// A consumer of launches and kernels attached before the process started: served before start
// returns (the first launch is already sampled). Shutdown flushes kernel activity (what was
// collected is delivered) before the callbacks go off and the subscription goes, and only once.
TEST_F(ProfilerTest, StartsOnTheFakeTableAndShutsDownInOrder) {
  parcagpu_cuda_correlation_semaphore = 1;
  parcagpu_kernel_executed_semaphore = 1;
  Profiler profiler(config_);
  ASSERT_TRUE(profiler.start(resolved_, nullptr));
  EXPECT_TRUE(fake_.subscribed);
  EXPECT_TRUE(on(CbDomain::Resource, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED)) << "from start";
  EXPECT_TRUE(on(CbDomain::Driver, 307)) << "launches on for the consumer already there";
  EXPECT_TRUE(on(CbDomain::Runtime, 211));
  const size_t before = fake_.calls_made();
  profiler.shutdown();
  const std::vector<std::string> calls(fake_.calls.begin() + before, fake_.calls.end());
  const auto first_disable = std::find(calls.begin(), calls.end(), "disable");
  ASSERT_NE(first_disable, calls.end());
  EXPECT_NE(std::find(calls.begin(), first_disable, "flush_all"), first_disable)
      << "kernel activity flushed before the callbacks go off";
  EXPECT_EQ(std::find(first_disable, calls.end(), "flush_all"), calls.end())
      << "no flush after the callbacks went off";
  EXPECT_EQ(calls.back(), "unsubscribe");
  EXPECT_FALSE(fake_.subscribed);
  EXPECT_TRUE(fake_.enabled.empty()) << "every callback the library enabled is off";
  const size_t after = fake_.calls_made();
  profiler.shutdown();
  EXPECT_EQ(fake_.calls_made(), after) << "a second shutdown does nothing";
}

// CUPTI refuses the launch cbids when a consumer comes: said once, counted per cbid, and the
// application goes on: the profiler started, its launches run without the library, and it shuts
// down as ever.
TEST_F(ProfilerTest, AFailingCuptiCallIsSaidOnceCountedAndTheApplicationGoesOn) {
  fake_.enable_result = [](CbDomain domain, uint32_t cbid, uint32_t on) {
    const auto *cb = find_subscribed(domain, cbid);
    return on && cb && is_launch_role(cb->role) ? CUPTI_ERROR_UNKNOWN : CUPTI_SUCCESS;
  };
  const uint64_t before = site_count("enabling or disabling launch callbacks failed");
  const Run run = start_and_stop();
  EXPECT_TRUE(run.started);
  EXPECT_FALSE(run.launches_on);
  EXPECT_GE(site_count("enabling or disabling launch callbacks failed"), before + 2)
      << "every refused cbid counted";
  testing_sites::expect_said_once(run.said, "may go unannounced", before);
  EXPECT_FALSE(fake_.subscribed);
}

// Kernel activity cannot be registered: said, and the profiler runs on without kernel timing.
TEST_F(ProfilerTest, WithoutKernelActivityTheProfilerStillStarts) {
  fake_.register_result = CUPTI_ERROR_NOT_SUPPORTED;
  const Run run = start_and_stop();
  EXPECT_TRUE(run.started);
  EXPECT_TRUE(run.launches_on) << "cuda_correlation is served without kernel timing";
  EXPECT_NE(run.said.find("kernel timing will not be collected"), std::string::npos) << run.said;
  EXPECT_EQ(fake_.activity_flushes, 0);
}

// Another CUPTI client holds the one subscription: the profiler stays inert, said, nothing
// enabled.
TEST_F(ProfilerTest, ARefusedSubscriptionLeavesTheLibraryInert) {
  fake_.subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  const Run run = start_and_stop();
  EXPECT_FALSE(run.started);
  EXPECT_TRUE(fake_.enabled.empty());
  EXPECT_NE(run.said.find("parcagpu stays inert"), std::string::npos) << run.said;
}

}  // namespace
}  // namespace parcagpu::fake_launch
