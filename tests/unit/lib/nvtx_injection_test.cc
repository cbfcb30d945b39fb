// NvtxInjection::forward when no libcupti can be had (PARCAGPU_CUPTI_PATH names nothing): NVTX's
// loader gets 0 (its calls stay no-ops), every time, without an exception; the reason is said
// once and every refusal counted. The search runs once per process (std::call_once), so this is
// the only test of the program that calls forward.
#include "nvtx/nvtx_injection.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "error_sites.h"

namespace parcagpu {
namespace {

int g_table_asked = 0;
const void *get_export_table(uint32_t) {
  ++g_table_asked;
  return nullptr;
}

constexpr const char *kSite = "NVTX injection calls left as no-ops (no libcupti entry point)";

TEST(NvtxInjection, NoLibcuptiLeavesNvtxNoOpsSaidOnceCountedEachTime) {
  ASSERT_EQ(setenv("PARCAGPU_CUPTI_PATH", "/nonexistent/parcagpu-test/libcupti.so", 1), 0);
  const uint64_t before = testing_sites::site_count(kSite);
  ::testing::internal::CaptureStderr();
  int first = -1, second = -1;
  EXPECT_NO_THROW(first = NvtxInjection::forward(&get_export_table));
  EXPECT_NO_THROW(second = NvtxInjection::forward(&get_export_table));
  const std::string err = ::testing::internal::GetCapturedStderr();
  unsetenv("PARCAGPU_CUPTI_PATH");

  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 0);
  EXPECT_EQ(g_table_asked, 0) << "no libcupti, so nobody asks NVTX for its export table";
  EXPECT_EQ(testing_sites::site_count(kSite), before + 2);
  testing_sites::expect_said_once(err, "NVTX calls stay no-ops (ranges are not collected)", before);
  // The reason names the path that could not be used (said at the site's first occurrence).
  if (before == 0)
    EXPECT_NE(err.find("/nonexistent/parcagpu-test/libcupti.so"), std::string::npos) << err;
}

}  // namespace
}  // namespace parcagpu
