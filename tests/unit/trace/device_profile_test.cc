// Unit tests of GPU time by device (no BPF): tools/trace/device_profile.h fed as the tracer feeds it
// (every kernel record, and the joiner's matches through a MatchSink), gpu_time_by_device in the
// JSON summary and the "GPU time by device" section of the text report (tools/trace/report.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "device_profile.h"
#include "joiner.h"
#include "report.h"
#include "test_output.h"

namespace parcagpu::trace {
namespace {

// What Tracer does with kernels: every record counted on its device, every match (at once, or
// when the launch is announced after its kernel) with its GPU time.
struct Feed : MatchSink {
  Feed() = default;
  Feed(const Feed &) = delete;  // the joiner points at this sink
  Joiner joiner{Joiner::Limits{}, this};
  DeviceProfile devices;
  void on_match(const Launch &, const KernelRecord &k, uint32_t name_id, uint32_t) override {
    devices.on_match(k.device_id, name_id, k.duration_ns());
  }
  void kernel(uint32_t pid, uint32_t corr, uint32_t device, const char *name, uint64_t ns,
              uint32_t graph_id = 0) {
    KernelRecord k;
    k.pid = pid;
    k.correlation_id = corr;
    k.device_id = device;
    k.graph_id = graph_id;
    k.start = 1000;
    k.end = 1000 + ns;
    k.name = name;
    devices.on_record(pid, device);
    joiner.on_kernel(k);
  }
  Summary summary(size_t top = 10) {
    Summary s;
    joiner.add_to(&s);
    s.gpu_time_by_device = devices.summarize(joiner.names(), top);
    for (const DeviceSummary &d : s.gpu_time_by_device) s.gpu_ns_matched += d.gpu_ns;
    return s;
  }
};

std::string text_of(const Summary &s) {
  return test_output::printed([&](FILE *f) { print_summary(f, s, false); });
}

// Two processes on devices 0 and 1, a kernel that comes before its launch, a graph launch on
// device 1, and an orphan kernel on device 2.
void four_devices_worth(Feed &x) {
  x.joiner.on_correlation(10, 1, 211);
  x.kernel(10, 1, 0, "_Z5k_addPfi", 100);
  x.joiner.on_correlation(10, 2, 211);
  x.kernel(10, 2, 0, "_Z5k_mulPfi", 300);
  x.kernel(10, 3, 1, "_Z5k_addPfi", 50);  // before its launch: waits, then matches on device 1
  x.joiner.on_correlation(10, 3, -307);
  x.joiner.on_correlation(10, 4, -514);  // a graph of three kernels on device 1
  for (int i = 0; i < 3; ++i) x.kernel(10, 4, 1, "_Z4gemmv", 200, 9);
  x.joiner.on_correlation(20, 1, 211);  // another process, its own device 1
  x.kernel(20, 1, 1, "_Z5k_mulPfi", 25);
  x.kernel(10, 99, 2, "_Z5k_addPfi", 1000);  // no launch ever announced: an orphan
}

TEST(DeviceProfileTest, KernelsAndGpuTimePerDevice) {
  Feed x;
  four_devices_worth(x);
  const Summary s = x.summary();
  ASSERT_EQ(s.gpu_time_by_device.size(), 3u);
  const DeviceSummary &d0 = s.gpu_time_by_device[0], &d1 = s.gpu_time_by_device[1],
                      &d2 = s.gpu_time_by_device[2];
  EXPECT_EQ(d0.device, 0u);
  EXPECT_EQ(d0.kernel_records, 2u);
  EXPECT_EQ(d0.kernels, 2u);
  EXPECT_EQ(d0.gpu_ns, 400u);
  EXPECT_EQ(d0.pids, 1u);
  ASSERT_EQ(d0.by_kernel.size(), 2u);
  EXPECT_EQ(d0.by_kernel[0].kernel, "_Z5k_mulPfi");  // most GPU time first
  EXPECT_EQ(d0.by_kernel[0].kernel_demangled, "k_mul(float*, int)");
  EXPECT_EQ(d0.by_kernel[0].gpu_ns, 300u);
  EXPECT_EQ(d0.by_kernel[1].kernel, "_Z5k_addPfi");
  // Device 1: the late-announced launch's kernel, the graph's three, the other process's one.
  EXPECT_EQ(d1.device, 1u);
  EXPECT_EQ(d1.kernel_records, 5u);
  EXPECT_EQ(d1.kernels, 5u);
  EXPECT_EQ(d1.gpu_ns, 50u + 3 * 200 + 25);
  EXPECT_EQ(d1.pids, 2u);
  EXPECT_EQ(d1.kernel_names, 3u);
  ASSERT_EQ(d1.by_kernel.size(), 3u);
  EXPECT_EQ(d1.by_kernel[0].kernel, "_Z4gemmv");
  EXPECT_EQ(d1.by_kernel[0].kernels, 3u);
  EXPECT_EQ(d1.by_kernel[0].gpu_ns, 600u);
  // Device 2: its one record never matched.
  EXPECT_EQ(d2.device, 2u);
  EXPECT_EQ(d2.kernel_records, 1u);
  EXPECT_EQ(d2.kernels, 0u);
  EXPECT_EQ(d2.gpu_ns, 0u);
  EXPECT_TRUE(d2.by_kernel.empty());
  // The devices add up to the totals.
  EXPECT_EQ(d0.kernels + d1.kernels + d2.kernels, s.kernels_matched);
  EXPECT_EQ(d0.kernel_records + d1.kernel_records + d2.kernel_records, s.kernel_records);
  EXPECT_EQ(s.orphan_kernels, 1u);
}

TEST(DeviceProfileTest, TopKernelsPerDeviceKeepTheCount) {
  Feed x;
  four_devices_worth(x);
  const Summary s = x.summary(1);
  ASSERT_EQ(s.gpu_time_by_device.size(), 3u);
  EXPECT_EQ(s.gpu_time_by_device[1].by_kernel.size(), 1u);
  EXPECT_EQ(s.gpu_time_by_device[1].kernel_names, 3u);
  EXPECT_EQ(s.gpu_time_by_device[1].kernels, 5u);
}

TEST(DeviceProfileTest, Json) {
  Feed x;
  four_devices_worth(x);
  const nlohmann::ordered_json o = nlohmann::ordered_json::parse(json_line(summary_json(x.summary())));
  ASSERT_TRUE(o.contains("gpu_time_by_device")) << o.dump();
  // Right after gpu_time_by_stack.
  std::vector<std::string> keys;
  for (const auto &[k, v] : o.items()) keys.push_back(k);
  const auto at = std::find(keys.begin(), keys.end(), "gpu_time_by_device");
  ASSERT_NE(at, keys.begin());
  EXPECT_EQ(*(at - 1), "gpu_time_by_stack");
  const auto &d = o["gpu_time_by_device"];
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[1].dump(),
            "{\"device\":1,\"kernels\":5,\"kernel_records\":5,\"gpu_ns\":675,\"pids\":2,\"kernel_names\":3,"
            "\"by_kernel\":[{\"kernel\":\"_Z4gemmv\",\"demangled\":\"gemm()\",\"gpu_ns\":600,\"kernels\":3},"
            "{\"kernel\":\"_Z5k_addPfi\",\"demangled\":\"k_add(float*, int)\",\"gpu_ns\":50,\"kernels\":1},"
            "{\"kernel\":\"_Z5k_mulPfi\",\"demangled\":\"k_mul(float*, int)\",\"gpu_ns\":25,\"kernels\":1}]}");
  EXPECT_EQ(d[2]["kernels"], 0);
  EXPECT_EQ(d[2]["kernel_records"], 1);
  EXPECT_EQ(d[2]["by_kernel"].size(), 0u);
  // Per-device figures add up to the summary's.
  uint64_t kernels = 0, records = 0;
  for (const auto &row : d) {
    kernels += row["kernels"].get<uint64_t>();
    records += row["kernel_records"].get<uint64_t>();
  }
  EXPECT_EQ(kernels, o["kernels_matched"].get<uint64_t>());
  EXPECT_EQ(records, o["kernel_records"].get<uint64_t>());
}

TEST(DeviceProfileTest, JsonOfOneDeviceAndOfNone) {
  Feed one;
  one.joiner.on_correlation(10, 1, 211);
  one.kernel(10, 1, 0, "k", 10);
  const Json j = summary_json(one.summary());
  ASSERT_EQ(j["gpu_time_by_device"].size(), 1u);
  EXPECT_EQ(j["gpu_time_by_device"][0]["kernels"], 1);
  Feed none;
  EXPECT_EQ(summary_json(none.summary())["gpu_time_by_device"].dump(), "[]");
}

TEST(DeviceProfileTest, TextSectionOnlyWithSeveralDevices) {
  Feed x;
  four_devices_worth(x);
  const std::string text = text_of(x.summary());
  EXPECT_NE(text.find("\nGPU time by device: 1.075 us of GPU time in 7 kernels, 3 devices\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  device 0       0.400 us   37.2%        2 kernels   top k_mul(float*, int) 75.0%\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  device 1       0.675 us   62.8%        5 kernels, 2 processes   top gemm() 88.9%\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  device 2       0.000 us    0.0%        0 kernels of 1 records\n"), std::string::npos)
      << text;
  // Before the stack table.
  EXPECT_LT(text.find("GPU time by device"), text.find("GPU time by launch stack"));

  Feed one;
  one.joiner.on_correlation(10, 1, 211);
  one.kernel(10, 1, 3, "k", 10);
  const std::string single = text_of(one.summary());
  EXPECT_EQ(single.find("by device"), std::string::npos) << single;
  EXPECT_EQ(single.find("device 3"), std::string::npos) << single;
}

}  // namespace
}  // namespace parcagpu::trace
