// PcCoverage (src/pc/pc_coverage.h): which launches a due window should open at, from kernel
// records (GPU time) and PC records (sampled), with fake names and times.
#include "pc/pc_coverage.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

TEST(PcCoverage, AHotKernelWithNoSamplesIsWantedUntilSampled) {
  PcCoverage c;
  c.on_kernel("gemm", 900);
  c.on_kernel("filler", 100);
  EXPECT_EQ(c.targets(), 2u);
  EXPECT_TRUE(c.wanted_at("gemm"));
  c.on_sampled("gemm");
  EXPECT_FALSE(c.wanted_at("gemm"));
  EXPECT_TRUE(c.wanted_at("filler"));
  EXPECT_EQ(c.targets(), 1u);
}

TEST(PcCoverage, AKernelBelowTheHotShareIsNotWanted) {
  PcCoverage c;
  c.on_kernel("big", 1000);
  c.on_kernel("tiny", 5);  // 0.5% of the GPU time seen
  EXPECT_FALSE(c.wanted_at("tiny"));
  EXPECT_FALSE(c.wanted_at("never_seen"));
  EXPECT_FALSE(c.wanted_at(""));
  c.on_kernel("tiny", 20);  // 2.4%: hot now
  EXPECT_TRUE(c.wanted_at("tiny"));
}

TEST(PcCoverage, SamplesBeforeTheKernelRecordCount) {
  PcCoverage c;
  c.on_sampled("early");  // its PC records drained before its activity record was read
  c.on_kernel("early", 1000);
  EXPECT_FALSE(c.wanted_at("early"));
  EXPECT_EQ(c.targets(), 0u);
}

TEST(PcCoverage, AGraphLaunchIsWantedWhileAHotUnsampledKernelWasNeverLaunchedEagerly) {
  PcCoverage c;
  c.on_kernel("eager_only", 500);
  c.on_kernel("graph_only", 500);
  // Not yet known which runs where: a graph launch may hold either.
  EXPECT_TRUE(c.wanted_at(nullptr));
  EXPECT_TRUE(c.wanted_at("eager_only"));  // seen at an eager launch now
  EXPECT_TRUE(c.wanted_at(nullptr));       // graph_only never was
  c.on_sampled("graph_only");
  EXPECT_FALSE(c.wanted_at(nullptr)) << "the one left unsampled runs eagerly";
  EXPECT_TRUE(c.wanted_at("eager_only"));
}

TEST(PcCoverage, KernelsBeyondTheTableAreCountedNotKept) {
  PcCoverage c;
  for (size_t i = 0; i < PcCoverage::kMaxKernels + 10; ++i)
    c.on_kernel(("k" + std::to_string(i)).c_str(), 1);
  EXPECT_EQ(c.kernels_not_kept(), 10u);
}

}  // namespace
}  // namespace parcagpu
