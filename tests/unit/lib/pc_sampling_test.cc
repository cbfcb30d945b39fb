// PcSampler, the launch path's side of PC sampling, on the fake PC Sampling API table
// (fake_pc_cupti.h): init decides whether PC sampling can run here at all (config, entry points,
// CUPTI's API version), and then nothing of it runs without a consumer of pc_sample_batch and
// cuda_correlation; with both, a launch enables it and shutdown disables it again. PcSampler reads
// the real monotonic clock, so its tests only rely on the first episode falling due at once.
#include "pc/pc_sampling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "attached_consumer.h"
#include "base/clock.h"
#include "base/usdt.h"
#include "pc_episodes_fixture.h"

namespace parcagpu::fake_pc {
namespace {

uint32_t g_version = 22;
CUptiResult CUPTIAPI fake_version(uint32_t *v) {
  *v = g_version;
  return CUPTI_SUCCESS;
}

class PcSamplerTest : public EpisodesFixture {
 public:
  void SetUp() override {
    EpisodesFixture::SetUp();
    g_version = 22;  // CUDA 12.4's CUPTI, the first with correlation IDs in PC records
    api_.cuptiGetVersion = &fake_version;
    config_.pc_sampling = true;
  }
  void TearDown() override {
    if (sampler_) sampler_->shutdown();
    sampler_.reset();
    EpisodesFixture::TearDown();
  }
  void make() {
    sampler_ = std::make_unique<PcSampler>(api_, nullptr, config_, &activity_, nullptr);
    sampler_->init();
    sampler_->set_launches_observed(true);
  }
  // Launches on context 0 (entered and left) until one made `call`, for at most a second of the
  // real clock: how many it took, -1 if none did.
  int launches_until(const char *call) {
    const uint64_t until = monotonic_ns() + kSec;
    for (int i = 0; monotonic_ns() < until; ++i) {
      const size_t before = fake_.calls.size();
      sampler_->on_launch_enter(context(0), monotonic_ns());
      sampler_->on_launch_exit();
      if (std::find(fake_.calls.begin() + before, fake_.calls.end(), call) != fake_.calls.end())
        return i;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return -1;
  }
  // Whether PcSampler takes part at all: the launch path is needed, an episode is scheduled, a
  // launch makes a PC Sampling API call (consumers attached throughout).
  void expect_off() {
    Attached samples(parcagpu_pc_sample_batch_semaphore);
    Attached launches(parcagpu_cuda_correlation_semaphore);
    EXPECT_FALSE(sampler_->needs_launches(monotonic_ns() + 1000 * kSec));
    EXPECT_EQ(sampler_->next_episode_ns(), 0u);
    launch_n(20);
    EXPECT_TRUE(fake_.calls.empty()) << fake_.calls.front();
  }
  void launch_n(int n) {
    for (int i = 0; i < n; ++i) {
      sampler_->on_launch_enter(context(0), monotonic_ns());
      sampler_->on_launch_exit();
    }
  }

  std::unique_ptr<PcSampler> sampler_;
};

TEST_F(PcSamplerTest, OffByConfigTakesNoPart) {
  config_.pc_sampling = false;
  make();
  expect_off();
}

TEST_F(PcSamplerTest, OffWhenAnEntryPointIsMissing) {
  api_.cuptiPCSamplingStop = nullptr;
  make();
  expect_off();
}

TEST_F(PcSamplerTest, OffBeforeCuda124sCupti) {
  g_version = 21;  // CUDA 12.3's: PC records without the correlation ID
  make();
  expect_off();
}

TEST_F(PcSamplerTest, UsableButIdleWithoutBothConsumers) {
  make();
  {
    Attached samples(parcagpu_pc_sample_batch_semaphore);  // no cuda_correlation consumer
    EXPECT_FALSE(sampler_->needs_launches(monotonic_ns() + 1000 * kSec));
    EXPECT_EQ(sampler_->next_episode_ns(), 0u);
    launch_n(20);
  }
  EXPECT_TRUE(fake_.calls.empty()) << fake_.calls.front();
  // Both attached: an episode is due now, so the launch callbacks are needed.
  Attached samples(parcagpu_pc_sample_batch_semaphore);
  Attached launches(parcagpu_cuda_correlation_semaphore);
  EXPECT_NE(sampler_->next_episode_ns(), 0u);
  EXPECT_TRUE(sampler_->needs_launches(monotonic_ns() + 1000 * kSec));
}

TEST_F(PcSamplerTest, ALaunchEnablesAndShutdownDisables) {
  make();
  Attached samples(parcagpu_pc_sample_batch_semaphore);
  Attached launches(parcagpu_cuda_correlation_semaphore);
  ASSERT_GE(launches_until("Enable"), 0);
  EXPECT_TRUE(activity_.held_on) << "kernel activity is held on before PC sampling is enabled";
  const auto enable = std::find(fake_.calls.begin(), fake_.calls.end(), "Enable");
  EXPECT_EQ(fake_.contexts[enable - fake_.calls.begin()], context(0));
  EXPECT_TRUE(sampler_->needs_launches(monotonic_ns())) << "enabled: launches must reach it";
  EXPECT_GE(sampler_->stats().episodes, 1u);
  const size_t before = fake_.calls.size();
  sampler_->shutdown();
  EXPECT_NE(std::find(fake_.calls.begin() + before, fake_.calls.end(), "Disable"),
            fake_.calls.end());
  EXPECT_FALSE(sampler_->needs_launches(monotonic_ns())) << "disabled, and the episode over";
  sampler_.reset();
}

}  // namespace
}  // namespace parcagpu::fake_pc
