// The CPU time announced copies and fills hold their threads: measured by the launch path (a
// copy's ENTER to its EXIT, every copy and fill API: an "Async" one may wait too) and kept by
// BlockedCopies under the copy's correlation ID, bounded, until its record takes it
// (memory_delivery_test.cc).
#include "trackers/blocked_copies.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "fake_launch_cupti.h"

namespace parcagpu {
namespace {

constexpr uint64_t kAge = 1'000'000'000;  // 1 s

TEST(BlockedCopies, ATimeIsTakenOnceByItsCorrelationId) {
  BlockedCopies b(4, kAge);
  EXPECT_TRUE(b.put(7, 1500, 100));
  EXPECT_TRUE(b.put(8, 2500, 100));
  EXPECT_EQ(b.take(9), 0u) << "none kept under 9";
  EXPECT_EQ(b.take(8), 2500u);
  EXPECT_EQ(b.take(8), 0u) << "taken once";
  EXPECT_EQ(b.take(7), 1500u);
  const BlockedCopiesStats s = b.stats();
  EXPECT_EQ(s.kept, 2u);
  EXPECT_EQ(s.taken, 2u);
  EXPECT_EQ(s.live, 0u);
}

TEST(BlockedCopies, AtTheCapANewTimeIsDroppedCountedAndSaid) {
  BlockedCopies b(3, kAge);
  for (uint32_t c = 1; c <= 3; ++c) EXPECT_TRUE(b.put(c, c * 1000, 100));
  EXPECT_FALSE(b.put(4, 4000, 200)) << "full, none old enough to expire";
  EXPECT_FALSE(b.put(5, 5000, 200));
  const BlockedCopiesStats s = b.stats();
  EXPECT_EQ(s.dropped, 2u);
  EXPECT_EQ(s.live, 3u);
  EXPECT_EQ(b.take(4), 0u) << "dropped: its record says 0";
  EXPECT_EQ(b.take(2), 2000u) << "the kept ones stay whole";
  EXPECT_TRUE(b.put(6, 6000, 300)) << "room again once one was taken";
  EXPECT_EQ(b.take(6), 6000u);
  bool said = false;
  for_each_repeated_error(
      [](const RepeatedError &e, void *said) {
        if (std::string(e.what()).find("call times of copies dropped") !=
            std::string::npos)
          *static_cast<bool *>(said) = e.count() >= 2;
      },
      &said);
  EXPECT_TRUE(said) << "the drops reach the error site's count";
}

TEST(BlockedCopies, TimesOlderThanTheAgeLimitGoAtTheCapRatherThanANewOne) {
  BlockedCopies b(2, kAge);
  EXPECT_TRUE(b.put(1, 10, 100));
  EXPECT_TRUE(b.put(2, 20, 100 + kAge));
  // Now 1 is past the age limit (its record never came), 2 is not.
  EXPECT_TRUE(b.put(3, 30, 101 + kAge));
  const BlockedCopiesStats s = b.stats();
  EXPECT_EQ(s.expired, 1u);
  EXPECT_EQ(s.dropped, 0u);
  EXPECT_EQ(b.take(1), 0u);
  EXPECT_EQ(b.take(2), 20u);
  EXPECT_EQ(b.take(3), 30u);
}

TEST(BlockedCopies, ThreadsPutWhileTheDeliveryTakes) {
  constexpr uint32_t kPerThread = 2000, kThreads = 4;
  BlockedCopies b(kPerThread * kThreads, kAge);
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&b, t] {
      for (uint32_t i = 1; i <= kPerThread; ++i) b.put(t * kPerThread + i, i, 1);
    });
  uint64_t sum = 0;
  for (auto &th : threads) th.join();
  for (uint32_t c = 1; c <= kPerThread * kThreads; ++c) sum += b.take(c);
  EXPECT_EQ(sum, kThreads * (uint64_t{kPerThread} * (kPerThread + 1) / 2));
  EXPECT_EQ(b.stats().live, 0u);
}

// The launch path: a picked copy keeps its call's time, synchronous API or not; a kernel launch
// keeps nothing.
class BlockedCopiesLaunchPath : public fake_launch::LaunchFixture {
 protected:
  void SetUp() override {
    LaunchFixture::SetUp();
    parcagpu_memory_batch_semaphore = 1;  // copies are followed (launch_path.h)
  }
  void TearDown() override {
    parcagpu_memory_batch_semaphore = 0;
    LaunchFixture::TearDown();
  }
  // A runtime copy over its driver call, `held` between its ENTER and its EXIT.
  void runtime_copy(uint32_t rt, uint32_t drv, uint32_t corr, std::chrono::milliseconds held) {
    enter(CbDomain::Runtime, rt, corr);
    enter(CbDomain::Driver, drv, corr);
    std::this_thread::sleep_for(held);
    exit(CbDomain::Driver, drv, corr);
    exit(CbDomain::Runtime, rt, corr);
  }
};

TEST_F(BlockedCopiesLaunchPath, EveryCopyKeepsItsCallsTimeAKernelLaunchNothing) {
  build();
  attach_at_start();
  activity_->arm(true);
  const auto t0 = std::chrono::steady_clock::now();
  fake_launch::on_new_thread([&] {
    runtime_copy(31, 305, 21, std::chrono::milliseconds(20));  // cudaMemcpy over cuMemcpy
  });
  const auto took = std::chrono::steady_clock::now() - t0;
  fake_launch::on_new_thread([&] {
    runtime_copy(41, 306, 22, std::chrono::milliseconds(20));  // cudaMemcpyAsync
    runtime_launch(23);
    enter(CbDomain::Driver, 278, 24);  // cuMemcpyDtoH_v2 alone
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    exit(CbDomain::Driver, 278, 24);
  });
  EXPECT_EQ(stats().announced_eager.load(), 4u) << "all four announced";
  BlockedCopies &b = tracker_->blocked_copies();
  const uint64_t copy = b.take(21);
  EXPECT_GE(copy, 20'000'000u);
  EXPECT_LE(copy, static_cast<uint64_t>(std::chrono::nanoseconds(took).count()));
  EXPECT_GE(b.take(22), 20'000'000u) << "an Async API that waited (pageable memory, say)";
  EXPECT_EQ(b.take(23), 0u) << "a kernel launch: nothing kept";
  EXPECT_GE(b.take(24), 5'000'000u);
  EXPECT_EQ(b.stats().kept, 3u);
}

TEST_F(BlockedCopiesLaunchPath, ACopyNotTrackedKeepsNoTime) {
  build();
  attach_at_start();
  // No kernel consumer armed: the copy is not tracked, no record will come to take a time.
  fake_launch::on_new_thread([&] { runtime_copy(31, 305, 31, std::chrono::milliseconds(1)); });
  EXPECT_EQ(tracker_->blocked_copies().stats().kept, 0u);
}

}  // namespace
}  // namespace parcagpu
