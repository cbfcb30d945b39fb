// ExtraKinds on a fake CUPTI table: the copy and fill kinds go on and off with kernel activity
// while their consumers want them, and a failing enable is said once, counted, and tried again at
// the next switch.
#include "activity/extra_kinds.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_activity_cupti.h"

namespace parcagpu {
namespace {

using namespace fake_activity;

const std::vector<CUpti_ActivityKind> kCopiesAndFills = {
    CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMCPY2};

Consumers copy_consumer() {
  Consumers c;
  c.memory_batch = 1;
  c.activity_batch = 1;
  return c;
}

class ExtraKindsTest : public ActivityFixture {};

TEST_F(ExtraKindsTest, CopiesAndFillsFollowKernelActivityWhileWanted) {
  ExtraKinds extra(api_);
  extra.want(wanted_kinds(copy_consumer()), false);
  EXPECT_TRUE(fake_.enabled.empty()) << "kernel activity is off: so are they";
  extra.follow(true);
  EXPECT_EQ(fake_.enabled, kCopiesAndFills) << "never CONCURRENT_KERNEL: the toggle's";
  extra.follow(true);
  EXPECT_EQ(fake_.enabled.size(), 3u) << "on already";
  extra.follow(false);
  EXPECT_EQ(fake_.disabled, kCopiesAndFills);
  // No longer wanted while kernel activity is on: off at once, and kept off.
  extra.follow(true);
  extra.want(0, true);
  EXPECT_EQ(fake_.disabled.size(), 6u);
  extra.follow(true);
  EXPECT_EQ(fake_.enabled.size(), 6u);
}

TEST_F(ExtraKindsTest, AFailedEnableIsSaidOnceCountedAndTriedAgain) {
  ExtraKinds extra(api_);
  extra.want(wanted_kinds(copy_consumer()), false);
  fake_.enable_result = CUPTI_ERROR_NOT_SUPPORTED;
  const Said said = said_while("cuptiActivityEnable/Disable of a copy or fill kind failed",
                               [&] { extra.follow(true); });
  EXPECT_EQ(said.counted, 3u);
  EXPECT_EQ(said.times("are not collected"), said.expected_times()) << said.text;
  extra.follow(false);
  EXPECT_TRUE(fake_.disabled.empty()) << "none went on: none to switch off";
  fake_.enable_result = CUPTI_SUCCESS;
  extra.follow(true);
  EXPECT_EQ(fake_.enabled.size(), 6u) << "tried again";
  extra.follow(false);
  EXPECT_EQ(fake_.disabled, kCopiesAndFills);
}

}  // namespace
}  // namespace parcagpu
