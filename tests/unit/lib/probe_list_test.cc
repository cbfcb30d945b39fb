// The one probe list (include/parcagpu/probe_list.h) and what is generated from it: the
// consumer snapshot has a field for every probe, and its debug line names them all (before the
// list, it was kept by hand and printed 6 of 8 semaphores); the activity kinds follow the
// consumers that want them.
#include <gtest/gtest.h>

#include <string>

#include "activity/activity_kinds.h"
#include "base/consumers.h"
#include "parcagpu/abi.h"

namespace parcagpu {
namespace {

constexpr size_t kNumProbes = sizeof(abi::kProbes) / sizeof(abi::kProbes[0]);

TEST(ProbeList, TheConsumerSnapshotHasEveryProbe) {
  EXPECT_EQ(sizeof(Consumers), kNumProbes * sizeof(uint16_t));
  EXPECT_EQ(kNumProbes, 14u);
}

TEST(ProbeList, TheDebugLineNamesEveryProbeWithItsCount) {
  Consumers c;
  c.memory_batch = 3;
  c.cubin_loaded = 1;
  char line[512];
  c.describe(line, sizeof line);
  const std::string s = line;
  for (const abi::ProbeSpec &p : abi::kProbes)
    EXPECT_NE(s.find(std::string(p.name) + "="), std::string::npos) << p.name << " in " << s;
  EXPECT_NE(s.find("memory_batch=3"), std::string::npos) << s;
  EXPECT_NE(s.find("cubin_loaded=1"), std::string::npos) << s;
  // Cut, never overrun.
  char small[16];
  c.describe(small, sizeof small);
  EXPECT_LT(std::string(small).size(), sizeof small);
}

TEST(ActivityKinds, CopiesAndFillsAreWantedByMemoryBatchConsumersOnly) {
  Consumers kernels;
  kernels.activity_batch = 1;
  EXPECT_EQ(wanted_kinds(kernels), family_kinds(RecordFamily::Kernel));
  Consumers both = kernels;
  both.memory_batch = 1;
  EXPECT_EQ(wanted_kinds(both),
            family_kinds(RecordFamily::Kernel) | family_kinds(RecordFamily::Memory));
  size_t memory = 0;
  for (const ActivityKindEntry &e : kActivityKinds) memory += e.family == RecordFamily::Memory;
  EXPECT_EQ(memory, 3u);  // MEMCPY, MEMSET, MEMCPY2
  EXPECT_EQ(wanted_kinds(Consumers{}), 0u);
}

}  // namespace
}  // namespace parcagpu
