// The activity buffer walker on a fake cuptiActivityGetNextRecord: kernel records are decoded
// and handed over in order, other kinds skipped, a failing walk reported as cut short; and the
// buffer pool's cap.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "activity/activity_buffers.h"
#include "activity/activity_kinds.h"
#include "parcagpu/abi.h"

namespace parcagpu {
namespace {

constexpr size_t kSlot = 256;  // one record per slot in the fake buffer

struct FakeBuffer {
  std::vector<uint8_t> bytes;
  size_t fail_at = SIZE_MAX;  // GetNextRecord fails when asked for this record
  CUptiResult failure = CUPTI_ERROR_INVALID_KIND;
  int calls = 0;
};
FakeBuffer *g_fake = nullptr;

CUptiResult fake_next(uint8_t *buffer, size_t valid_size, CUpti_Activity **record) {
  ++g_fake->calls;
  const size_t i =
      *record ? (reinterpret_cast<uint8_t *>(*record) - buffer) / kSlot + 1 : 0;
  if (i == g_fake->fail_at) return g_fake->failure;
  if ((i + 1) * kSlot > valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity *>(buffer + i * kSlot);
  return CUPTI_SUCCESS;
}

template <typename T>
void put(uint8_t *r, size_t off, T v) {
  std::memcpy(r + off, &v, sizeof v);
}

class ActivityBuffersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_fake = &fake_;
    api_.cuptiActivityGetNextRecord = &fake_next;
  }
  void TearDown() override { g_fake = nullptr; }

  // Appends a record of `kind`; kernel fields derived from `id`.
  void add(CUpti_ActivityKind kind, uint32_t id) {
    fake_.bytes.resize(fake_.bytes.size() + kSlot);
    uint8_t *r = fake_.bytes.data() + fake_.bytes.size() - kSlot;
    put<uint32_t>(r, PARCAGPU_KREC_OFF_KIND, kind);
    put<uint64_t>(r, PARCAGPU_KREC_OFF_START, 1000 + id);
    put<uint64_t>(r, PARCAGPU_KREC_OFF_END, 2000 + id);
    put<uint32_t>(r, PARCAGPU_KREC_OFF_DEVICE_ID, id % 2);
    put<uint32_t>(r, PARCAGPU_KREC_OFF_STREAM_ID, 7);
    put<uint32_t>(r, PARCAGPU_KREC_OFF_CORRELATION_ID, id);
    put<const char *>(r, PARCAGPU_KREC_OFF_NAME, kName);
    put<uint64_t>(r, PARCAGPU_KREC_OFF_GRAPH_NODE_ID, 300 + id);
    put<uint32_t>(r, PARCAGPU_KREC_OFF_GRAPH_ID, 40 + id);
  }

  std::vector<uint32_t> walk(BufferWalk *result, size_t valid = SIZE_MAX) {
    std::vector<uint32_t> ids;
    *result = walk_kernel_records(api_, fake_.bytes.data(),
                                  valid == SIZE_MAX ? fake_.bytes.size() : valid,
                                  [&](KernelRecord &k) { ids.push_back(k.correlation_id); });
    return ids;
  }

  static constexpr const char *kName = "kernel_a";
  FakeBuffer fake_;
  CuptiApi api_;
};

TEST_F(ActivityBuffersTest, HandsOverKernelRecordsDecodedInOrder) {
  add(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 5);
  add(CUPTI_ACTIVITY_KIND_MEMCPY, 6);
  add(CUPTI_ACTIVITY_KIND_KERNEL, 7);
  std::vector<KernelRecord> seen;
  const BufferWalk w = walk_kernel_records(api_, fake_.bytes.data(), fake_.bytes.size(),
                                           [&](KernelRecord &k) { seen.push_back(k); });
  EXPECT_EQ(w.kernel_records, 2u);
  EXPECT_FALSE(w.cut_short);
  ASSERT_EQ(seen.size(), 2u);
  const KernelRecord &k = seen[1];
  // Every field as add() wrote it for ID 7.
  EXPECT_EQ(std::tie(k.correlation_id, k.start, k.end, k.device_id, k.stream_id, k.graph_node_id,
                     k.graph_id),
            std::make_tuple(7u, 1007u, 2007u, 1u, 7u, 307u, 47u));
  EXPECT_STREQ(k.name, kName);
  EXPECT_EQ(reinterpret_cast<uint8_t *>(k.record), fake_.bytes.data() + 2 * kSlot);
}

// Copies and fills (the Memory family of activity_kinds.h) go to the memory handler, decoded into
// the probe ABI's record whatever CUPTI record they came in; kernels still to the kernel one.
TEST_F(ActivityBuffersTest, CopiesAndFillsAreDecodedForTheMemoryHandler) {
  add(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 1);
  fake_.bytes.resize(4 * kSlot);
  auto *cp = reinterpret_cast<CUpti_ActivityMemcpy6 *>(fake_.bytes.data() + kSlot);
  cp->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  cp->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  cp->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  cp->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  cp->flags = CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC;
  cp->bytes = 1 << 20;
  cp->start = 100;
  cp->end = 350;
  cp->deviceId = 2;
  cp->streamId = 9;
  cp->correlationId = 42;
  auto *ms = reinterpret_cast<CUpti_ActivityMemset4 *>(fake_.bytes.data() + 2 * kSlot);
  ms->kind = CUPTI_ACTIVITY_KIND_MEMSET;
  ms->bytes = 4096;
  ms->start = 400;
  ms->end = 410;
  ms->correlationId = 43;
  ms->memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  auto *pp = reinterpret_cast<CUpti_ActivityMemcpyPtoP4 *>(fake_.bytes.data() + 3 * kSlot);
  pp->kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  pp->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  pp->bytes = 512;
  pp->deviceId = 0;
  pp->srcDeviceId = 0;
  pp->dstDeviceId = 1;
  pp->correlationId = 44;
  struct Seen {
    std::vector<uint32_t> kernels;
    std::vector<MemoryRecord> memory;
  } seen;
  const RecordSink sink{
      &seen,
      [](void *c, KernelRecord &k) { static_cast<Seen *>(c)->kernels.push_back(k.correlation_id); },
      [](void *c, MemoryRecord &m) { static_cast<Seen *>(c)->memory.push_back(m); }};
  const BufferWalk w = walk_records(api_, fake_.bytes.data(), fake_.bytes.size(), sink);
  EXPECT_EQ(w.kernel_records, 1u);
  EXPECT_EQ(w.memory_records, 3u);
  EXPECT_EQ(seen.kernels, std::vector<uint32_t>{1});
  ASSERT_EQ(seen.memory.size(), 3u);
  const MemoryRecord &m = seen.memory[0];
  EXPECT_EQ(m.kind, uint32_t{PARCAGPU_KIND_MEMCPY});
  EXPECT_EQ(m.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  EXPECT_EQ(m.src_kind, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
  EXPECT_EQ(m.flags, PARCAGPU_MREC_FLAG_ASYNC);
  EXPECT_EQ(m.bytes, 1u << 20);
  EXPECT_EQ(m.start, 100u);
  EXPECT_EQ(m.end, 350u);
  EXPECT_EQ(m.device_id, 2u);
  EXPECT_EQ(m.stream_id, 9u);
  EXPECT_EQ(m.correlation_id, 42u);
  EXPECT_EQ(seen.memory[1].kind, uint32_t{PARCAGPU_KIND_MEMSET});
  EXPECT_EQ(seen.memory[1].flags, 0);  // synchronous
  EXPECT_EQ(seen.memory[1].bytes, 4096u);
  EXPECT_EQ(seen.memory[1].correlation_id, 43u);
  EXPECT_EQ(seen.memory[2].kind, uint32_t{PARCAGPU_KIND_MEMCPY2});
  EXPECT_EQ(seen.memory[2].peer_device_id, 1u);
  EXPECT_EQ(seen.memory[2].correlation_id, 44u);
  // Kernels alone: copies are skipped, not miscounted as kernels.
  BufferWalk k;
  EXPECT_EQ(walk(&k), std::vector<uint32_t>{1});
  EXPECT_EQ(k.memory_records, 0u);
}

TEST_F(ActivityBuffersTest, ACorrelationIdSetIsWrittenIntoTheRecord) {
  add(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 0);
  BufferWalk w;
  walk_kernel_records(api_, fake_.bytes.data(), fake_.bytes.size(),
                      [](KernelRecord &k) { k.set_correlation_id(99); });
  uint32_t stored = 0;
  std::memcpy(&stored, fake_.bytes.data() + PARCAGPU_KREC_OFF_CORRELATION_ID, sizeof stored);
  EXPECT_EQ(stored, 99u);
  EXPECT_EQ(walk(&w), std::vector<uint32_t>{99});
}

TEST_F(ActivityBuffersTest, AFailingNextRecordCutsTheWalkShort) {
  for (uint32_t id = 1; id <= 4; ++id) add(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, id);
  fake_.fail_at = 2;
  BufferWalk w;
  EXPECT_EQ(walk(&w), (std::vector<uint32_t>{1, 2}));
  EXPECT_TRUE(w.cut_short);
  EXPECT_EQ(w.error, CUPTI_ERROR_INVALID_KIND);
  EXPECT_EQ(w.kernel_records, 2u);
}

TEST_F(ActivityBuffersTest, AnEmptyBufferIsNotReadAtAll) {
  add(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, 1);
  BufferWalk w;
  EXPECT_TRUE(walk(&w, 0).empty());
  EXPECT_FALSE(w.cut_short);
  EXPECT_EQ(fake_.calls, 0);
}

TEST(BufferPool, ReusesBuffersAndRefusesPastItsCap) {
  BufferPool pool(4096, 2);
  uint8_t *a = pool.acquire();
  uint8_t *b = pool.acquire();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 8, 0u);
  EXPECT_EQ(pool.acquire(), nullptr);
  pool.release(a);
  EXPECT_EQ(pool.acquire(), a);
  pool.release(a);
  pool.release(b);
}

// A burst's buffers go back to the system once released beyond kKeepIdle (issue 30: the pool's
// high-water mark stayed resident), and the cap counts only those alive.
TEST(BufferPool, KeepsFewIdleBuffers) {
  constexpr size_t kMax = BufferPool::kKeepIdle + 6;
  BufferPool pool(1 << 20, kMax);
  std::vector<uint8_t *> taken;
  for (size_t i = 0; i < kMax; ++i) {
    taken.push_back(pool.acquire());
    ASSERT_NE(taken.back(), nullptr);
    taken.back()[(1 << 20) - 1] = 1;  // writable to its end
  }
  EXPECT_EQ(pool.acquire(), nullptr);
  for (uint8_t *b : taken) pool.release(b);
  EXPECT_EQ(pool.idle(), BufferPool::kKeepIdle);
  taken.clear();
  for (size_t i = 0; i < kMax; ++i) taken.push_back(pool.acquire());
  for (uint8_t *b : taken) EXPECT_NE(b, nullptr);
  EXPECT_EQ(pool.acquire(), nullptr);
  for (uint8_t *b : taken) pool.release(b);
}

}  // namespace
}  // namespace parcagpu
