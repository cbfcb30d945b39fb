// The probe ABI header against the CUPTI headers (compile-time, in abi.h) and against probes.d.
#include "parcagpu/abi.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#ifndef PARCAGPU_PROBES_D
#error "PARCAGPU_PROBES_D must name the generated probes.d (src/base/probes.d preprocessed)"
#endif

namespace {

int size_of(const std::string &type) {
  if (type.find('*') != std::string::npos) return 8;
  if (type == "uint32_t") return 4;
  if (type == "int32_t") return -4;
  if (type == "uint64_t") return 8;
  if (type == "int64_t") return -8;
  return 0;
}

TEST(Abi, ProbesDMatchesTheHeaderProbeList) {
  std::ifstream f(PARCAGPU_PROBES_D);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  std::regex probe_re(R"(probe\s+(\w+)\s*\(([^)]*)\))");
  size_t found = 0;
  for (std::sregex_iterator it(text.begin(), text.end(), probe_re), end; it != end; ++it) {
    const std::string name = (*it)[1];
    const parcagpu::abi::ProbeSpec *spec = nullptr;
    for (const auto &p : parcagpu::abi::kProbes)
      if (name == p.name) spec = &p;
    ASSERT_NE(spec, nullptr) << name << " is in probes.d but not in abi.h";
    std::string args = (*it)[2];
    std::vector<int> sizes;
    std::stringstream as(args);
    std::string arg;
    while (std::getline(as, arg, ',')) {
      arg = std::regex_replace(arg, std::regex(R"(\s*\w+\s*$)"), "");  // drop the name
      arg = std::regex_replace(arg, std::regex(R"(^\s+|\s+$|const\s+)"), "");
      sizes.push_back(size_of(arg));
    }
    ASSERT_EQ(static_cast<int>(sizes.size()), spec->nargs) << name;
    for (int i = 0; i < spec->nargs; ++i) EXPECT_EQ(sizes[i], spec->arg_sizes[i]) << name << i;
    ++found;
  }
  EXPECT_EQ(found, sizeof(parcagpu::abi::kProbes) / sizeof(parcagpu::abi::kProbes[0]));
}

TEST(Abi, RecordLayoutConstants) {
  // Compile-time checks against CUpti_ActivityKernel5..10 live in abi.h; spot-check the values
  // the production consumer documents.
  EXPECT_EQ(PARCAGPU_KREC_SIZE, 160);
  EXPECT_EQ(PARCAGPU_KREC_OFF_CORRELATION_ID, 92);
  EXPECT_EQ(PARCAGPU_KREC_OFF_GRAPH_ID, 156);
  EXPECT_EQ(PARCAGPU_ACTIVITY_BATCH_MAX, 128);
  EXPECT_EQ(offsetof(CUpti_ActivityKernel10, graphNodeId), 144u);
}

TEST(Abi, MemoryRecordLayout) {
  // parcagpu's own record (memory_batch); activity_kinds.h holds MemoryRecord to these.
  EXPECT_EQ(PARCAGPU_MREC_SIZE, 56);
  EXPECT_EQ(PARCAGPU_MREC_OFF_CORRELATION_ID, 40);
  EXPECT_EQ(PARCAGPU_MREC_OFF_PEER_DEVICE_ID, 44);
  EXPECT_EQ(PARCAGPU_MREC_OFF_CPU_BLOCKED, 48);
  EXPECT_EQ(PARCAGPU_MEMORY_BATCH_MAX * PARCAGPU_MREC_SIZE, 3584) << "one read of a consumer";
}

}  // namespace
