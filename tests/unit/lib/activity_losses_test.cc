// ActivityLosses on a real correlation tracker: launches refused at its cap and given up at its
// age limit said as they grow (once, then counted), and the launches still waiting when the last
// kernel consumer left dropped, counted and said.
#include "activity/activity_losses.h"

#include <gtest/gtest.h>

#include <string>

#include "fake_activity_cupti.h"
#include "trackers/correlation_tracker.h"

namespace parcagpu {
namespace {

using namespace fake_activity;

constexpr uint64_t kMaxAgeNs = 1'000'000;

class ActivityLossesTest : public ActivityFixture {
 protected:
  Config config_;
  CorrelationTracker tracker_{2, kMaxAgeNs};
  ActivityLosses losses_{api_, config_, tracker_};
};

TEST_F(ActivityLossesTest, LaunchesRefusedAtTheCapAreSaidAsTheyGrow) {
  ASSERT_TRUE(tracker_.insert(1, LaunchKind::Eager, 1));
  ASSERT_TRUE(tracker_.insert(2, LaunchKind::Eager, 1));
  EXPECT_FALSE(tracker_.insert(3, LaunchKind::Eager, 1));
  EXPECT_FALSE(tracker_.insert(4, LaunchKind::Eager, 1));
  const char *what = "launches not announced: the correlation tracker was full";
  const Said said = said_while(what, [&] {
    losses_.account(false);
    losses_.account(false);  // nothing grew: nothing counted
  });
  EXPECT_EQ(said.counted, 2u);
  EXPECT_EQ(said.times("launches were not announced"), said.expected_times()) << said.text;
  EXPECT_FALSE(tracker_.insert(5, LaunchKind::Eager, 1));
  EXPECT_EQ(said_while(what, [&] { losses_.account(false); }).counted, 1u);
}

TEST_F(ActivityLossesTest, LaunchesGivenUpAtTheAgeLimitAreSaidAsTheyGrow) {
  ASSERT_TRUE(tracker_.insert(1, LaunchKind::Eager, 1));
  EXPECT_EQ(tracker_.expire(2 * kMaxAgeNs + 2), 1u);
  const Said said = said_while("announced launches given up without their kernels", [&] {
    losses_.account(false);
    losses_.account(false);
  });
  EXPECT_EQ(said.counted, 1u);
}

TEST_F(ActivityLossesTest, LaunchesWaitingWhenTheLastConsumerLeftAreDroppedAndSaid) {
  losses_.last_consumer_left();
  EXPECT_EQ(losses_.launches_unheard(), 0u) << "nothing waited";
  ASSERT_TRUE(tracker_.insert(1, LaunchKind::Eager, 1));
  ASSERT_TRUE(tracker_.insert(2, LaunchKind::Eager, 1));
  const Said said =
      said_while("announced launches still waiting for kernels when the last kernel consumer left",
                 [&] { losses_.last_consumer_left(); });
  EXPECT_EQ(losses_.launches_unheard(), 2u);
  EXPECT_EQ(tracker_.pending(), 0u) << "forgotten: a later consumer must not get their kernels";
  EXPECT_EQ(said.counted, 2u);
  EXPECT_EQ(said.times("their kernels reach no consumer"), said.expected_times()) << said.text;
}

}  // namespace
}  // namespace parcagpu
