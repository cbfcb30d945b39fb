// The cubin registry on a fake cuptiGetCubinCrc (a hash of the bytes, or a failure): which
// cubins are copied, one publication per CRC however many modules load it, unloads matched by
// pointer or by CRC, and cubins without a CRC counted and said once.
#include "trackers/cubin_registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "repeated_errors.h"

namespace parcagpu {
namespace {

uint64_t g_fake_crc_calls = 0;
CUptiResult fake_crc(CUpti_GetCubinCrcParams *p) {
  g_fake_crc_calls++;
  if (!p->cubin) return CUPTI_ERROR_INVALID_PARAMETER;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < p->cubinSize; ++i)
    h = (h ^ static_cast<const uint8_t *>(p->cubin)[i]) * 1099511628211ull;
  p->cubinCrc = h;
  return CUPTI_SUCCESS;
}

// A registry on a CUPTI whose cuptiGetCubinCrc is fake_crc.
class CubinRegistryTest : public ::testing::Test {
 protected:
  static CuptiApi crc_api() {
    CuptiApi api;
    api.cuptiGetCubinCrc = &fake_crc;
    return api;
  }
  const CuptiApi api_ = crc_api();
  CubinRegistry reg_{api_};
};

const char kImageCubin[] =
    "\x7f"
    "ELF in this binary's image";

TEST_F(CubinRegistryTest, HeapCubinsAreCopiedImageCubinsAreNot) {
  std::vector<char> *heap = new std::vector<char>(1000, 'x');
  reg_.on_module_loaded(heap->data(), heap->size());
  reg_.on_module_loaded(kImageCubin, sizeof kImageCubin);
  CubinStats s = reg_.stats();
  EXPECT_EQ(s.loaded, 2u);
  EXPECT_EQ(s.live, 2u);
  EXPECT_EQ(s.copied, 1u);
  EXPECT_EQ(s.copied_bytes, 1000u);
  // The driver frees its buffer at unload; the unload matches by pointer.
  reg_.on_module_unload(heap->data(), heap->size());
  delete heap;
  s = reg_.stats();
  EXPECT_EQ(s.unloaded, 1u);
  EXPECT_EQ(s.live, 1u);
  EXPECT_EQ(s.copied_bytes, 0u);
}

TEST_F(CubinRegistryTest, SameBytesTwiceArePublishedOnceAndUnloadedLast) {
  std::vector<char> a(64, 'a'), b(64, 'a');  // two modules, same cubin
  reg_.on_module_loaded(a.data(), a.size());
  reg_.on_module_loaded(b.data(), b.size());
  EXPECT_EQ(reg_.stats().live, 1u);
  reg_.on_module_unload(b.data(), b.size());  // matched by CRC: its pointer was never published
  EXPECT_EQ(reg_.stats().live, 1u);
  reg_.on_module_unload(a.data(), a.size());
  EXPECT_EQ(reg_.stats().live, 0u);
}

TEST(CubinRegistry, WithoutCuptiGetCubinCrcNothingIsPublished) {
  CuptiApi api;  // the entry point is missing
  CubinRegistry reg(api);
  std::vector<char> a(64, 'a');
  reg.on_module_loaded(a.data(), a.size());
  EXPECT_EQ(reg.stats().live, 0u);
  EXPECT_EQ(reg.stats().no_crc, 1u);
}

CUptiResult failing_crc(CUpti_GetCubinCrcParams *) { return CUPTI_ERROR_INVALID_PARAMETER; }

uint64_t crc_failures_counted() { return repeated_error_count("cuptiGetCubinCrc failed"); }

TEST(CubinRegistry, AFailingCrcIsCountedAndSaidOnce) {
  CuptiApi api;
  api.cuptiGetCubinCrc = &failing_crc;
  CubinRegistry reg(api);
  std::vector<char> a(64, 'a'), b(64, 'b'), c(64, 'c');
  const uint64_t before = crc_failures_counted();
  testing::internal::CaptureStderr();
  for (const auto *v : {&a, &b, &c}) reg.on_module_loaded(v->data(), v->size());
  const std::string said = testing::internal::GetCapturedStderr();
  const CubinStats s = reg.stats();
  EXPECT_EQ(s.loaded, 3u);
  EXPECT_EQ(s.no_crc, 3u);
  EXPECT_EQ(s.live, 0u);
  EXPECT_EQ(s.copied, 0u);
  EXPECT_EQ(crc_failures_counted(), before + 3);
  // The first of the process only.
  EXPECT_EQ(lines_saying(said, "cuptiGetCubinCrc failed"), before == 0 ? 1 : 0) << said;
}

TEST_F(CubinRegistryTest, UnloadsOfCubinsNeverPublishedChangeNothing) {
  std::vector<char> kept(64, 'k'), stranger(64, 's');
  reg_.on_module_loaded(kept.data(), kept.size());
  reg_.on_module_unload(stranger.data(), stranger.size());
  reg_.on_module_unload(kept.data(), kept.size() - 1);  // other bytes, other CRC
  reg_.on_module_unload(nullptr, 64);
  const CubinStats s = reg_.stats();
  EXPECT_EQ(s.unloaded, 0u);
  EXPECT_EQ(s.live, 1u);
  EXPECT_EQ(s.copied_bytes, 64u);
}

TEST_F(CubinRegistryTest, EmptyModulesAreNotCubins) {
  const uint64_t calls = g_fake_crc_calls;
  char byte = 0;
  reg_.on_module_loaded(nullptr, 100);
  reg_.on_module_loaded(&byte, 0);
  EXPECT_EQ(reg_.stats().loaded, 0u);
  EXPECT_EQ(g_fake_crc_calls, calls) << "CUPTI was asked about nothing";
}

TEST_F(CubinRegistryTest, AReloadAfterTheLastUnloadIsPublishedAgain) {
  std::vector<char> a(128, 'r');
  reg_.on_module_loaded(a.data(), a.size());
  reg_.on_module_unload(a.data(), a.size());
  reg_.on_module_loaded(a.data(), a.size());
  const CubinStats s = reg_.stats();
  EXPECT_EQ(s.loaded, 2u);
  EXPECT_EQ(s.unloaded, 1u);
  EXPECT_EQ(s.live, 1u);
  EXPECT_EQ(s.copied, 2u) << "copied again: the first copy went with the unload";
  EXPECT_EQ(s.copied_bytes, 128u);
}

}  // namespace
}  // namespace parcagpu
