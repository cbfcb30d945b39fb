// NvtxBatch: one thread's pending NVTX records with the library's own copies of their messages
// (the application may overwrite its string as soon as its NVTX call returns), cut to
// PARCAGPU_NVTX_MESSAGE_MAX bytes at a character's start, wide text as UTF-8.
#include "nvtx/nvtx_batch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

namespace parcagpu {
namespace {

NvtxEventRecord record(uint64_t ts, uint16_t kind) {
  NvtxEventRecord r{};
  r.timestamp_ns = ts;
  r.tid = 77;
  r.kind = kind;
  return r;
}

TEST(NvtxBatch, RecordsPointAtCopiesThatOutliveTheApplicationsString) {
  auto b = std::make_unique<NvtxBatch>();
  char app[32];
  std::strcpy(app, "forward");
  NvtxBatch::Copied copied;
  b->add(record(10, PARCAGPU_NVTX_KIND_RANGE_PUSH), NvtxText{app}, &copied);
  std::memset(app, 'X', sizeof app - 1);  // the application reuses its buffer
  EXPECT_EQ(copied, NvtxBatch::Copied::kWhole);
  ASSERT_EQ(b->count(), 1u);
  const auto *rec = static_cast<const NvtxEventRecord *>(b->pointers()[0]);
  EXPECT_EQ(rec, &b->record(0));
  EXPECT_STREQ(rec->message, "forward");
  EXPECT_NE(rec->message, app);
  EXPECT_EQ(rec->tid, 77u);
  EXPECT_EQ(rec->kind, PARCAGPU_NVTX_KIND_RANGE_PUSH);
}

TEST(NvtxBatch, NoMessageIsAnEmptyStringNeverNull) {
  auto b = std::make_unique<NvtxBatch>();
  NvtxBatch::Copied copied;
  b->add(record(1, PARCAGPU_NVTX_KIND_RANGE_POP), NvtxText{}, &copied);
  ASSERT_NE(b->record(0).message, nullptr);
  EXPECT_STREQ(b->record(0).message, "");
}

TEST(NvtxBatch, FillsToItsCapacityInOrderAndClears) {
  auto b = std::make_unique<NvtxBatch>();
  NvtxBatch::Copied copied;
  for (uint32_t i = 0; i < NvtxBatch::kCapacity; ++i) {
    EXPECT_FALSE(b->full());
    const std::string m = "m" + std::to_string(i);
    b->add(record(100 + i, PARCAGPU_NVTX_KIND_MARK), NvtxText{m.c_str()}, &copied);
  }
  EXPECT_TRUE(b->full());
  EXPECT_EQ(b->oldest_ns(), 100u);
  for (uint32_t i = 0; i < NvtxBatch::kCapacity; ++i) {
    const auto *rec = static_cast<const NvtxEventRecord *>(b->pointers()[i]);
    EXPECT_EQ(rec->timestamp_ns, 100 + i);
    EXPECT_EQ(std::string(rec->message), "m" + std::to_string(i));
  }
  b->clear();
  EXPECT_TRUE(b->empty());
  EXPECT_EQ(b->oldest_ns(), 0u);
}

TEST(NvtxBatch, ALongMessageIsCutAtTheCapAndSaidSo) {
  auto b = std::make_unique<NvtxBatch>();
  const std::string longer(PARCAGPU_NVTX_MESSAGE_MAX + 50, 'a');
  const std::string exact(PARCAGPU_NVTX_MESSAGE_MAX, 'b');
  NvtxBatch::Copied copied;
  b->add(record(1, PARCAGPU_NVTX_KIND_MARK), NvtxText{longer.c_str()}, &copied);
  EXPECT_EQ(copied, NvtxBatch::Copied::kTruncated);
  EXPECT_EQ(std::string(b->record(0).message), longer.substr(0, PARCAGPU_NVTX_MESSAGE_MAX));
  b->add(record(2, PARCAGPU_NVTX_KIND_MARK), NvtxText{exact.c_str()}, &copied);
  EXPECT_EQ(copied, NvtxBatch::Copied::kWhole);
  EXPECT_EQ(std::string(b->record(1).message), exact);
}

TEST(NvtxBatch, ACutNeverSplitsAUtf8Character) {
  // 238 bytes then "é" (2 bytes): the cap (239) falls inside it, so the cut is before it.
  const std::string m = std::string(PARCAGPU_NVTX_MESSAGE_MAX - 1, 'a') + "\xc3\xa9" + "z";
  char out[NvtxBatch::kMessageBytes];
  EXPECT_FALSE(NvtxBatch::copy_text(NvtxText{m.c_str()}, out));
  EXPECT_EQ(std::string(out), std::string(PARCAGPU_NVTX_MESSAGE_MAX - 1, 'a'));
}

TEST(NvtxBatch, WideTextBecomesUtf8) {
  char out[NvtxBatch::kMessageBytes];
  EXPECT_TRUE(NvtxBatch::copy_text(NvtxText{nullptr, L"fwd \u00e9\u20ac\U0001F600"}, out));
  EXPECT_EQ(std::string(out), "fwd \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  // Cut by whole characters: 80 euro signs (3 bytes each) hold 79 in 239 bytes.
  const std::wstring euros(80, L'\u20ac');
  EXPECT_FALSE(NvtxBatch::copy_text(NvtxText{nullptr, euros.c_str()}, out));
  EXPECT_EQ(std::strlen(out), 79u * 3);
}

TEST(NvtxBatch, AnUnreadableMessageIsEmpty) {
  char out[NvtxBatch::kMessageBytes] = "junk";
  NvtxText t;
  t.unreadable = true;
  EXPECT_TRUE(NvtxBatch::copy_text(t, out));
  EXPECT_STREQ(out, "");
}

}  // namespace
}  // namespace parcagpu
