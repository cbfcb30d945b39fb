// ActivityToggle on a fake CUPTI table: the enable and disable calls, the back-offs after a
// failure, the recording word and the switch-off times.
#include "activity/activity_toggle.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;

struct FakeCupti {
  int enables = 0, disables = 0;
  CUptiResult enable_result = CUPTI_SUCCESS, disable_result = CUPTI_SUCCESS;
  uint64_t timestamp = 0;                  // CUPTI's clock
  const ActivityToggle *toggle = nullptr;  // its recording word read inside each call
  uint64_t word_in_call = 0;
};
FakeCupti *g_fake = nullptr;

CUptiResult fake_enable(CUpti_ActivityKind) {
  ++g_fake->enables;
  if (g_fake->toggle) g_fake->word_in_call = g_fake->toggle->recording_word();
  return g_fake->enable_result;
}
CUptiResult fake_disable(CUpti_ActivityKind) {
  ++g_fake->disables;
  if (g_fake->toggle) g_fake->word_in_call = g_fake->toggle->recording_word();
  return g_fake->disable_result;
}
CUptiResult fake_timestamp(uint64_t *ts) {
  *ts = g_fake->timestamp;
  return CUPTI_SUCCESS;
}

class ActivityToggleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_fake = &fake_;
    api_.cuptiActivityEnable = &fake_enable;
    api_.cuptiActivityDisable = &fake_disable;
    api_.cuptiGetTimestamp = &fake_timestamp;
  }
  void TearDown() override { g_fake = nullptr; }

  FakeCupti fake_;
  CuptiApi api_;
};

TEST_F(ActivityToggleTest, EachSwitchIsOneCallAndCountedWhenItSucceeds) {
  ActivityToggle t(api_);
  EXPECT_FALSE(t.on());
  t.disable(kSec, false);
  EXPECT_EQ(fake_.disables, 0) << "already off";
  EXPECT_TRUE(t.enable(kSec));
  EXPECT_TRUE(t.enable(kSec));
  EXPECT_EQ(fake_.enables, 1) << "already on";
  EXPECT_TRUE(t.on());
  t.disable(kSec, false);
  EXPECT_FALSE(t.on());
  EXPECT_EQ(fake_.disables, 1);
  EXPECT_EQ(t.enables(), 1u);
  EXPECT_EQ(t.disables(), 1u);
}

TEST_F(ActivityToggleTest, AFailedEnableIsTriedAgainOnlyAfterFiveSeconds) {
  ActivityToggle t(api_);
  fake_.enable_result = CUPTI_ERROR_NOT_COMPATIBLE;
  EXPECT_FALSE(t.enable(kSec));
  fake_.enable_result = CUPTI_SUCCESS;
  EXPECT_FALSE(t.enable(6 * kSec - 1));
  EXPECT_EQ(fake_.enables, 1) << "CUPTI not asked within the back-off";
  EXPECT_TRUE(t.enable(6 * kSec));
  EXPECT_EQ(t.enables(), 1u) << "the failure is not counted as an enable";
}

TEST_F(ActivityToggleTest, AFailedDisableLeavesItOnAndIsTriedAgainAfterASecondOrWhenForced) {
  ActivityToggle t(api_);
  ASSERT_TRUE(t.enable(kSec));
  fake_.disable_result = CUPTI_ERROR_UNKNOWN;
  t.disable(kSec, false);
  EXPECT_TRUE(t.on());
  fake_.disable_result = CUPTI_SUCCESS;
  t.disable(kSec + 999 * kMs, false);
  EXPECT_EQ(fake_.disables, 1) << "within the back-off";
  EXPECT_TRUE(t.on());
  t.disable(kSec + 999 * kMs, /*ignore_back_off=*/true);
  EXPECT_FALSE(t.on());
  EXPECT_EQ(t.disables(), 1u);
}

TEST_F(ActivityToggleTest, TheRecordingWordIsUnsettledDuringACallAndSaysOnAfter) {
  ActivityToggle t(api_);
  fake_.toggle = &t;
  const uint64_t off = t.recording_word();
  EXPECT_FALSE(ActivityToggle::recording_on(off));
  EXPECT_TRUE(ActivityToggle::recording_settled(off, t.recording_word()));
  ASSERT_TRUE(t.enable(kSec));
  EXPECT_FALSE(ActivityToggle::recording_settled(fake_.word_in_call, fake_.word_in_call));
  const uint64_t on = t.recording_word();
  EXPECT_TRUE(ActivityToggle::recording_on(on));
  EXPECT_FALSE(ActivityToggle::recording_settled(off, on));
  EXPECT_TRUE(ActivityToggle::recording_settled(on, t.recording_word()));
  fake_.disable_result = CUPTI_ERROR_UNKNOWN;
  t.disable(kSec, false);
  EXPECT_TRUE(ActivityToggle::recording_on(t.recording_word())) << "a failed disable: still on";
  EXPECT_NE(t.recording_word(), on) << "but a call came between";
}

TEST_F(ActivityToggleTest, OnlyASuccessfulDisableIsRememberedOnCuptisClock) {
  ActivityToggle t(api_);
  ASSERT_TRUE(t.enable(kSec));
  fake_.timestamp = 100;
  fake_.disable_result = CUPTI_ERROR_UNKNOWN;
  t.disable(kSec, false);
  EXPECT_FALSE(t.went_off_between(50, 150));
  fake_.disable_result = CUPTI_SUCCESS;
  fake_.timestamp = 200;
  t.disable(kSec, /*ignore_back_off=*/true);
  EXPECT_TRUE(t.went_off_between(150, 250));
  EXPECT_FALSE(t.went_off_between(201, 250));
}

}  // namespace
}  // namespace parcagpu
