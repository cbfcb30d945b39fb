#include "correlation_tracker.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

constexpr uint64_t kMs = 1000000ull;

TEST(CorrelationTracker, EagerDeliversItsOneKernelThenForgets) {
  CorrelationTracker t(100, 1000 * kMs);
  t.insert(7, LaunchKind::Eager, 1 * kMs);
  EXPECT_EQ(t.pending(), 1u);
  EXPECT_TRUE(t.on_kernel(7, 2 * kMs));
  EXPECT_EQ(t.pending(), 0u);
  EXPECT_FALSE(t.on_kernel(7, 3 * kMs));  // a second record under the same eager ID
  EXPECT_EQ(t.stats().live, 0u);
  EXPECT_EQ(t.stats().completed, 1u);
}

TEST(CorrelationTracker, UnannouncedKernelsAreNotDelivered) {
  CorrelationTracker t(100, 1000 * kMs);
  EXPECT_FALSE(t.on_kernel(42, kMs));
  EXPECT_EQ(t.stats().kernels_unmatched, 1u);
}

TEST(CorrelationTracker, GraphFanOutDeliversEveryKernelOfTheLaunch) {
  CorrelationTracker t(100, 1000 * kMs);
  t.insert(9, LaunchKind::Graph, kMs);
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(t.on_kernel(9, 2 * kMs)) << i;
  EXPECT_EQ(t.stats().kernels_matched, 50u);
  EXPECT_EQ(t.stats().live, 1u);  // count unknown: stays until it goes quiet
}

TEST(CorrelationTracker, GraphWithKnownKernelCountCompletes) {
  CorrelationTracker t(100, 1000 * kMs);
  t.insert(9, LaunchKind::Graph, kMs, 3);
  EXPECT_TRUE(t.on_kernel(9, kMs));
  EXPECT_TRUE(t.on_kernel(9, kMs));
  EXPECT_TRUE(t.on_kernel(9, kMs));
  EXPECT_EQ(t.stats().live, 0u);
  EXPECT_FALSE(t.on_kernel(9, kMs));
}

TEST(CorrelationTracker, EntriesExpireAtTheAgeLimit) {
  CorrelationTracker t(100, 10 * kMs);
  t.insert(1, LaunchKind::Eager, 0);
  t.insert(2, LaunchKind::Graph, 5 * kMs);
  EXPECT_EQ(t.expire(9 * kMs), 0u);
  EXPECT_EQ(t.expire(11 * kMs), 1u);  // 1 is 11 ms old
  EXPECT_FALSE(t.on_kernel(1, 11 * kMs));
  EXPECT_TRUE(t.on_kernel(2, 12 * kMs));
  // A graph still receiving kernels is kept while its last kernel is recent.
  EXPECT_EQ(t.expire(16 * kMs), 0u);
  EXPECT_EQ(t.expire(23 * kMs), 1u);
  const TrackerStats s = t.stats();
  EXPECT_EQ(s.expired, 1u);
  EXPECT_EQ(s.expired_unseen, 1u);
  EXPECT_EQ(s.completed, 1u);  // the graph went quiet after its kernels: done, not lost
  EXPECT_EQ(s.live, 0u);
  EXPECT_EQ(t.pending(), 0u);
}

TEST(CorrelationTracker, CapEvictsTheOldestAndCountsIt) {
  CorrelationTracker t(64, 1000000 * kMs);
  for (uint32_t i = 1; i <= 1000; ++i) t.insert(i, LaunchKind::Eager, i);
  const TrackerStats s = t.stats();
  EXPECT_EQ(s.live, 64u);
  EXPECT_EQ(s.evicted, 1000u - 64u);
  EXPECT_FALSE(t.on_kernel(1, 2000));     // evicted
  EXPECT_TRUE(t.on_kernel(1000, 2000));   // newest kept
  EXPECT_EQ(t.pending(), 63u);
}

TEST(CorrelationTracker, MemoryStaysBoundedUnderEndlessUnmatchedLaunches) {
  CorrelationTracker t(128, 5 * kMs);
  for (uint32_t i = 1; i <= 200000; ++i) {
    t.insert(i, i % 3 ? LaunchKind::Eager : LaunchKind::Graph, i * 1000ull);
    if (i % 2) t.on_kernel(i, i * 1000ull);  // half of them complete
  }
  EXPECT_LE(t.stats().live, 128u);
}

TEST(CorrelationTracker, RemoveWithdrawsWithoutCountingALoss) {
  CorrelationTracker t(100, 1000 * kMs);
  t.insert(5, LaunchKind::Eager, kMs);
  t.remove(5);
  EXPECT_EQ(t.pending(), 0u);
  EXPECT_FALSE(t.on_kernel(5, kMs));
  EXPECT_EQ(t.stats().removed, 1u);
  EXPECT_EQ(t.stats().expired + t.stats().evicted, 0u);
}

}  // namespace
}  // namespace parcagpu
