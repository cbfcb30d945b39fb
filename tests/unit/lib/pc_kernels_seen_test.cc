// PcKernelsSeen (src/pc/pc_kernels_seen.h): a kernel name is a first use once, whatever buffer
// its text came from.
#include "pc/pc_kernels_seen.h"

#include <gtest/gtest.h>

#include <string>

namespace parcagpu {
namespace {

TEST(PcKernelsSeen, ANameIsFirstSeenOnce) {
  PcKernelsSeen seen;
  EXPECT_TRUE(seen.first_seen("_Z4gemmPf"));
  EXPECT_FALSE(seen.first_seen("_Z4gemmPf"));
  const std::string copy = "_Z4gemmPf";  // another record's copy of the name
  EXPECT_FALSE(seen.first_seen(copy.c_str()));
  EXPECT_TRUE(seen.first_seen("_Z4gemvPf"));
}

}  // namespace
}  // namespace parcagpu
