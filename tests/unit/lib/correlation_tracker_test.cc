#include "trackers/correlation_tracker.h"

#include <gtest/gtest.h>

#include <vector>

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

TEST(CorrelationTracker, AMultiDeviceLaunchDeliversEachDevicesKernelUnderAnIdOfItsOwn) {
  // cuLaunchCooperativeKernelMultiDevice on three GPUs: one eager ID, three kernels. The agent
  // matches one kernel per eager ID, so the second and third go under IDs of the launch's own,
  // which its EXIT announces (take_own_ids, once).
  CorrelationTracker t(100, 1000 * kMs);
  ASSERT_TRUE(t.insert(40, LaunchKind::Eager, 1 * kMs, 3));
  uint32_t as = 0;
  EXPECT_TRUE(t.on_kernel(40, 2 * kMs, &as));
  EXPECT_EQ(as, 40u);
  EXPECT_TRUE(t.on_kernel(40, 2 * kMs, &as));
  EXPECT_EQ(as, CorrelationTracker::kOwnIdTop);
  uint32_t first = 0;
  EXPECT_EQ(t.take_own_ids(40, &first), 2u);  // EXIT, between the kernels
  EXPECT_EQ(first, CorrelationTracker::kOwnIdTop);
  EXPECT_EQ(t.take_own_ids(40, &first), 0u);  // once
  EXPECT_TRUE(t.on_kernel(40, 3 * kMs, &as));
  EXPECT_EQ(as, CorrelationTracker::kOwnIdTop - 1);
  EXPECT_FALSE(t.on_kernel(40, 3 * kMs, &as));  // all three seen: complete
  EXPECT_EQ(t.stats().completed, 1u);
  // The next one's IDs follow on; an eager launch on one GPU has none.
  ASSERT_TRUE(t.insert(41, LaunchKind::Eager, 4 * kMs, 2));
  ASSERT_TRUE(t.insert(42, LaunchKind::Eager, 4 * kMs, 1));
  EXPECT_EQ(t.take_own_ids(42, &first), 0u);
  EXPECT_EQ(t.take_own_ids(41, &first), 1u);
  EXPECT_EQ(first, CorrelationTracker::kOwnIdTop - 2);
}

TEST(CorrelationTracker, OwnIdsOutliveTheirEntryUntilAnnouncedAndGoWithARemovedLaunch) {
  CorrelationTracker t(100, 1000 * kMs);
  ASSERT_TRUE(t.insert(50, LaunchKind::Eager, 1 * kMs, 2));
  uint32_t as = 0, first = 0;
  // Both kernels flushed before the launch's EXIT: the IDs are still there to announce.
  EXPECT_TRUE(t.on_kernel(50, 2 * kMs, &as));
  EXPECT_TRUE(t.on_kernel(50, 2 * kMs, &as));
  EXPECT_EQ(as, CorrelationTracker::kOwnIdTop);
  EXPECT_EQ(t.take_own_ids(50, &first), 1u);
  EXPECT_EQ(first, CorrelationTracker::kOwnIdTop);
  // A launch given up (abandoned, captured) never announces them.
  ASSERT_TRUE(t.insert(51, LaunchKind::Eager, 3 * kMs, 2));
  t.remove(51);
  EXPECT_EQ(t.take_own_ids(51, &first), 0u);
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

TEST(CorrelationTracker, AtTheCapNewLaunchesAreRefusedAndCounted) {
  CorrelationTracker t(64, 1000000 * kMs);
  uint32_t accepted = 0;
  for (uint32_t i = 1; i <= 1000; ++i) accepted += t.insert(i, LaunchKind::Eager, i);
  const TrackerStats s = t.stats();
  EXPECT_EQ(accepted, 64u);
  EXPECT_EQ(s.live, 64u);
  EXPECT_EQ(s.refused, 1000u - 64u);
  // The oldest, whose records come first, are all still matched; the refused were never
  // announced.
  for (uint32_t i = 1; i <= 64; ++i) EXPECT_TRUE(t.on_kernel(i, 2000)) << i;
  EXPECT_FALSE(t.on_kernel(1000, 2000));
  EXPECT_EQ(t.pending(), 0u);
  // Room again.
  EXPECT_TRUE(t.insert(2000, LaunchKind::Eager, 3000));
}

TEST(CorrelationTracker, UnderSustainedLoadEveryAnnouncedLaunchIsMatched) {
  // Kernel records trail their launches by more than the cap's worth of launches (the activity
  // thread is behind): every launch the tracker accepts must still get its kernel.
  constexpr uint32_t kCap = 128, kLag = 1000;
  CorrelationTracker t(kCap, 1000000 * kMs);
  std::vector<bool> announced(20001, false);
  uint64_t matched = 0, accepted = 0;
  for (uint32_t i = 1; i <= 20000; ++i) {
    if (t.insert(i, LaunchKind::Eager, i)) {
      announced[i] = true;
      ++accepted;
    }
    if (i > kLag) matched += t.on_kernel(i - kLag, i);  // the record of launch i - kLag
  }
  for (uint32_t i = 20000 - kLag + 1; i <= 20000; ++i) matched += t.on_kernel(i, 30000);
  EXPECT_GT(accepted, 0u);
  EXPECT_EQ(matched, accepted) << "announced launches lost their kernels";
  EXPECT_EQ(t.stats().live, 0u);
}

TEST(CorrelationTracker, AtTheCapGraphsThatGotKernelsMakeRoomFirst) {
  CorrelationTracker t(64, 1000000 * kMs);
  for (uint32_t i = 1; i <= 64; ++i) EXPECT_TRUE(t.insert(i, LaunchKind::Graph, i));  // count unknown
  for (uint32_t i = 1; i <= 10; ++i) EXPECT_TRUE(t.on_kernel(i, 100));
  for (uint32_t i = 65; i <= 74; ++i) EXPECT_TRUE(t.insert(i, LaunchKind::Eager, 200)) << i;
  EXPECT_FALSE(t.insert(75, LaunchKind::Eager, 200));
  const TrackerStats s = t.stats();
  EXPECT_EQ(s.retired_at_cap, 10u);
  EXPECT_EQ(s.completed, 10u);
  EXPECT_EQ(s.refused, 1u);
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
  EXPECT_EQ(t.stats().expired + t.stats().refused, 0u);
}

}  // namespace
}  // namespace parcagpu
