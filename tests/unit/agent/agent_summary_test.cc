// The consumer's accounting (agent_summary.h) on hand-made events, PC samples included.
#include "agent_summary.h"

#include <cupti_pcsampling.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <iterator>

namespace parcagpu::agent {
namespace {

// The PC record offsets the consumer decodes are CUPTI's (CUDA 12.4+ layout with correlationId).
static_assert(offsetof(CUpti_PCSamplingPCData, size) == AC_PC_OFF_SIZE);
static_assert(offsetof(CUpti_PCSamplingPCData, cubinCrc) == AC_PC_OFF_CUBIN_CRC);
static_assert(offsetof(CUpti_PCSamplingPCData, pcOffset) == AC_PC_OFF_PC_OFFSET);
static_assert(offsetof(CUpti_PCSamplingPCData, functionIndex) == AC_PC_OFF_FUNCTION_INDEX);
static_assert(offsetof(CUpti_PCSamplingPCData, functionName) == AC_PC_OFF_FUNCTION_NAME);
static_assert(offsetof(CUpti_PCSamplingPCData, stallReasonCount) == AC_PC_OFF_STALL_REASON_COUNT);
static_assert(offsetof(CUpti_PCSamplingPCData, stallReason) == AC_PC_OFF_STALL_REASON);
static_assert(offsetof(CUpti_PCSamplingPCData, correlationId) == AC_PC_OFF_CORRELATION_ID);
static_assert(offsetof(CUpti_PCSamplingPCData, correlationId) + 4 == AC_PC_RECORD_SIZE);
static_assert(sizeof(CUpti_PCSamplingStallReason) == 8);

bool no_memory(uint32_t, uint64_t, uint64_t, std::vector<uint8_t> *) { return false; }

// Whether the summary's JSON `j` holds `part`, exactly as written.
::testing::AssertionResult Holds(const std::string &j, const std::string &part) {
  if (j.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no " << part << "\nin " << j;
}

// An event of `type` from process `pid`, its other fields zero.
template <typename E>
E event(uint32_t type, uint32_t pid) {
  E e{};
  e.type = type;
  e.pid = pid;
  return e;
}

ac_correlation_event corr(uint32_t pid, uint32_t id, int32_t cbid) {
  auto e = event<ac_correlation_event>(AC_EV_CORRELATION, pid);
  e.correlation_id = id;
  e.signed_cbid = cbid;
  return e;
}

ac_kernel_event kernel(uint32_t pid, uint32_t id) {
  auto e = event<ac_kernel_event>(AC_EV_KERNEL, pid);
  e.correlation_id = id;
  e.start = 1'000'000;
  e.end = 1'002'000;
  return e;
}

ac_pc_sample_event pc(uint32_t pid, uint64_t crc, uint32_t corr, uint64_t nstalls, const char *fn) {
  auto e = event<ac_pc_sample_event>(AC_EV_PC_SAMPLE, pid);
  CUpti_PCSamplingPCData d{};
  d.size = AC_PC_RECORD_SIZE;
  d.cubinCrc = crc;
  d.stallReasonCount = nstalls;
  d.correlationId = corr;
  std::memcpy(e.record, &d, AC_PC_RECORD_SIZE);
  std::strncpy(e.function_name, fn, sizeof e.function_name - 1);
  for (uint32_t i = 0; i < AC_STALL_REASONS; i++) {
    e.stall[i].index = i + 1;
    e.stall[i].samples = i < nstalls ? 10 : 1000;  // beyond the count: copied, never counted
  }
  return e;
}

template <typename E>
void feed(Summary &s, const E &e) {
  ASSERT_TRUE(s.on_event(&e, sizeof e));
}

TEST(Summary, MatchesKernelsToAnnouncedLaunchesPerProcess) {
  Summary s(no_memory);
  feed(s, corr(1, 10, 211));
  feed(s, corr(1, 11, -514));  // a graph launch: two kernels
  feed(s, corr(1, 12, 311));   // a graph launch whose kernels never come
  feed(s, corr(1, 13, -307));  // an eager launch whose kernel never comes
  feed(s, kernel(1, 10));
  feed(s, kernel(1, 11));
  feed(s, kernel(1, 11));
  feed(s, kernel(1, 99));  // never announced
  feed(s, kernel(2, 10));  // same ID, another process: an orphan there
  const ProcessView &a = s.processes().at(1);
  EXPECT_EQ(a.correlations, 4u);
  EXPECT_EQ(a.kernel_records, 4u);
  const std::string j = s.json();
  EXPECT_TRUE(
      Holds(j,
            "\"1\":{\"correlations\":4,\"correlation_repeats\":0,"
            "\"correlations_by_cbid\":{\"-514\":1,\"-307\":1,\"211\":1,\"311\":1},"
            "\"kernel_records\":4,\"invalid_timestamps\":0,\"matched\":3,\"orphan_kernels\":1,"
            "\"orphan_correlations_eager\":1,\"orphan_correlations_graph\":1,"
            "\"graph_kernels_matched\":2,\"graph_launches_with_kernels\":1"));
  EXPECT_TRUE(
      Holds(j,
            "\"2\":{\"correlations\":0,\"correlation_repeats\":0,\"correlations_by_cbid\":{},"
            "\"kernel_records\":1,\"invalid_timestamps\":0,\"matched\":0,\"orphan_kernels\":1"));
}

TEST(Summary, KernelTimestampsThatCannotBeAreCounted) {
  Summary s(no_memory);
  feed(s, corr(1, 10, 211));
  ac_kernel_event k = kernel(1, 10);
  feed(s, k);
  k.start = 0;  // never stamped
  feed(s, k);
  k.start = 5'000'000;  // ends before it starts
  k.end = 4'000'000;
  feed(s, k);
  k.end = k.start + 61'000'000'000ull;  // a kernel of over a minute in a profiler's record
  feed(s, k);
  EXPECT_EQ(s.processes().at(1).invalid_timestamps, 3u);
  EXPECT_TRUE(Holds(s.json(), "\"invalid_timestamps\":3"));
}

// The check parcagpu-trace makes (tools/trace/timestamp_check.h), with the firing times the BPF side
// stamps and the process's start.
TEST(Summary, ImpossibleKernelRecordsAreCountedAndSaid) {
  constexpr uint64_t kS = 1'000'000'000, kBase = 1'700'000'000 * kS;
  Summary s(no_memory, [](uint32_t pid) -> uint64_t { return pid == 1 ? 100 * kS : 0; });
  EXPECT_EQ(s.impossible_line(), "");
  ac_correlation_event c = corr(1, 10, 211);
  c.ts = 200 * kS;
  feed(s, c);
  ac_kernel_event k = kernel(1, 10);
  k.ts = 200 * kS + kS / 10;  // delivered 0.1 s after the announcement
  k.start = kBase;
  k.end = kBase + kS / 1000;
  feed(s, k);  // fine
  k.correlation_id = 11;
  k.start = kBase + kS / 2000;  // overlaps the first, another launch of the same stream
  feed(s, k);
  k.correlation_id = 10;
  k.start = kBase + kS;
  k.end = kBase + kS + kS / 2;  // 0.5 s, longer than from its announcement to its delivery
  feed(s, k);
  k.end = kBase + kS + 200 * kS;  // 200 s, longer than the process (100 s old) had lived
  feed(s, k);
  k.end = k.start - 1;
  feed(s, k);
  const ProcessView &v = s.processes().at(1);
  EXPECT_EQ(v.impossible_total(), 4u);
  const std::string j = s.json();
  EXPECT_TRUE(Holds(j, "\"impossible_kernel_records\":4,\"impossible_by_reason\":{\"reversed\":1,"
                       "\"longer_than_process\":1,\"longer_than_launch\":1,\"stream_overlap\":1,"
                       "\"device_overfull\":0}"));
  EXPECT_TRUE(Holds(j, "\"kernel_records\":5,\"impossible_kernel_records\":4,"));
  EXPECT_EQ(s.impossible_line(),
            "4 impossible kernel records of 5 (reversed 1, longer_than_process 1, "
            "longer_than_launch 1, stream_overlap 1)");
}

TEST(Summary, ReadFailuresAreSummedFromTheCounters) {
  Summary s(no_memory);
  s.add_stat(7, AC_STAT_READ_FAIL_RECORD, 2);
  s.add_stat(7, AC_STAT_READ_FAIL_PC_STALLS, 1);
  s.add_stat(7, AC_STAT_BATCH_OVER_CAP, 5);  // not a read failure
  s.add_stat(7, AC_STAT_MAX, 5);             // out of range: ignored
  EXPECT_EQ(s.processes().at(7).read_failures(), 3u);
  EXPECT_TRUE(Holds(s.json(), "\"read_failures\":3,\"read_failures_by_kind\":{\"arg\":0,"
                     "\"record_ptrs\":0,\"record\":2,"));
}

TEST(Summary, AnEagerLaunchMatchesItsFirstKernelOnlyAsTheAgentDoes) {
  // cuLaunchCooperativeKernelMultiDevice (-480) on two devices: two kernels of one eager ID. The
  // agent forgets an eager launch at its first kernel: the second is an orphan.
  Summary s(no_memory);
  feed(s, corr(3, 20, -480));
  ac_kernel_event k = kernel(3, 20);
  feed(s, k);
  k.device_id = 1;
  feed(s, k);
  const std::string j = s.json();
  EXPECT_TRUE(Holds(j, "\"kernel_records\":2,\"invalid_timestamps\":0,\"matched\":1,"
                       "\"orphan_kernels\":1,"));
  EXPECT_TRUE(Holds(j, "\"eager_kernels_unmatched\":1"));
}

TEST(Summary, TheAgentKeepsTheLastGpuConfigOfAProcess) {
  Summary s(no_memory);
  ac_gpu_config_event g{AC_EV_GPU_CONFIG, 5, 0, 11, 1980000, 132};
  feed(s, g);
  g.device_id = 1;
  g.sampling_factor = 12;  // another factor on device 1: it replaces device 0's
  feed(s, g);
  const std::string j = s.json();
  EXPECT_TRUE(Holds(j, "\"gpu_config\":{\"device\":1,\"sampling_factor\":12,"));
  EXPECT_TRUE(Holds(j, "\"gpu_config_overwrites\":1"));
}

uint32_t ring_full(ac_probe p) { return static_cast<uint32_t>(AC_STAT_RING_FULL) + p; }

TEST(Summary, WhatTheAgentWouldHaveLostIsSaidPerProbeWithTheRingSize) {
  Summary s(no_memory);
  s.set_ring_bytes(1u << 20);
  // A pc_sample_batch firing of 1024 that found the ring full at record 300: one refused
  // reservation, 724 records given up; 3 more given up after a failed read; 2 kernel records and
  // a cubin_loaded the full ring refused.
  s.add_stat(9, ring_full(AC_PROBE_PC_SAMPLE_BATCH), 1);
  s.add_stat(9, AC_STAT_PC_ABANDONED, 727);
  s.add_stat(9, AC_STAT_PC_RING_FULL, 724);
  s.add_stat(9, AC_STAT_PC_OVER_CAP, 6);
  s.add_stat(9, ring_full(AC_PROBE_ACTIVITY_BATCH), 2);
  s.add_stat(9, AC_STAT_BATCH_OVER_CAP, 4);
  s.add_stat(9, ring_full(AC_PROBE_CUBIN_LOADED), 1);
  const std::string j = s.json();
  EXPECT_TRUE(Holds(j, "{\"ring_bytes\":1048576,"));
  EXPECT_TRUE(Holds(j, "\"ringbuf_drops\":4,\"lost\":{"
                       "\"activity_batch\":{\"ring_full\":2,\"over_cap\":4,\"read_failed\":0},"
                       "\"kernel_executed\":{\"ring_full\":0,\"over_cap\":0,\"read_failed\":0},"
                       "\"pc_sample_batch\":{\"ring_full\":724,\"over_cap\":6,\"read_failed\":3},"
                       "\"cubin_loaded\":{\"ring_full\":1,"));
  EXPECT_TRUE(Holds(j, "\"own_ring_drops\":0"));
}

TEST(Summary, NamesReadToTheAgentsLimitAreCountedAsCut) {
  Summary s(no_memory);
  auto k = event<ac_kernel_event>(AC_EV_KERNEL, 4);
  k.start = 1;
  k.end = 2;
  std::memset(k.name, 'k', sizeof k.name - 1);  // 255 bytes read: the agent's limit
  ASSERT_TRUE(s.on_event(&k, sizeof k));
  std::strcpy(k.name, "short");
  ASSERT_TRUE(s.on_event(&k, sizeof k));
  auto pc = event<ac_pc_sample_event>(AC_EV_PC_SAMPLE, 4);
  std::memset(pc.function_name, 'f', sizeof pc.function_name - 1);  // 127 bytes
  ASSERT_TRUE(s.on_event(&pc, sizeof pc));
  // The agent ring's room for a kernel event: read, not counted.
  uint8_t slot[AC_AGENT_KERNEL_EVENT_SIZE] = {};
  const uint32_t header[2] = {AC_EV_KERNEL_SLOT, 4};
  std::memcpy(slot, header, sizeof header);
  EXPECT_TRUE(s.on_event(slot, sizeof slot));
  EXPECT_EQ(s.processes().at(4).kernel_names_cut, 1u);
  EXPECT_EQ(s.processes().at(4).kernel_records, 2u);
  EXPECT_EQ(s.processes().at(4).pc_function_names_cut, 1u);
}

TEST(Summary, PcSamplesUseTheFirstStallReasonCountEntriesAndTheStallMap) {
  Summary s(no_memory);
  auto m = event<ac_stall_map_event>(AC_EV_STALL_MAP, 3);
  m.count = 3;
  std::strcpy(m.names[1], "barrier");
  std::strcpy(m.names[2], "memory");
  feed(s, m);
  feed(s, corr(3, 5, 211));
  feed(s, pc(3, 0xaa, 5, 2, "f"));    // announced
  feed(s, pc(3, 0xaa, 6, 1, "g"));    // not announced
  feed(s, pc(3, 0xbb, 0, 100, "f"));  // continuous mode; count clamped to the 64 copied
  const ProcessView &v = s.processes().at(3);
  EXPECT_EQ(v.pc_records, 3u);
  EXPECT_EQ(v.pc_stall_samples, 20u + 10u + 640u);
  EXPECT_EQ(v.pc_samples_by_stall_index.at(1), 30u);
  EXPECT_EQ(v.pc_samples_by_stall_index.at(64), 10u);
  const std::string j = s.json();
  EXPECT_TRUE(Holds(j, "\"by_stall_reason\":{\"barrier\":30,\"memory\":20,\"#3\":10"));
  EXPECT_TRUE(Holds(j, "\"correlation_ids\":{\"announced\":1,\"unannounced\":1,\"zero\":1}"));
  EXPECT_TRUE(Holds(j, "\"records_by_crc\":{\"0x00000000000000aa\":2,\"0x00000000000000bb\":1},"
                     "\"records_without_cubin\":3,\"function_names\":2"));
  EXPECT_TRUE(Holds(j, "\"stall_reason_map\":{\"seen\":true,\"firings_read\":1,\"count\":3,"
                     "\"names\":[\"\",\"barrier\",\"memory\"]}"));
}

TEST(Summary, CubinsAreReadThroughTheMemoryReaderAndParsedAsElf) {
  std::ifstream self("/proc/self/exe", std::ios::binary);
  const std::vector<uint8_t> image((std::istreambuf_iterator<char>(self)),
                                   std::istreambuf_iterator<char>());
  ASSERT_GT(image.size(), 4096u);
  std::vector<std::pair<uint64_t, uint64_t>> reads;
  Summary s([&](uint32_t, uint64_t addr, uint64_t size, std::vector<uint8_t> *out) {
    reads.push_back({addr, size});
    if (addr == 0xdead) return false;
    out->assign(image.begin(), image.begin() + std::min<size_t>(size, image.size()));
    return true;
  });
  ac_cubin_event e{AC_EV_CUBIN, 4, 0x1, 0x1000, image.size()};
  feed(s, e);
  e = {AC_EV_CUBIN, 4, 0x2, 0x1000, 4096};  // the start of an ELF file only
  feed(s, e);
  e = {AC_EV_CUBIN, 4, 0x3, 0xdead, 100};
  feed(s, e);
  EXPECT_EQ(reads.size(), 3u);
  const auto &c = s.processes().at(4).cubins;
  EXPECT_TRUE(c.at(1).readable);
  EXPECT_TRUE(c.at(1).elf);
  EXPECT_TRUE(c.at(2).readable);
  EXPECT_FALSE(c.at(2).elf);
  EXPECT_FALSE(c.at(3).readable);
  EXPECT_FALSE(c.at(3).elf);
}

TEST(Summary, GpuConfigsErrorsAndBadEvents) {
  Summary s(no_memory);
  ac_gpu_config_event g{AC_EV_GPU_CONFIG, 9, 0, 20, 1980000, 132};
  feed(s, g);
  auto err = event<ac_error_event>(AC_EV_ERROR, 9);
  err.code = -3;
  std::strcpy(err.message, "say \"hi\"\n");
  std::strcpy(err.component, "config");
  feed(s, err);
  const uint32_t junk[2] = {77, 9};
  EXPECT_FALSE(s.on_event(junk, sizeof junk));
  EXPECT_FALSE(s.on_event(&g, 6));
  const ac_kernel_event k = kernel(9, 1);
  EXPECT_FALSE(s.on_event(&k, 40));  // truncated
  const std::string j = s.json();
  EXPECT_TRUE(Holds(j,
                    "\"gpu_configs\":[{\"device\":0,\"sampling_factor\":20,\"clock_khz\":1980000,"
                    "\"sm_count\":132}]"));
  EXPECT_TRUE(Holds(j,
                    "\"error_list\":[{\"code\":-3,\"component\":\"config\","
                    "\"message\":\"say \\\"hi\\\"\\n\"}]"));
  EXPECT_TRUE(Holds(j, "\"bad_events\":3"));
}

}  // namespace
}  // namespace parcagpu::agent
