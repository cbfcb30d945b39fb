// BufferRouter on a fake CUPTI table: buffers handed out from the pool and refused at its cap, a
// completed buffer's records routed to kernel and copy delivery, and what a buffer says of losses
// (records CUPTI dropped, a walk cut short) and failing CUPTI calls said once and counted.
#include "activity/buffer_router.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "activity/activity_switch.h"
#include "activity/graph_kernel_filter.h"
#include "activity/kernel_delivery.h"
#include "activity/memory_delivery.h"
#include "fake_activity_cupti.h"
#include "trackers/correlation_tracker.h"
#include "trackers/graph_tracker.h"

namespace parcagpu {
namespace {

using namespace fake_activity;

class BufferRouterTest : public ActivityFixture {
 protected:
  void SetUp() override {
    ActivityFixture::SetUp();
    config_.buffer_kib = 4;
    config_.max_buffers = 2;
    config_.activity_host_memory = false;
    router_ = std::make_unique<BufferRouter>(api_, config_, tracker_, kernels_, memory_);
    ASSERT_TRUE(router_->init());
  }
  void TearDown() override {
    router_.reset();
    ActivityFixture::TearDown();
  }
  // The kernel records of `ids`, in one completed buffer.
  void complete_buffer_of(std::initializer_list<uint32_t> ids) {
    std::vector<uint8_t> records;
    for (uint32_t c : ids) add_kernel(&records, c);
    hand_back(records);
  }

  Config config_;
  CorrelationTracker tracker_{1024, 30'000'000'000ull};
  GraphTracker graphs_{api_, nullptr};
  ActivitySwitch switch_{api_, ActivityMode::WhileConsumer, nullptr};
  GraphKernelFilter filter_{api_, tracker_, graphs_, switch_};
  KernelDelivery kernels_{tracker_, filter_, nullptr};
  MemoryDelivery memory_{tracker_};
  std::unique_ptr<BufferRouter> router_;
};

TEST_F(BufferRouterTest, BuffersComeFromThePoolAndAreRefusedAtItsCap) {
  ASSERT_NE(fake_.requested, nullptr) << "init registered the buffer callbacks";
  uint8_t *b[3] = {};
  size_t size[3] = {}, max_records = 0;
  for (int i = 0; i < 3; ++i) fake_.requested(&b[i], &size[i], &max_records);
  EXPECT_NE(b[0], nullptr);
  EXPECT_EQ(size[0], 4096u);
  EXPECT_NE(b[1], nullptr);
  EXPECT_EQ(b[2], nullptr) << "at the cap of 2";
  EXPECT_EQ(size[2], 0u);
  EXPECT_EQ(router_->stats().refused, 1u);
  for (int i = 0; i < 2; ++i) fake_.completed(nullptr, 0, b[i], size[i], 0);
  EXPECT_EQ(router_->stats().completed, 2u);
}

TEST_F(BufferRouterTest, ACompletedBuffersRecordsGoToTheirFamilysDelivery) {
  ASSERT_TRUE(tracker_.insert(1, LaunchKind::Eager, 1));
  ASSERT_TRUE(tracker_.insert(3, LaunchKind::Eager, 1));
  std::vector<uint8_t> records;
  add_kernel(&records, 1);
  add_kernel(&records, 2);  // not announced
  put<uint32_t>(add_slot(&records, CUPTI_ACTIVITY_KIND_MEMCPY),
                offsetof(CUpti_ActivityMemcpy6, correlationId), 3);
  hand_back(records);
  EXPECT_EQ(router_->stats().completed, 1u);
  EXPECT_EQ(router_->stats().kernel_records, 2u);
  EXPECT_EQ(kernels_.stats().delivered, 1u);
  EXPECT_EQ(memory_.stats().records, 1u);
  EXPECT_EQ(memory_.stats().delivered, 1u);
  EXPECT_EQ(tracker_.pending(), 0u);
}

TEST_F(BufferRouterTest, RecordsCuptiDroppedAreCountedAndSaidOnce) {
  fake_.dropped = 5;
  const Said said = said_while("activity records dropped by CUPTI", [&] {
    complete_buffer_of({1});
    complete_buffer_of({2});
  });
  EXPECT_EQ(router_->stats().records_dropped, 10u);
  EXPECT_EQ(said.counted, 10u);
  EXPECT_EQ(said.times("CUPTI dropped 5 activity records"), said.expected_times()) << said.text;
}

TEST_F(BufferRouterTest, AFailingDroppedRecordsQueryIsSaidOnceAndCounted) {
  fake_.dropped = 5;
  fake_.dropped_result = CUPTI_ERROR_UNKNOWN;
  const Said said = said_while("cuptiActivityGetNumDroppedRecords failed", [&] {
    for (uint32_t c = 1; c <= 3; ++c) complete_buffer_of({c});
  });
  EXPECT_EQ(router_->stats().records_dropped, 0u) << "not counted from a failed call";
  EXPECT_EQ(said.counted, 3u);
  EXPECT_EQ(said.times("go uncounted"), said.expected_times()) << said.text;
}

TEST_F(BufferRouterTest, AWalkCutShortIsSaidAndCounted) {
  fake_.fail_next_at = 1;
  const Said said = said_while("buffers cut short by cuptiActivityGetNextRecord", [&] {
    complete_buffer_of({1, 2, 3});
  });
  EXPECT_EQ(router_->stats().cut_short, 1u);
  EXPECT_EQ(router_->stats().kernel_records, 1u) << "the rest is unread";
  EXPECT_EQ(said.counted, 1u);
  EXPECT_EQ(said.times("is lost"), said.expected_times()) << said.text;
}

TEST_F(BufferRouterTest, AFailingFlushIsSaidOnceAndCounted) {
  fake_.flush_result = CUPTI_ERROR_UNKNOWN;
  const Said said = said_while("cuptiActivityFlushAll failed", [&] {
    for (int i = 0; i < 3; ++i) router_->flush(i == 0);
  });
  EXPECT_EQ(fake_.flushes, 3);
  EXPECT_EQ(router_->stats().flushes, 3u);
  EXPECT_EQ(said.counted, 3u);
  EXPECT_EQ(said.times("kernels arrive only as CUPTI completes full buffers"),
            said.expected_times())
      << said.text;
}

// At exit an announced launch still awaits its kernel, which a later flush brings: the drain
// flushes again and ends once it came, well before its second's limit.
TEST_F(BufferRouterTest, TheDrainAtExitFlushesUntilAnnouncedLaunchesGotTheirKernels) {
  ASSERT_TRUE(tracker_.insert(9, LaunchKind::Eager, 1));
  add_kernel(&fake_.on_flush, 9);
  const auto start = std::chrono::steady_clock::now();
  router_->drain_at_exit();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
  EXPECT_GE(fake_.flushes, 1);
  EXPECT_EQ(tracker_.pending(), 0u);
  EXPECT_EQ(kernels_.stats().delivered, 1u);
}

}  // namespace
}  // namespace parcagpu
