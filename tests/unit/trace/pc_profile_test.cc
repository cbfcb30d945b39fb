// PC sampling (--pc) without BPF: source lines from the mock's real cubin (nvcc -lineinfo,
// tools/mock/pc_kernels.cu), and the per-kernel profile with its JSON.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cubin_lines.h"
#include "parcagpu/abi.h"
#include "pc_events.h"
#include "pc_profile.h"
#include "test_output.h"

namespace parcagpu::trace {
namespace {

std::vector<uint8_t> mock_cubin() {
  std::ifstream f(PARCAGPU_MOCK_CUBIN, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// The line of tools/mock/pc_kernels.cu that holds `text`.
int line_of(const char *text) {
  std::ifstream f(PARCAGPU_MOCK_CUBIN_SOURCE);
  std::string l;
  for (int n = 1; std::getline(f, l); ++n)
    if (l.find(text) != std::string::npos) return n;
  return -1;
}

TEST(CubinLines, MapsEveryKernelsOffsetsToItsOwnLines) {
  const std::vector<uint8_t> bytes = mock_cubin();
  ASSERT_GT(bytes.size(), 1000u);
  CubinLines lines;
  std::string error;
  ASSERT_TRUE(lines.load(bytes.data(), bytes.size(), &error)) << error;
  EXPECT_TRUE(lines.has_lines());
  EXPECT_GE(lines.functions(), 9u);
  // Every kernel starts at offset 0 of its own section: without the relocations every one of
  // them would map to the same few lines. Each must land inside its own body.
  struct K {
    const char *mangled, *first, *last;
  } kernels[] = {
      {"_Z5k_addPfi", "void k_add(", "// load, add, store"},
      {"_Z5k_mulPfi", "void k_mul(", "if (i < n) a[i] = v;"},
      {"_Z10gemm_tiledPKfS0_Pfiii", "void gemm_tiled(", "C[row * N + col] = acc;"},
      {"_Z10reduce_sumPfPKfi", "void reduce_sum(", "atomicAdd(out, s[0]);"},
  };
  for (const K &k : kernels) {
    const int lo = line_of(k.first), hi = line_of(k.last) + 1;  // + its closing brace
    ASSERT_GT(lo, 0) << k.first;
    int found = 0;
    for (uint64_t off = 0; off < 4096; off += 16) {
      CubinLines::Line l;
      if (!lines.lookup(k.mangled, off, &l)) continue;
      // Inlined device functions (atomicAdd) map to the CUDA headers that define them.
      if (l.file.find("pc_kernels.cu") == std::string::npos) {
        EXPECT_NE(l.file.find(".h"), std::string::npos) << l.file;
        continue;
      }
      ++found;
      EXPECT_GE(l.line, lo) << k.mangled << "+" << off;
      EXPECT_LE(l.line, hi) << k.mangled << "+" << off;
    }
    EXPECT_GT(found, 0) << k.mangled;
  }
  CubinLines::Line l;
  EXPECT_FALSE(lines.lookup("_Z9not_thereP", 0, &l));
  EXPECT_FALSE(lines.lookup("_Z5k_addPfi", 1 << 20, &l)) << "past the kernel's end";
}

TEST(CubinLines, NotAnElfIsRejected) {
  const uint8_t junk[] = "not a cubin at all";
  CubinLines lines;
  std::string error;
  EXPECT_FALSE(lines.load(junk, sizeof junk, &error));
  EXPECT_FALSE(error.empty());
}

std::vector<char> stall_blob() {
  std::vector<char> blob(PARCAGPU_STALL_REASON_MAX * PARCAGPU_STALL_REASON_NAME_LEN, 0);
  std::strcpy(&blob[14 * 64], "smsp__pcsamp_warps_issue_stalled_long_scoreboard");
  std::strcpy(&blob[16 * 64], "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle");
  return blob;
}

// Issue 30: every announced launch was kept to the end of the trace (~600 MB for 8.8M of them in
// a 10-minute soak with every launch announced). Samples are told by their launch when they come,
// and only the last 2^19 to 2^20 announcements are kept.
TEST(PcProfile, AnnouncementsAreForgottenButSamplesKeepTheirLaunch) {
  PcProfile p;
  p.on_correlation(7, 1, 211);
  PcSample s;
  s.pid = 7;
  s.function = "_Z5k_mulPfi";
  s.pc_offset = 0x40;
  s.correlation_id = 1;
  s.stalls = {{16, 5}};
  p.on_sample(s);
  for (uint32_t c = 2; c < (2u << 20); ++c) p.on_correlation(7, c, -514);
  p.on_sample(s);  // long after its announcement went: told as unannounced
  s.correlation_id = (2u << 20) - 1;
  p.on_sample(s);
  const Json k = p.json()["kernels"][0];
  EXPECT_EQ(k["by_launch"], Json({{"-514", 5}, {"211", 5}, {"unannounced", 5}}));
  EXPECT_EQ(k["samples_with_stack"], 10);
  EXPECT_EQ(k["samples_unannounced"], 5);
  EXPECT_EQ(k["launches"], 2);
}

TEST(PcProfile, KernelsStallsLaunchesAndLines) {
  const std::vector<uint8_t> bytes = mock_cubin();
  const uint64_t crc = PcProfile::crc32(bytes.data(), bytes.size());
  PcProfile p;
  const std::vector<char> blob = stall_blob();
  p.on_stall_map(7, blob.data(), blob.size());
  p.on_cubin(7, crc, bytes.size(), bytes);
  p.on_gpu_config(7, 0, 17, 1980000, 132);
  p.on_gpu_config(7, 0, 0, 1980000, 132);  // a later firing never replaces the first
  p.on_correlation(7, 100, 211);   // cudaLaunchKernel
  p.on_correlation(7, 101, -514);  // cuGraphLaunch
  PcSample s;
  s.pid = 7;
  s.cubin_crc = crc;
  s.function = "_Z5k_mulPfi";
  s.pc_offset = 0x40;
  s.correlation_id = 100;
  s.stalls = {{16, 30}, {14, 2}};
  p.on_sample(s);
  s.correlation_id = 101;  // a graph kernel's sample: its graph launch's ID
  p.on_sample(s);
  s.function = "_Z5k_addPfi";
  s.correlation_id = 555;  // never announced
  s.stalls = {{14, 3}};
  p.on_sample(s);
  const std::string j = json_line(p.json());
  // Hottest first, with its stall reasons named, samples by the launch that announced them.
  EXPECT_LT(j.find("\"function\":\"_Z5k_mulPfi\""), j.find("\"function\":\"_Z5k_addPfi\""));
  EXPECT_NE(j.find("\"by_launch\":{\"-514\":32,\"211\":32}"), std::string::npos) << j;
  EXPECT_NE(j.find("\"by_launch\":{\"unannounced\":3}"), std::string::npos) << j;
  EXPECT_NE(j.find("\"name\":\"math_pipe_throttle\",\"samples\":60"), std::string::npos) << j;
  EXPECT_NE(j.find("\"sampling_factor\":17"), std::string::npos) << j;
  EXPECT_EQ(j.find("\"sampling_factor\":0"), std::string::npos) << j;
  EXPECT_NE(j.find("\"bytes_crc32\":" + std::to_string(crc)), std::string::npos) << j;
  EXPECT_NE(j.find("\"has_lines\":true"), std::string::npos) << j;
  EXPECT_NE(j.find("pc_kernels.cu:"), std::string::npos) << "hot PCs map to source lines: " << j;
  EXPECT_NE(j.find("\"records\":3,\"samples\":67,\"pairs\":5"), std::string::npos) << j;
}

// The mock cubin (its bytes and CRC) and its function symbols with `part` in their names, by
// symbol-table index (none when it does not load).
struct MockCubinFunctions {
  std::vector<uint8_t> bytes;
  uint64_t crc = 0;
  std::map<uint32_t, std::string> named;
};

MockCubinFunctions mock_cubin_functions(const char *part) {
  MockCubinFunctions c;
  c.bytes = mock_cubin();
  c.crc = PcProfile::crc32(c.bytes.data(), c.bytes.size());
  CubinLines lines;
  std::string error;
  EXPECT_TRUE(lines.load(c.bytes.data(), c.bytes.size(), &error)) << error;
  for (uint32_t i = 0; i < 4096; ++i)
    if (const std::string *f = lines.function_at(i); f && f->find(part) != std::string::npos)
      c.named[i] = *f;
  return c;
}

// Issue 43 item 2: the probe's copy of a PC record's function name ends at 127 bytes, as the
// production consumer's does. The mock cubin's long-named kernels (tools/mock/pc_kernels.cu)
// share their first 127 bytes: cut there they were one kernel with an undemangleable name. Each
// is its own kernel, named by its cubin's symbol at CUPTI's functionIndex, whole and demangled.
TEST(PcProfile, NamesCutByTheProbeAreWholeFromTheCubin) {
  const MockCubinFunctions cubin = mock_cubin_functions("a_namespace_whose_name_alone");
  const auto &long_ones = cubin.named;
  ASSERT_EQ(long_ones.size(), 4u);
  PcProfile p;
  p.on_cubin(7, cubin.crc, cubin.bytes.size(), cubin.bytes);
  PcSample s;
  s.pid = 7;
  s.cubin_crc = cubin.crc;
  s.pc_offset = 0x10;
  s.stalls = {{14, 3}};
  for (const auto &[index, name] : long_ones) {
    ASSERT_GT(name.size(), PV_FUNCTION_NAME_LEN - 1u);
    s.function = name.substr(0, PV_FUNCTION_NAME_LEN - 1);  // as the probe copies it
    s.function_index = index;
    p.on_sample(s);
  }
  // The same cut name from a cubin that was never read: left cut, but still two kernels.
  s.cubin_crc = cubin.crc + 1;
  for (uint32_t index : {1u, 2u}) {
    s.function_index = index;
    p.on_sample(s);
  }
  const Json j = p.json();
  std::set<std::string> whole, cut;
  for (const Json &k : j["kernels"]) {
    const std::string f = k["function"];
    if (k.value("name_cut", false)) {
      cut.insert(f + "/" + std::to_string(k["function_index"].get<uint32_t>()));
    } else {
      whole.insert(f);
      EXPECT_NE(k.value("demangled", std::string()).find("::"), std::string::npos) << k;
      EXPECT_NE(json_line(k).find("pc_kernels.cu:"), std::string::npos) << "its lines: " << k;
    }
  }
  std::set<std::string> expected;
  for (const auto &kv : long_ones) expected.insert(kv.second);
  EXPECT_EQ(whole, expected);
  EXPECT_EQ(cut.size(), 2u) << json_line(j);
  EXPECT_EQ(j["names_completed_from_cubin"], 4);
  EXPECT_EQ(j["names_left_cut"], 2);
  const std::string text = test_output::printed([&](FILE *f) { p.print(f, 20); });
  EXPECT_NE(text.find("::variant<1>(float*)"), std::string::npos) << text;
  EXPECT_NE(text.find("::deep<2>(float*)"), std::string::npos) << text;
  EXPECT_NE(text.find("[name cut: its cubin was not read]"), std::string::npos) << text;
}

// Issue 43 item 4: the kernels that ran with GPU time and got no PC samples are named at the
// end, with why where it is known: no PC sampling in the process, code in no cubin published (CUPTI
// does not attribute it), samples CUPTI did not attribute (reported by the library), a GPU time
// below one sampling period, or else outside the sampling episodes. A kernel name the library
// handed over as a stand-in is matched by its whole name.
TEST(PcProfile, KernelsWithGpuTimeAndNoSamplesAreNamedWithWhy) {
  const MockCubinFunctions cubin = mock_cubin_functions("deepILi1E");
  const auto &deep = cubin.named;
  ASSERT_EQ(deep.size(), 1u);
  const std::string deep_name = deep.begin()->second;
  char stand_in[PARCAGPU_KERNEL_NAME_MAX + 1];
  parcagpu_name_stand_in(deep_name.c_str(), PARCAGPU_KERNEL_NAME_MAX, stand_in);
  PcProfile p;
  auto ran = [&](uint32_t pid, const std::string &name, uint64_t ns) {
    p.on_kernel(pid, name.data(), name.size(), 0, ns);
  };
  for (uint32_t pid : {7u, 9u}) {
    p.on_cubin(pid, cubin.crc, cubin.bytes.size(), cubin.bytes);
    p.on_gpu_config(pid, 0, 17, 1980000, 132);  // 2^17 cycles: 66198 ns per sample
  }
  PcSample s;
  s.pid = 7;
  s.cubin_crc = cubin.crc;
  s.function = "_Z5k_addPfi";
  s.stalls = {{14, 3}};
  p.on_sample(s);
  ran(7, "_Z5k_addPfi", 5000000);        // sampled: not listed
  ran(7, "_Z9k_unknownPf", 4000000);     // no such function in the cubin
  ran(7, "_Z5k_mulPfi", 20000);          // shorter than one sampling period
  ran(7, "_Z5k_mulPfi", 20000);
  ran(7, stand_in, 3000000);             // a stand-in: named whole
  ran(8, "_Z5k_addPfi", 1000000);        // a process without PC sampling
  ran(9, "_Z7softmaxPfPKfi", 2000000);   // CUPTI did not attribute some of pid 9's samples
  p.on_library_error(9, "pc_sampling",
                     "12 PC samples of kernels CUPTI does not attribute (non-user kernels: ...)");
  const Json j = p.json();
  std::map<std::string, Json> missed;
  for (const Json &m : j["kernels_not_sampled"])
    missed[std::to_string(m["pid"].get<uint32_t>()) + " " + m["function"].get<std::string>()] = m;
  ASSERT_EQ(missed.size(), 5u) << j["kernels_not_sampled"];
  EXPECT_EQ(missed["7 _Z9k_unknownPf"]["reason"], "not_in_cubins");
  EXPECT_EQ(missed["7 _Z5k_mulPfi"]["reason"], "below_rate");
  EXPECT_EQ(missed["7 _Z5k_mulPfi"]["gpu_ns"], 40000);
  EXPECT_EQ(missed["7 _Z5k_mulPfi"]["kernels"], 2);
  EXPECT_EQ(missed["7 " + deep_name]["reason"], "not_in_episodes");
  EXPECT_EQ(missed["8 _Z5k_addPfi"]["reason"], "no_pc_sampling");
  EXPECT_EQ(missed["9 _Z7softmaxPfPKfi"]["reason"], "not_attributed");
  EXPECT_EQ(j["kernels_not_sampled"][0]["function"], "_Z9k_unknownPf") << "most GPU time first";
  const std::string text = test_output::printed([&](FILE *f) { p.print(f, 20); });
  EXPECT_NE(text.find("Kernels with GPU time and no PC samples: 5"), std::string::npos) << text;
  EXPECT_NE(text.find("::deep<1>(float*)  (pid 7)"), std::string::npos) << text;
  EXPECT_NE(text.find("k_unknown(float*)  (pid 7)"), std::string::npos) << text;
  EXPECT_NE(text.find("below the rate"), std::string::npos) << text;
}

// Samples of launches the library did not announce come with correlation ID 0 (issue 28): a
// GPU-only stack, not an error. They are counted apart from the samples under a CPU stack (an
// announced ID) and from those of IDs never announced, and 0 is no launch.
TEST(PcProfile, GpuOnlySamplesApartFromThoseWithAStack) {
  PcProfile p;
  p.on_correlation(7, 100, 211);  // cudaLaunchKernel
  PcSample s;
  s.pid = 7;
  s.function = "_Z5k_mulPfi";
  s.correlation_id = 100;
  s.stalls = {{16, 30}};
  p.on_sample(s);
  s.correlation_id = 0;  // two records of unannounced launches
  s.stalls = {{16, 5}, {14, 4}};
  p.on_sample(s);
  s.pc_offset = 0x80;
  s.stalls = {{14, 1}};
  p.on_sample(s);
  s.correlation_id = 555;  // an ID no cuda_correlation named
  s.stalls = {{14, 2}};
  p.on_sample(s);
  const Json j = p.json();
  EXPECT_EQ(j["samples"], 42);
  EXPECT_EQ(j["samples_with_stack"], 30);
  EXPECT_EQ(j["samples_gpu_only"], 10);
  EXPECT_EQ(j["samples_unannounced"], 2);
  ASSERT_EQ(j["kernels"].size(), 1u);
  const Json &k = j["kernels"][0];
  EXPECT_EQ(k["samples"], 42);
  EXPECT_EQ(k["samples_with_stack"], 30);
  EXPECT_EQ(k["samples_gpu_only"], 10);
  EXPECT_EQ(k["samples_unannounced"], 2);
  EXPECT_EQ(k["launches"], 2);  // 100 and 555; 0 is none
  EXPECT_EQ(k["correlation_ids"], Json({100, 555}));
  EXPECT_EQ(k["by_launch"], Json({{"211", 30}, {"gpu_only", 10}, {"unannounced", 2}}));

  const std::string printed = test_output::printed([&](FILE *out) { p.print(out); });
  EXPECT_NE(printed.find("4 records (5 PC/stall-reason pairs), 1 kernels; 30 with a CPU stack, 10 GPU-only, "
                         "2 unannounced\n"),
            std::string::npos)
      << printed;
  EXPECT_NE(printed.find("42 samples, 100.0% of all: 30 with a CPU stack (2 launches), 10 GPU-only, 2 "
                         "unannounced\n     by launch: cudaLaunchKernel 71.4% GPU-only 23.8% unannounced 4.8%\n"),
            std::string::npos)
      << printed;
}

// PcSampling as the tracer feeds it: its own events (PC records, the stall-reason blob) and the
// tracer's (cuda_correlation, cubin_loaded with the cubin's address in the process, gpu_config).
// The cubin lies in this test's own memory, so the extension reads it from /proc/self's pid.
TEST(PcSampling, DecodesTheTracersAndItsOwnEvents) {
  const std::vector<uint8_t> bytes = mock_cubin();
  ASSERT_GT(bytes.size(), 1000u);
  const uint32_t pid = static_cast<uint32_t>(getpid());
  const uint64_t crc = PcProfile::crc32(bytes.data(), bytes.size());
  PcSampling pcs(false);
  EXPECT_TRUE(pcs.wants(PV_EV_PC_RECORD));
  EXPECT_TRUE(pcs.wants(PV_EV_STALL_REASON_MAP));
  EXPECT_TRUE(pcs.wants(PT_EV_CORRELATION));
  EXPECT_TRUE(pcs.wants(PT_EV_CUBIN_LOADED));
  EXPECT_TRUE(pcs.wants(PT_EV_GPU_CONFIG));
  // Kernel records and the library's errors: which kernels with GPU time got no samples, and why.
  EXPECT_TRUE(pcs.wants(PT_EV_KERNEL));
  EXPECT_TRUE(pcs.wants(PT_EV_ERROR));
  EXPECT_FALSE(pcs.wants(PT_EV_ACTIVITY_BATCH));
  auto feed = [&pcs](auto &e, uint32_t type, size_t size = sizeof(e)) {
    e.h.type = type;
    e.h.pid = static_cast<uint32_t>(getpid());
    pcs.on_event(e.h, &e, size);
  };

  pt_correlation_event corr{};
  corr.correlation_id = 42;
  corr.signed_cbid = 211;  // cudaLaunchKernel
  feed(corr, PT_EV_CORRELATION);
  auto stalls = std::make_unique<pv_stall_map_event>();
  const std::vector<char> blob = stall_blob();
  std::memcpy(stalls->names, blob.data(), sizeof stalls->names);
  feed(*stalls, PV_EV_STALL_REASON_MAP);
  pt_meta_event cubin{};
  cubin.crc = crc;
  cubin.ptr = reinterpret_cast<uint64_t>(bytes.data());
  cubin.size = bytes.size();
  feed(cubin, PT_EV_CUBIN_LOADED);
  pt_gpu_config_event config{};
  config.sampling_factor = 11;
  config.clock_khz = 1980000;
  config.sm_count = 132;
  feed(config, PT_EV_GPU_CONFIG);
  pv_pc_record_event rec{};
  const uint64_t pc_offset = 0x40, stall_count = 2;
  const uint32_t correlation_id = 42;
  std::memcpy(rec.record + 8, &crc, 8);
  std::memcpy(rec.record + 16, &pc_offset, 8);
  std::memcpy(rec.record + 40, &stall_count, 8);
  std::memcpy(rec.record + 56, &correlation_id, 4);
  std::strcpy(rec.function_name, "_Z5k_mulPfi");
  const uint32_t pairs[] = {16, 30, 14, 2, 9, 999};  // the third pair is past stallReasonCount
  std::memcpy(rec.stall, pairs, sizeof pairs);
  feed(rec, PV_EV_PC_RECORD);
  feed(rec, PV_EV_PC_RECORD, sizeof rec - 1);  // cut short: counted, not read
  EXPECT_EQ(pcs.malformed(), 1u);

  Json summary;
  pcs.add_json(summary);
  const Json &pc = summary.at("pc");
  EXPECT_EQ(pc["records"], 1);
  EXPECT_EQ(pc["samples"], 32);
  EXPECT_EQ(pc["malformed_events"], 1);
  ASSERT_EQ(pc["cubins"].size(), 1u);
  EXPECT_EQ(pc["cubins"][0]["read"], true) << pc["cubins"];
  EXPECT_EQ(pc["cubins"][0]["bytes_crc32"], crc);
  EXPECT_EQ(pc["gpu_configs"][0]["sampling_factor"], 11);
  ASSERT_EQ(pc["kernels"].size(), 1u);
  const Json &k = pc["kernels"][0];
  EXPECT_EQ(k["function"], "_Z5k_mulPfi");
  EXPECT_EQ(k["demangled"], "k_mul(float*, int)");
  EXPECT_EQ(k["by_launch"], Json({{"211", 32}}));
  EXPECT_EQ(k["stall_reasons"][0]["name"], "math_pipe_throttle");
  ASSERT_EQ(k["hot_pcs"].size(), 1u);
  CubinLines lines;
  std::string error;
  ASSERT_TRUE(lines.load(bytes.data(), bytes.size(), &error)) << error;
  CubinLines::Line want;
  ASSERT_TRUE(lines.lookup("_Z5k_mulPfi", pc_offset, &want));
  EXPECT_EQ(k["hot_pcs"][0]["file"], want.file) << k["hot_pcs"];
  EXPECT_EQ(k["hot_pcs"][0]["line"], want.line) << k["hot_pcs"];
  EXPECT_GE(want.line, line_of("void k_mul("));
  EXPECT_LE(want.line, line_of("if (i < n) a[i] = v;") + 1);

  const std::string printed = test_output::printed([&](FILE *out) { pcs.print(out); });
  EXPECT_NE(printed.find("1. k_mul(float*, int)  (pid " + std::to_string(pid) + ")"), std::string::npos)
      << printed;
  EXPECT_NE(printed.find("cudaLaunchKernel 100.0%"), std::string::npos) << printed;
  EXPECT_NE(printed.find("math_pipe_throttle"), std::string::npos) << printed;
  EXPECT_NE(printed.find("pc_kernels.cu:"), std::string::npos) << printed;
  EXPECT_NE(printed.find("1 malformed PC events"), std::string::npos) << printed;
}

TEST(PcProfile, ShortReasonDropsTheCommonPrefix) {
  EXPECT_EQ(PcProfile::short_reason("smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
            "long_scoreboard");
  EXPECT_EQ(PcProfile::short_reason("other"), "other");
}

TEST(PcProfile, Crc32IsZlibs) {
  const uint8_t text[] = "123456789";
  EXPECT_EQ(PcProfile::crc32(text, 9), 0xCBF43926u);
}

}  // namespace
}  // namespace parcagpu::trace
