// PcContextSwitch (src/pc/pc_context_switch.h) on the fake PC Sampling API table: Enable with
// kernel activity held on first, configured with the process's one sampling factor, Get Data and
// Disable published, and the first failure turning PC sampling off for the process.
#include "pc/pc_context_switch.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/subsystem_links.h"
#include "fake_pc_cupti.h"
#include "pc/pc_contexts.h"
#include "pc/pc_device_lock.h"
#include "pc/pc_launch_state.h"
#include "pc/pc_metadata.h"
#include "pc/pc_publish.h"
#include "pc/pc_stats.h"

namespace parcagpu {
namespace {

using namespace fake_pc;

CUcontext ctx(uintptr_t i) { return reinterpret_cast<CUcontext>(0x1000 + i); }

// Kernel activity's side, recorded among the PC Sampling API calls (the order matters, P12).
struct RecordingActivity : KernelActivityControl {
  void hold_on(bool on) override {
    held_on = on;
    g_fake->calls.push_back(on ? "activity on" : "activity let go");
  }
  bool hold_off(bool) override { return true; }
  void request_flush() override {}
  bool held_on = false;
};

class PcContextSwitchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    install(api_, fake_);
    char dir[] = "/tmp/parcagpu-pc-switch-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    config_.pc_lock_dir = dir;
    state_.usable = true;
  }
  void TearDown() override {
    std::filesystem::remove_all(config_.pc_lock_dir);
    g_fake = nullptr;
  }
  size_t made(const char *call) const {
    return std::count(fake_.calls.begin(), fake_.calls.end(), call);
  }
  const CUpti_PCSamplingConfigurationInfo *configured_period() const {
    for (const auto &i : fake_.configured)
      if (i.attributeType == CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD) return &i;
    return nullptr;
  }

  FakePc fake_;
  CuptiApi api_;
  Config config_;
  RecordingActivity activity_;
  PcLaunchState state_;
  PcStats stats_;
  PcMetadata meta_{api_, nullptr};
  PcPublisher publisher_{state_, nullptr};
  PcContexts contexts_{api_, nullptr, config_};
  PcContextSwitch switch_{api_, config_, &activity_, state_, meta_, publisher_, contexts_, stats_};
};

TEST_F(PcContextSwitchTest, EnableHoldsKernelActivityOnFirstThenConfigures) {
  PcContext &c = contexts_.find_or_add(ctx(0));
  ASSERT_TRUE(switch_.enable(c));
  EXPECT_EQ(fake_.calls, (std::vector<std::string>{"activity on", "Enable", "GetNumStallReasons",
                                                   "GetStallReasons", "SetConfigurationAttribute",
                                                   "GetConfigurationAttribute", "GetDeviceId"}));
  EXPECT_TRUE(c.enabled);
  EXPECT_TRUE(c.ever_enabled);
  EXPECT_EQ(c.device, 2u);
  EXPECT_TRUE(state_.enabled_here(ctx(0)));
  EXPECT_TRUE(state_.any_enabled.load());
  EXPECT_EQ(stats_.enables, 1u);
  EXPECT_EQ(stats_.sampling_factor, 5u) << "the factor in force, read back";
}

TEST_F(PcContextSwitchTest, AGraphRegistrationLeavesKernelActivityAsItIs) {
  ASSERT_TRUE(switch_.enable(contexts_.find_or_add(ctx(0)), /*kernel_activity=*/false));
  EXPECT_FALSE(activity_.held_on);
  EXPECT_EQ(fake_.calls.front(), "Enable");
}

TEST_F(PcContextSwitchTest, EveryDeviceIsAskedForTheFirstDevicesFactor) {
  config_.sampling_factor = 0;  // CUPTI's default: 5 here, read back
  ASSERT_TRUE(switch_.enable(contexts_.find_or_add(ctx(0))));
  EXPECT_EQ(configured_period(), nullptr) << "CUPTI's default left alone on the first";
  fake_.period_in_force = 7;  // the second device's default differs
  ASSERT_TRUE(switch_.enable(contexts_.find_or_add(ctx(1))));
  ASSERT_NE(configured_period(), nullptr);
  EXPECT_EQ(configured_period()->attributeData.samplingPeriodData.samplingPeriod, 5u);
  EXPECT_EQ(stats_.sampling_factor, 7u) << "what the device ended up with, said";
}

TEST_F(PcContextSwitchTest, KernelActivityIsLetGoWithTheLastEnabledContext) {
  PcContext &a = contexts_.find_or_add(ctx(0));
  PcContext &b = contexts_.find_or_add(ctx(1));
  ASSERT_TRUE(switch_.enable(a));
  ASSERT_TRUE(switch_.enable(b));
  switch_.disable_quietly(a);
  EXPECT_TRUE(activity_.held_on);
  EXPECT_TRUE(state_.any_enabled.load());
  EXPECT_FALSE(state_.enabled_here(ctx(0)));
  switch_.disable_quietly(b);
  EXPECT_FALSE(activity_.held_on);
  EXPECT_FALSE(state_.any_enabled.load());
  EXPECT_EQ(stats_.disables, 2u);
  EXPECT_TRUE(a.ever_enabled);
}

TEST_F(PcContextSwitchTest, DrainGetsDataAndAFailedGetDataTurnsPcSamplingOff) {
  PcContext &c = contexts_.find_or_add(ctx(0));
  ASSERT_TRUE(switch_.enable(c));
  switch_.drain(c);
  EXPECT_EQ(made("GetData"), 1u);
  EXPECT_EQ(stats_.drains, 1u);
  EXPECT_TRUE(state_.usable.load());
  fake_.failing = "GetData";
  switch_.drain(c);
  EXPECT_FALSE(state_.usable.load());
  EXPECT_TRUE(stats_.failed);
}

TEST_F(PcContextSwitchTest, AFailedDisableTurnsPcSamplingOff) {
  PcContext &c = contexts_.find_or_add(ctx(0));
  ASSERT_TRUE(switch_.enable(c));
  fake_.failing = "Disable";
  switch_.disable_quietly(c);
  EXPECT_FALSE(state_.usable.load());
  EXPECT_EQ(stats_.disables, 0u);
}

TEST_F(PcContextSwitchTest, AFailureDisablesEveryContextStopsTheWindowAndIsSaidOnce) {
  PcContext &a = contexts_.find_or_add(ctx(0));
  PcContext &b = contexts_.find_or_add(ctx(1));
  PcContext &never = contexts_.find_or_add(ctx(2));
  ASSERT_TRUE(switch_.enable(a));
  ASSERT_TRUE(switch_.enable(b));
  ASSERT_TRUE(contexts_.lock_gpu(a, 1, stats_));
  contexts_.set_episode(&a);
  state_.window_open = true;
  state_.drain_pending = true;
  fake_.calls.clear();
  fake_.contexts.clear();
  switch_.fail({CUPTI_ERROR_UNKNOWN, "cuptiPCSamplingStart"});
  EXPECT_EQ(fake_.calls,
            (std::vector<std::string>{"Stop", "Disable", "Disable", "activity let go"}));
  EXPECT_EQ(fake_.contexts, (std::vector<CUcontext>{ctx(0), ctx(0), ctx(1)}));
  EXPECT_FALSE(a.enabled || b.enabled || never.enabled);
  EXPECT_FALSE(state_.usable.load() || state_.any_enabled.load() || state_.window_open.load() ||
               state_.drain_pending.load());
  EXPECT_EQ(contexts_.episode(), nullptr);
  EXPECT_EQ(stats_.disables, 2u);
  PcDeviceLocks other(config_.pc_lock_dir);
  EXPECT_EQ(other.try_acquire("any"), PcDeviceLocks::Result::kAcquired) << "GPU lock given back";
  other.release("any");
  // Once: a second failure finds PC sampling off already.
  const size_t calls = fake_.calls.size();
  switch_.fail({CUPTI_ERROR_UNKNOWN, "cuptiPCSamplingStop"});
  EXPECT_EQ(fake_.calls.size(), calls);
}

}  // namespace
}  // namespace parcagpu
