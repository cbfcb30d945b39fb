// NvtxCollector on the application's side: when a thread's batch fires (full, before one of its
// launches is announced, at an event once its oldest is older than the age limit, at the thread's
// exit, at shutdown), what the records carry (the thread's last announced correlation ID), and
// that nothing is taken without a consumer. The probe's semaphore is raised by the test, as the
// kernel does for an attached consumer; with no uprobe in place the firing itself is a no-op.
#include "nvtx/nvtx_collector.h"

#include <cupti.h>
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCuda.h>
#include <nvtx3/nvToolsExtCudaRt.h>
#include <nvtx3/nvToolsExtSync.h>
// After NVTX's types.
#include <generated_nvtx_meta.h>

#include <thread>

#include "base/usdt.h"
#include "nvtx/nvtx_batch.h"
#include "nvtx/nvtx_thread.h"
#include "attached_consumer.h"

namespace parcagpu {
namespace {

uint64_t g_now = 1'000'000'000;
uint64_t fake_clock() { return g_now; }

void push(NvtxCollector &c, const char *message) {
  const nvtxRangePushA_params p{message};
  const CUpti_NvtxData d{"nvtxRangePushA", &p, nullptr};
  c.on_callback(CUPTI_CBID_NVTX_nvtxRangePushA, &d);
}

class NvtxCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // What an earlier test left on this thread goes first.
    nvtx_fire_pending();
    t_nvtx.last_correlation_id = 0;
    before_ = collector_.stats();
  }
  void TearDown() override { nvtx_fire_pending(); }
  uint64_t batches() const { return collector_.stats().batches - before_.batches; }
  uint64_t events() const { return collector_.stats().events - before_.events; }

  NvtxCollector collector_{&fake_clock};
  NvtxStats before_;
};

TEST_F(NvtxCollectorTest, NothingIsTakenWithoutAConsumer) {
  push(collector_, "a");
  EXPECT_EQ(events(), 0u);
  EXPECT_EQ(t_nvtx.pending, nullptr);
}

TEST_F(NvtxCollectorTest, ABatchFiresWhenFull) {
  Attached consumer(parcagpu_nvtx_event_batch_semaphore);
  for (uint32_t i = 0; i + 1 < NvtxBatch::kCapacity; ++i) push(collector_, "x");
  EXPECT_EQ(batches(), 0u);
  ASSERT_NE(t_nvtx.pending, nullptr);
  EXPECT_EQ(t_nvtx.pending->count(), NvtxBatch::kCapacity - 1);
  push(collector_, "x");
  EXPECT_EQ(batches(), 1u);
  EXPECT_EQ(events(), NvtxBatch::kCapacity);
  EXPECT_EQ(t_nvtx.pending, nullptr);
}

TEST_F(NvtxCollectorTest, PendingEventsFireBeforeTheThreadsLaunchIsAnnounced) {
  Attached consumer(parcagpu_nvtx_event_batch_semaphore);
  push(collector_, "step");
  push(collector_, "forward");
  ASSERT_NE(t_nvtx.pending, nullptr);
  EXPECT_EQ(t_nvtx.pending->record(0).correlation_id, 0u);  // nothing announced yet
  nvtx_before_announce(123);
  EXPECT_EQ(batches(), 1u);
  EXPECT_EQ(t_nvtx.pending, nullptr);
  push(collector_, "backward");
  EXPECT_EQ(t_nvtx.pending->record(0).correlation_id, 123u);  // the last announced launch
  EXPECT_STREQ(t_nvtx.pending->record(0).message, "backward");
  nvtx_before_announce(124);  // nothing pending after this one: nothing fired
  nvtx_before_announce(125);
  EXPECT_EQ(batches(), 2u);
}

TEST_F(NvtxCollectorTest, AnEventFiresItsBatchOnceTheOldestIsPastTheAgeLimit) {
  Attached consumer(parcagpu_nvtx_event_batch_semaphore);
  push(collector_, "old");
  g_now += kNvtxMaxAgeNs - 1;
  push(collector_, "young enough");
  EXPECT_EQ(batches(), 0u);
  g_now += 1;
  push(collector_, "now");
  EXPECT_EQ(batches(), 1u);
  EXPECT_EQ(events(), 3u);
}

TEST_F(NvtxCollectorTest, AThreadsEventsFireAtItsExit) {
  Attached consumer(parcagpu_nvtx_event_batch_semaphore);
  std::thread([this] { push(collector_, "worker"); }).join();
  EXPECT_EQ(batches(), 1u);
  EXPECT_EQ(events(), 1u);
}

TEST_F(NvtxCollectorTest, ShutdownFiresTheCallingThreadsEvents) {
  Attached consumer(parcagpu_nvtx_event_batch_semaphore);
  push(collector_, "last");
  collector_.fire_this_thread();
  EXPECT_EQ(batches(), 1u);
}

TEST_F(NvtxCollectorTest, EventsFiredAfterTheConsumerLeftAreCountedLost) {
  {
    Attached consumer(parcagpu_nvtx_event_batch_semaphore);
    push(collector_, "a");
    push(collector_, "b");
  }
  nvtx_before_announce(7);
  EXPECT_EQ(batches(), 0u);
  EXPECT_EQ(collector_.stats().unheard - before_.unheard, 2u);
}

TEST_F(NvtxCollectorTest, NamesFireAtOnceOnlyWithTheirConsumer) {
  const nvtxNameOsThreadA_params p{1, "main"};
  const CUpti_NvtxData d{"nvtxNameOsThreadA", &p, nullptr};
  collector_.on_callback(CUPTI_CBID_NVTX_nvtxNameOsThreadA, &d);
  EXPECT_EQ(collector_.stats().names - before_.names, 0u);
  Attached consumer(parcagpu_nvtx_resource_name_semaphore);
  collector_.on_callback(CUPTI_CBID_NVTX_nvtxNameOsThreadA, &d);
  EXPECT_EQ(collector_.stats().names - before_.names, 1u);
  EXPECT_EQ(events(), 0u);
}

}  // namespace
}  // namespace parcagpu
