#include "token_bucket.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

constexpr uint64_t kSec = 1000000000ull;

TEST(TokenBucket, BurstIsOneSecondOfTokens) {
  TokenBucket b{};
  int taken = 0;
  for (int i = 0; i < 1000; ++i) taken += b.try_take(100, 1 * kSec);
  EXPECT_EQ(taken, 100);
}

TEST(TokenBucket, RefillsAtTheRate) {
  TokenBucket b{};
  for (int i = 0; i < 100; ++i) b.try_take(100, 1 * kSec);
  EXPECT_FALSE(b.try_take(100, 1 * kSec));
  // 50 ms later: 5 tokens.
  int taken = 0;
  for (int i = 0; i < 100; ++i) taken += b.try_take(100, 1 * kSec + 50000000ull);
  EXPECT_EQ(taken, 5);
}

TEST(TokenBucket, SustainedRateOverTenSeconds) {
  TokenBucket b{};
  int taken = 0;
  // 10 launches per ms for 10 s, at 20/s: burst 20 plus 10 s x 20/s.
  for (uint64_t t = 1 * kSec; t < 11 * kSec; t += 1000000ull)
    for (int i = 0; i < 10; ++i) taken += b.try_take(20, t);
  EXPECT_NEAR(taken, 20 + 200, 2);
}

TEST(TokenBucket, ZeroRateAnnouncesNothingAndSubOneRateStillAllowsOne) {
  TokenBucket z{};
  EXPECT_FALSE(z.try_take(0, kSec));
  TokenBucket slow{};
  EXPECT_TRUE(slow.try_take(0.5, kSec));
  EXPECT_FALSE(slow.try_take(0.5, kSec + kSec / 2));
  EXPECT_TRUE(slow.try_take(0.5, 3 * kSec + kSec / 2));
}

TEST(TokenBucket, IndependentBucketsDoNotStarveEachOther) {
  // Eager and graph launches have separate buckets: a graph burst leaves eager tokens intact.
  TokenBucket eager{}, graph{};
  for (int i = 0; i < 10000; ++i) graph.try_take(20, kSec);
  int eager_taken = 0;
  for (int i = 0; i < 1000; ++i) eager_taken += eager.try_take(100, kSec);
  EXPECT_EQ(eager_taken, 100);
}

TEST(TokenBucket, ClockGoingBackwardsDoesNotMintTokens) {
  TokenBucket b{};
  for (int i = 0; i < 10; ++i) b.try_take(10, 5 * kSec);
  EXPECT_FALSE(b.try_take(10, 4 * kSec));
}

}  // namespace
}  // namespace parcagpu
