// The activity kinds' table and the copy and fill decoders: each decoder takes its own kind only
// and fills the probe ABI's record (a peer copy's other device, a fill's one memory kind, the
// async flag), and the masks of what consumers want.
#include "activity/activity_kinds.h"

#include <gtest/gtest.h>

#include <cstring>

namespace parcagpu {
namespace {

TEST(ActivityKinds, AMemcpyDecodesIntoTheProbeRecord) {
  CUpti_ActivityMemcpy6 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  r.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  r.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  r.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  r.bytes = 3 << 20;
  r.start = 10;
  r.end = 20;
  r.deviceId = 1;
  r.streamId = 4;
  r.correlationId = 99;
  MemoryRecord m{};
  ASSERT_TRUE(decode_memcpy(reinterpret_cast<const CUpti_Activity *>(&r), &m));
  const MemoryRecord want{PARCAGPU_KIND_MEMCPY,
                          CUPTI_ACTIVITY_MEMCPY_KIND_DTOH,
                          CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                          CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                          0,
                          3 << 20,
                          10,
                          20,
                          1,
                          4,
                          99,
                          1};
  EXPECT_EQ(std::memcmp(&m, &want, sizeof m), 0);
  r.flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  ASSERT_TRUE(decode_memcpy(reinterpret_cast<const CUpti_Activity *>(&r), &m));
  EXPECT_EQ(m.flags, PARCAGPU_MREC_FLAG_ASYNC);
  // Not its kind: nothing decoded.
  MemoryRecord untouched{};
  EXPECT_FALSE(decode_memset(reinterpret_cast<const CUpti_Activity *>(&r), &untouched));
  EXPECT_FALSE(decode_memcpy_peer(reinterpret_cast<const CUpti_Activity *>(&r), &untouched));
  EXPECT_EQ(untouched.correlation_id, 0u);
}

TEST(ActivityKinds, APeerCopysPeerIsTheDeviceThatDidNotReportIt) {
  CUpti_ActivityMemcpyPtoP4 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  r.srcDeviceId = 2;
  r.dstDeviceId = 5;
  MemoryRecord m{};
  for (uint32_t reporter : {2u, 5u}) {
    r.deviceId = reporter;
    ASSERT_TRUE(decode_memcpy_peer(reinterpret_cast<const CUpti_Activity *>(&r), &m));
    EXPECT_EQ(m.kind, uint32_t{PARCAGPU_KIND_MEMCPY2});
    EXPECT_EQ(m.device_id, reporter);
    EXPECT_EQ(m.peer_device_id, reporter == 2 ? 5u : 2u);
  }
}

TEST(ActivityKinds, AFillHasOneMemoryKindAndNoCopyKind) {
  CUpti_ActivityMemset4 r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  r.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
  r.flags = CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC;
  r.deviceId = 3;
  MemoryRecord m{};
  ASSERT_TRUE(decode_memset(reinterpret_cast<const CUpti_Activity *>(&r), &m));
  EXPECT_EQ(m.copy_kind, 0);
  EXPECT_EQ(m.src_kind, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED);
  EXPECT_EQ(m.dst_kind, CUPTI_ACTIVITY_MEMORY_KIND_MANAGED);
  EXPECT_EQ(m.flags, PARCAGPU_MREC_FLAG_ASYNC);
  EXPECT_EQ(m.peer_device_id, 3u);
  EXPECT_FALSE(decode_memcpy(reinterpret_cast<const CUpti_Activity *>(&r), &m));
}

TEST(ActivityKinds, ConsumersWantTheKindsOfTheirFamily) {
  Consumers none, kernels, copies;
  kernels.activity_batch = 1;
  copies.memory_batch = 1;
  EXPECT_EQ(wanted_kinds(none), 0u);
  EXPECT_EQ(wanted_kinds(kernels), family_kinds(RecordFamily::Kernel));
  EXPECT_EQ(wanted_kinds(copies), family_kinds(RecordFamily::Memory));
  EXPECT_EQ(family_kinds(RecordFamily::Kernel), kind_bit(0)) << "CONCURRENT_KERNEL alone";
  EXPECT_EQ(family_kinds(RecordFamily::Kernel) & family_kinds(RecordFamily::Memory), 0u);
}

}  // namespace
}  // namespace parcagpu
