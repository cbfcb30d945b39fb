// KernelDelivery on a fake buffer: kernel records of announced launches fired in batches of at
// most PARCAGPU_ACTIVITY_BATCH_MAX, unannounced ones not, every record told to PC sampling, long
// names handed over as stand-ins, and kernels fired to no consumer said and counted.
#include "activity/kernel_delivery.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "activity/activity_switch.h"
#include "activity/graph_kernel_filter.h"
#include "base/usdt.h"
#include "fake_activity_cupti.h"
#include "trackers/correlation_tracker.h"
#include "trackers/graph_tracker.h"

namespace parcagpu {
namespace {

using namespace fake_activity;

struct ObservedKernels : KernelRecordObserver {
  void on_kernel_record(const char *name, uint64_t gpu_ns) override {
    names.emplace_back(name);
    total_ns += gpu_ns;
  }
  std::vector<std::string> names;
  uint64_t total_ns = 0;
};

class KernelDeliveryTest : public ActivityFixture {
 protected:
  void SetUp() override {
    ActivityFixture::SetUp();
    parcagpu_activity_batch_semaphore = 1;  // a consumer of activity_batch is attached
  }
  void TearDown() override {
    parcagpu_activity_batch_semaphore = 0;
    ActivityFixture::TearDown();
  }
  // Launches first..last announced (tracked).
  void announce(uint32_t first, uint32_t last) {
    for (uint32_t c = first; c <= last; ++c) ASSERT_TRUE(tracker_.insert(c, LaunchKind::Eager, 1));
  }
  // Every kernel record of records_ to one Batch, as a buffer's walk hands them.
  void deliver() {
    KernelDelivery::Batch batch(delivery_, 1);
    walk_kernel_records(api_, records_.data(), records_.size(),
                        [&](KernelRecord &k) { batch.add(k); });
  }

  CorrelationTracker tracker_{1 << 16, 30'000'000'000ull};
  GraphTracker graphs_{api_, nullptr};
  ActivitySwitch switch_{api_, ActivityMode::WhileConsumer, nullptr};
  GraphKernelFilter filter_{api_, tracker_, graphs_, switch_};
  ObservedKernels observed_;
  KernelDelivery delivery_{tracker_, filter_, &observed_};
  std::vector<uint8_t> records_;
};

TEST_F(KernelDeliveryTest, AnnouncedKernelsGoOutInBatchesOfAtMostTheMax) {
  constexpr uint32_t kMax = PARCAGPU_ACTIVITY_BATCH_MAX;
  announce(1, kMax);
  for (uint32_t c = 1; c <= kMax; ++c) add_kernel(&records_, c);
  deliver();
  EXPECT_EQ(delivery_.stats().delivered, kMax);
  EXPECT_EQ(delivery_.stats().batches, 1u) << "a full batch is one firing";
  // Twice the max and one more: two full batches and the rest.
  records_.clear();
  announce(kMax + 1, 3 * kMax + 1);
  for (uint32_t c = kMax + 1; c <= 3 * kMax + 1; ++c) add_kernel(&records_, c);
  deliver();
  EXPECT_EQ(delivery_.stats().delivered, 3 * kMax + 1);
  EXPECT_EQ(delivery_.stats().batches, 4u);
  EXPECT_EQ(delivery_.stats().unheard, 0u);
  EXPECT_EQ(tracker_.pending(), 0u) << "every announced launch got its kernel";
}

TEST_F(KernelDeliveryTest, KernelsOfUnannouncedLaunchesGoNowhereButAreToldToPcSampling) {
  announce(2, 2);
  add_kernel(&records_, 1, 1000, 1500);
  add_kernel(&records_, 2, 2000, 2600);
  add_kernel(&records_, 3, 3000, 3700);
  deliver();
  EXPECT_EQ(delivery_.stats().delivered, 1u);
  EXPECT_EQ(delivery_.stats().batches, 1u);
  EXPECT_EQ(observed_.names.size(), 3u) << "PC sampling learns of every kernel";
  EXPECT_EQ(observed_.total_ns, 500u + 600u + 700u);
  EXPECT_EQ(tracker_.stats().kernels_unmatched, 2u);
}

TEST_F(KernelDeliveryTest, ANameLongerThanTheConsumerKeepsGoesAsItsStandIn) {
  const std::string long_name(PARCAGPU_KERNEL_NAME_MAX + 40, 'k');
  announce(1, 2);
  add_kernel(&records_, 1, 1000, 2000, 0, long_name.c_str());
  add_kernel(&records_, 2, 1000, 2000, 0, "short");
  deliver();
  const char *first = nullptr, *second = nullptr;
  std::memcpy(&first, records_.data() + PARCAGPU_KREC_OFF_NAME, sizeof first);
  std::memcpy(&second, records_.data() + kSlot + PARCAGPU_KREC_OFF_NAME, sizeof second);
  EXPECT_NE(first, long_name.c_str());
  EXPECT_LE(std::strlen(first), size_t{PARCAGPU_KERNEL_NAME_MAX});
  EXPECT_STREQ(second, "short");
}

TEST_F(KernelDeliveryTest, KernelsFiredToNoConsumerAreSaidOnceAndCounted) {
  parcagpu_activity_batch_semaphore = 0;  // the last kernel consumer has left
  announce(1, 5);
  const Said said =
      said_while("kernels of announced launches fired after the last kernel consumer left", [&] {
        for (uint32_t c = 1; c <= 5; ++c) {
          records_.clear();
          add_kernel(&records_, c);
          deliver();
        }
      });
  EXPECT_EQ(delivery_.stats().unheard, 5u);
  EXPECT_EQ(said.counted, 5u);
  EXPECT_EQ(said.times("no consumer got them"), said.expected_times()) << said.text;
}

}  // namespace
}  // namespace parcagpu
