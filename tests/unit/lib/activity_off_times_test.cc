// ActivityOffTimes: which kernel records span a switch-off of kernel activity (their end made up
// by CUPTI, activity_off_times.h).
#include "activity/activity_off_times.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

TEST(ActivityOffTimes, ARecordSpanningASwitchOffIsMadeUp) {
  ActivityOffTimes t;
  EXPECT_FALSE(t.went_off_between(100, 200)) << "nothing switched off yet";
  t.add(150);
  t.add(400);
  EXPECT_TRUE(t.went_off_between(100, 200));
  EXPECT_TRUE(t.went_off_between(140, 401));
  EXPECT_FALSE(t.went_off_between(100, 150)) << "ended at the switch-off: a true end";
  EXPECT_FALSE(t.went_off_between(150, 300)) << "started at it";
  EXPECT_FALSE(t.went_off_between(160, 390)) << "between two switch-offs";
  EXPECT_FALSE(t.went_off_between(500, 600)) << "after the last";
  EXPECT_FALSE(t.went_off_between(200, 100)) << "reversed times are another check's";
}

// The ring keeps the newest kKept switch-offs: a record older than all of them is taken as it
// is; the newer ones are still judged, across the ring's wrap.
TEST(ActivityOffTimes, KeepsTheNewestSwitchOffs) {
  ActivityOffTimes t;
  const uint64_t n = ActivityOffTimes::kKept + 10;
  for (uint64_t i = 1; i <= n; ++i) t.add(i * 100);
  EXPECT_EQ(t.count(), n);
  EXPECT_FALSE(t.went_off_between(150, 250)) << "switch-off 200 is no longer kept";
  EXPECT_TRUE(t.went_off_between(50, 1250)) << "1100 and 1200 are";
  EXPECT_TRUE(t.went_off_between(n * 100 - 50, n * 100 + 1));
  EXPECT_FALSE(t.went_off_between(n * 100 - 99, n * 100 - 1));
  for (uint64_t i = 11; i < n; ++i)
    ASSERT_TRUE(t.went_off_between(i * 100 + 1, i * 100 + 101)) << i;
}

}  // namespace
}  // namespace parcagpu
