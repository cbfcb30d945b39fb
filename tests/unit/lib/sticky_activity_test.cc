// StickyActivity on a fake clock and fake launch counts: when kernel activity is left on between
// announced launches, and when that ends.
#include "activity/sticky_activity.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

constexpr uint64_t kUs = 1'000, kMs = 1'000'000, kSec = 1'000'000'000;

struct Counts : LaunchCountSource {
  LaunchCounts c;
  LaunchCounts launch_counts() const override { return c; }
};

// Announced launches every `gap` from `t`, each switching activity on (it was off): `n` of them.
uint64_t enables(StickyActivity &s, uint64_t t, uint64_t gap, int n, Counts *counts = nullptr) {
  for (int i = 0; i < n; ++i, t += gap) {
    if (counts) counts->c.announced += 10;
    s.launch_began(t);
    if (!s.on()) s.enabling(t);
  }
  return t;
}

TEST(StickyActivity, StickyOnceEnablesComeFasterThanOnePerMillisecondUntilAPause) {
  StickyActivity s(nullptr);
  uint64_t t = enables(s, kSec, 2 * kMs, 40);
  EXPECT_FALSE(s.on()) << "500 Hz";
  t = enables(s, t, 200 * kUs, 40);
  EXPECT_TRUE(s.on()) << "5 kHz";
  const uint64_t last = t - 200 * kUs;
  s.launch_began(last + 10 * kMs);
  EXPECT_TRUE(s.on()) << "a 10 ms gap is not a pause";
  s.launch_began(last + 20 * kMs + 1);
  EXPECT_FALSE(s.on()) << "over 10 ms";
  // The rate was forgotten: not sticky again at the next fast enable.
  s.enabling(last + 20 * kMs + 200 * kUs);
  EXPECT_FALSE(s.on());
}

TEST(StickyActivity, NotWhileMostLaunchesAreUnannouncedAndNotAskedAgainForASecond) {
  Counts counts;
  StickyActivity s(&counts);
  counts.c.unannounced = 1000;
  const uint64_t t = enables(s, kSec, 200 * kUs, 40);
  EXPECT_FALSE(s.on());
  // Then only announced launches, but sticky was refused at the first fast enable: banned 1 s.
  uint64_t u = enables(s, t, 200 * kUs, 20, &counts);
  EXPECT_FALSE(s.on()) << "within the second's ban";
  u = enables(s, u, 200 * kUs, 5000, &counts);
  EXPECT_TRUE(s.on()) << "after it";
  // The watcher's recheck: most launches not announced now.
  counts.c.unannounced += 1'000'000;
  EXPECT_TRUE(s.end_if_not_paying(u));
  EXPECT_FALSE(s.on());
  EXPECT_FALSE(s.end_if_not_paying(u)) << "not sticky: nothing to end";
}

TEST(StickyActivity, EndsWhenQuietOnlyWithNoLaunchInFlight) {
  StickyActivity s(nullptr);
  const uint64_t t = enables(s, kSec, 200 * kUs, 40);
  ASSERT_TRUE(s.on());
  const uint64_t last = t - 200 * kUs;
  EXPECT_FALSE(s.end_if_quiet(last + 9 * kMs, false)) << "not quiet yet";
  EXPECT_FALSE(s.end_if_quiet(last + 11 * kMs, /*launches_in_flight=*/true));
  EXPECT_TRUE(s.end_if_quiet(last + 11 * kMs, false));
  EXPECT_FALSE(s.on());
  EXPECT_FALSE(s.end_if_quiet(last + 12 * kMs, false));
  // Disarmed: cleared at once.
  enables(s, t + kSec, 200 * kUs, 100);
  ASSERT_TRUE(s.on());
  s.clear();
  EXPECT_FALSE(s.on());
}

}  // namespace
}  // namespace parcagpu
