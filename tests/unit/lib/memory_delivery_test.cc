// Copies and fills to memory_batch (MemoryDelivery): only records of announced launches, under
// the ID they are delivered as, in batches of at most PARCAGPU_MEMORY_BATCH_MAX, each with the CPU
// time its call held its thread (kept by the tracker's BlockedCopies), 0 where none was kept.
// The batches are read through MemoryDelivery's firing seam.
#include "activity/memory_delivery.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "parcagpu/abi.h"
#include "trackers/correlation_tracker.h"

namespace parcagpu {
namespace {

std::vector<std::vector<MemoryRecord>> g_batches;

void read_batch(const void *records, uint32_t count) {
  // As a consumer reads it: count contiguous records of PARCAGPU_MREC_SIZE bytes.
  std::vector<MemoryRecord> batch(count);
  for (uint32_t i = 0; i < count; ++i)
    std::memcpy(&batch[i], static_cast<const char *>(records) + i * PARCAGPU_MREC_SIZE,
                PARCAGPU_MREC_SIZE);
  g_batches.push_back(batch);
}

MemoryRecord copy_record(uint32_t corr, bool async) {
  MemoryRecord r{};
  r.kind = PARCAGPU_KIND_MEMCPY;
  r.copy_kind = 2;  // DtoH
  r.flags = async ? PARCAGPU_MREC_FLAG_ASYNC : 0;
  r.bytes = 4096;
  r.start = 1000;
  r.end = 2000;
  r.correlation_id = corr;
  return r;
}

class MemoryDeliveryTest : public ::testing::Test {
 protected:
  void SetUp() override { g_batches.clear(); }
  CorrelationTracker tracker_{1024, 30'000'000'000ull, 16};
  MemoryDelivery delivery_{tracker_, &read_batch};
};

TEST_F(MemoryDeliveryTest, ACopysRecordCarriesItsCallsTimeOneWithNoneKeptZero) {
  ASSERT_TRUE(tracker_.insert(5, LaunchKind::Eager, 1, 1));
  ASSERT_TRUE(tracker_.insert(6, LaunchKind::Eager, 1, 1));
  ASSERT_TRUE(tracker_.blocked_copies().put(5, 1'234'567, 1));  // none kept for 6 (dropped, say)
  {
    MemoryDelivery::Batch b(delivery_, 2);
    b.add(copy_record(5, false));
    b.add(copy_record(6, true));
  }
  ASSERT_EQ(g_batches.size(), 1u);
  ASSERT_EQ(g_batches[0].size(), 2u);
  EXPECT_EQ(g_batches[0][0].correlation_id, 5u);
  EXPECT_EQ(g_batches[0][0].cpu_blocked_ns, 1'234'567u);
  EXPECT_EQ(g_batches[0][0].bytes, 4096u);
  EXPECT_EQ(g_batches[0][1].cpu_blocked_ns, 0u);
  EXPECT_EQ(tracker_.blocked_copies().stats().live, 0u) << "taken by its record";
  const MemoryStats s = delivery_.stats();
  EXPECT_EQ(s.records, 2u);
  EXPECT_EQ(s.delivered, 2u);
  EXPECT_EQ(s.blocked, 1u);
  EXPECT_EQ(s.batches, 1u);
}

TEST_F(MemoryDeliveryTest, RecordsOfLaunchesNeverAnnouncedAreNotDelivered) {
  ASSERT_TRUE(tracker_.insert(5, LaunchKind::Eager, 1, 1));
  {
    MemoryDelivery::Batch b(delivery_, 2);
    b.add(copy_record(9, false));  // not announced
    b.add(copy_record(5, false));
    b.add(copy_record(5, false));  // its launch already had its record: forgotten
  }
  ASSERT_EQ(g_batches.size(), 1u);
  EXPECT_EQ(g_batches[0].size(), 1u);
  EXPECT_EQ(delivery_.stats().records, 3u);
  EXPECT_EQ(delivery_.stats().delivered, 1u);
}

TEST_F(MemoryDeliveryTest, BatchesHoldAtMostTheAbisMaxAndTheRestGoesAtTheEnd) {
  const uint32_t n = PARCAGPU_MEMORY_BATCH_MAX + 3;
  for (uint32_t c = 1; c <= n; ++c) ASSERT_TRUE(tracker_.insert(c, LaunchKind::Eager, 1, 1));
  {
    MemoryDelivery::Batch b(delivery_, 2);
    for (uint32_t c = 1; c <= n; ++c) b.add(copy_record(c, true));
    EXPECT_EQ(g_batches.size(), 1u) << "a full batch goes at once";
  }
  ASSERT_EQ(g_batches.size(), 2u);
  EXPECT_EQ(g_batches[0].size(), static_cast<size_t>(PARCAGPU_MEMORY_BATCH_MAX));
  EXPECT_EQ(g_batches[1].size(), 3u);
  EXPECT_EQ(g_batches[1][2].correlation_id, n);
  EXPECT_EQ(delivery_.stats().batches, 2u);
}

TEST_F(MemoryDeliveryTest, ANoConsumerBatchIsSaidLost) {
  // No memory_batch consumer attached (the semaphore is 0 in a unit test): what is delivered is
  // counted as unheard.
  ASSERT_TRUE(tracker_.insert(5, LaunchKind::Eager, 1, 1));
  {
    MemoryDelivery::Batch b(delivery_, 2);
    b.add(copy_record(5, false));
  }
  EXPECT_EQ(delivery_.stats().unheard, 1u);
}

}  // namespace
}  // namespace parcagpu
