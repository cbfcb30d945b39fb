// HousekeepingSchedule on given times: the first round one interval after the first tick, then an
// interval after each round ended, at once on request (the watcher woken once per request).
#include "activity/housekeeping_schedule.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

constexpr uint64_t kInterval = 100, kStart = 10'000;

struct CountedWakes : WatcherWake {
  void wake() override { ++n; }
  int n = 0;
};

TEST(HousekeepingSchedule, RoundsComeAnIntervalAfterTheFirstTickAndAfterEachRound) {
  HousekeepingSchedule s(kInterval, nullptr);
  uint64_t next = 0;
  EXPECT_FALSE(s.due(kStart, &next));
  EXPECT_EQ(next, kStart + kInterval);
  EXPECT_FALSE(s.due(kStart + kInterval - 1, &next));
  EXPECT_EQ(next, kStart + kInterval);
  ASSERT_TRUE(s.due(kStart + kInterval, &next));
  // The round took 30: the next one is an interval after it ended.
  EXPECT_EQ(s.after_round(kStart + kInterval, kStart + kInterval + 30),
            kStart + 2 * kInterval + 30);
  EXPECT_FALSE(s.due(kStart + 2 * kInterval + 29, &next));
  EXPECT_TRUE(s.due(kStart + 2 * kInterval + 30, &next));
}

TEST(HousekeepingSchedule, ARequestRunsARoundAtTheNextTickAndWakesTheWatcherOnce) {
  CountedWakes wakes;
  HousekeepingSchedule s(kInterval, &wakes);
  uint64_t next = 0;
  s.request();
  s.request();
  EXPECT_EQ(wakes.n, 1);
  EXPECT_TRUE(s.due(kStart, &next)) << "even before the first interval";
  s.request();  // asked again during the round
  EXPECT_EQ(wakes.n, 2);
  EXPECT_EQ(s.after_round(kStart, kStart + 5), kStart) << "another round at once";
  EXPECT_TRUE(s.due(kStart, &next));
  EXPECT_EQ(s.after_round(kStart, kStart + 5), kStart + 5 + kInterval);
  EXPECT_FALSE(s.due(kStart + 6, &next));
}

}  // namespace
}  // namespace parcagpu
