// ActivityToggle on a fake CUPTI table: the enable and disable calls, the back-offs after a
// failure, the recording word and the switch-off times.
#include "activity/activity_toggle.h"

#include <gtest/gtest.h>

#include "fake_launch_cupti.h"

namespace parcagpu {
namespace {

constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;

using fake_launch::FakeCupti;
using fake_launch::g_fake;

class ActivityToggleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_launch::install(fake_, api_);
    fake_.timestamp = 0;  // CUPTI's clock
  }
  void TearDown() override { g_fake = nullptr; }

  FakeCupti fake_;
  CuptiApi api_;
};

TEST_F(ActivityToggleTest, EachSwitchIsOneCallAndCountedWhenItSucceeds) {
  ActivityToggle t(api_);
  EXPECT_FALSE(t.on());
  t.disable(kSec, false);
  EXPECT_EQ(fake_.activity_disables, 0) << "already off";
  EXPECT_TRUE(t.enable(kSec));
  EXPECT_TRUE(t.enable(kSec));
  EXPECT_EQ(fake_.activity_enables, 1) << "already on";
  EXPECT_TRUE(t.on());
  t.disable(kSec, false);
  EXPECT_FALSE(t.on());
  EXPECT_EQ(fake_.activity_disables, 1);
  EXPECT_EQ(t.enables(), 1u);
  EXPECT_EQ(t.disables(), 1u);
}

TEST_F(ActivityToggleTest, AFailedEnableIsTriedAgainOnlyAfterFiveSeconds) {
  ActivityToggle t(api_);
  fake_.activity_enable_result = CUPTI_ERROR_NOT_COMPATIBLE;
  EXPECT_FALSE(t.enable(kSec));
  fake_.activity_enable_result = CUPTI_SUCCESS;
  EXPECT_FALSE(t.enable(6 * kSec - 1));
  EXPECT_EQ(fake_.activity_enables, 1) << "CUPTI not asked within the back-off";
  EXPECT_TRUE(t.enable(6 * kSec));
  EXPECT_EQ(t.enables(), 1u) << "the failure is not counted as an enable";
}

TEST_F(ActivityToggleTest, AFailedDisableLeavesItOnAndIsTriedAgainAfterASecondOrWhenForced) {
  ActivityToggle t(api_);
  ASSERT_TRUE(t.enable(kSec));
  fake_.activity_disable_result = CUPTI_ERROR_UNKNOWN;
  t.disable(kSec, false);
  EXPECT_TRUE(t.on());
  fake_.activity_disable_result = CUPTI_SUCCESS;
  t.disable(kSec + 999 * kMs, false);
  EXPECT_EQ(fake_.activity_disables, 1) << "within the back-off";
  EXPECT_TRUE(t.on());
  t.disable(kSec + 999 * kMs, /*ignore_back_off=*/true);
  EXPECT_FALSE(t.on());
  EXPECT_EQ(t.disables(), 1u);
}

TEST_F(ActivityToggleTest, TheRecordingWordIsUnsettledDuringACallAndSaysOnAfter) {
  ActivityToggle t(api_);
  uint64_t word_in_call = 0;  // the recording word inside each enable and disable
  fake_.inside_activity_call = [&] { word_in_call = t.recording_word(); };
  const uint64_t off = t.recording_word();
  EXPECT_FALSE(ActivityToggle::recording_on(off));
  EXPECT_TRUE(ActivityToggle::recording_settled(off, t.recording_word()));
  ASSERT_TRUE(t.enable(kSec));
  EXPECT_FALSE(ActivityToggle::recording_settled(word_in_call, word_in_call));
  const uint64_t on = t.recording_word();
  EXPECT_TRUE(ActivityToggle::recording_on(on));
  EXPECT_FALSE(ActivityToggle::recording_settled(off, on));
  EXPECT_TRUE(ActivityToggle::recording_settled(on, t.recording_word()));
  fake_.activity_disable_result = CUPTI_ERROR_UNKNOWN;
  t.disable(kSec, false);
  EXPECT_TRUE(ActivityToggle::recording_on(t.recording_word())) << "a failed disable: still on";
  EXPECT_NE(t.recording_word(), on) << "but a call came between";
}

TEST_F(ActivityToggleTest, OnlyASuccessfulDisableIsRememberedOnCuptisClock) {
  ActivityToggle t(api_);
  ASSERT_TRUE(t.enable(kSec));
  fake_.timestamp = 100;
  fake_.activity_disable_result = CUPTI_ERROR_UNKNOWN;
  t.disable(kSec, false);
  EXPECT_FALSE(t.went_off_between(50, 150));
  fake_.activity_disable_result = CUPTI_SUCCESS;
  fake_.timestamp = 200;
  t.disable(kSec, /*ignore_back_off=*/true);
  EXPECT_TRUE(t.went_off_between(150, 250));
  EXPECT_FALSE(t.went_off_between(201, 250));
}

}  // namespace
}  // namespace parcagpu
