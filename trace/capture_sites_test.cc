// Unit tests of parcagpu-trace's capture-site attribution (no BPF): trace/capture_sites.h,
// trace/stack_unwind.h, trace/symbolizer.h, and their part of trace/report.h.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <string>

#include "capture_sites.h"
#include "report.h"
#include "stack_unwind.h"
#include "symbolizer.h"

extern "C" __attribute__((noinline, used)) int parcagpu_capture_sites_test_marker(int x) {
  asm volatile("" : "+r"(x));
  return x + 1;
}

namespace parcagpu::trace {
namespace {

Frame frame(const char *function, const char *module, bool scanned = false) {
  Frame f;
  f.function = function;
  f.module = module;
  f.path = std::string("/opt/") + module;
  f.offset = 0x10;
  f.scanned = scanned;
  return f;
}

// The stack of a launch captured in `capture_phase`, as a dynamic libcudart program shows it.
std::vector<Frame> captured_stack() {
  return {frame("parcagpu::LaunchCallbacks::on_launch()", "libparcagpu.so"),
          frame("", "libcupti.so.13", true),
          frame("cuLaunchKernel", "libcuda.so.1", true),
          frame("cudaLaunchKernel", "libcudart.so.13", true),
          frame("__device_stub__Z5k_addPfi(float*, int)", "app"),
          frame("k_add(float*, int)", "app"),
          frame("capture_phase(CUstream_st*)", "app"),
          frame("main", "app")};
}

TEST(CaptureSitesTest, CloneChainLeadsToTheCaptureSite) {
  CaptureSites cs;
  cs.on_capture(10, 1, 211, "_Z5k_addPfi", 7, 100, captured_stack());
  cs.on_clone(10, 100, 200, 8);  // cudaGraphClone of the captured graph
  cs.on_clone(10, 200, 300, 9);  // that clone instantiated
  const CaptureSites::Site *s = cs.on_graph_kernel(10, 300, "_Z5k_addPfi", 1000, 1500);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->launch_name, "_Z5k_addPfi");
  EXPECT_EQ(s->signed_cbid, 211);
  EXPECT_EQ(s->graph_id, 7u);
  ASSERT_NE(s->stack_id, 0u);
  const CaptureSites::Stack &st = cs.stack(s->stack_id);
  // Mechanism frames (libparcagpu, libcupti, libcuda) are dropped, libcudart is kept.
  ASSERT_EQ(st.frames.size(), 5u);
  EXPECT_EQ(st.frames[0].function, "cudaLaunchKernel");
  // "captured at": past the runtime, the device stub and the kernel's host stub.
  EXPECT_EQ(st.captured_at, 3);
  EXPECT_EQ(st.captured_at_function(), "capture_phase(CUstream_st*)");
  EXPECT_EQ(cs.resolve(10, 200), s);
  EXPECT_EQ(cs.resolve(10, 100), s);  // the captured node itself
}

TEST(CaptureSitesTest, KernelOfAClonedNodeIsAttributed) {
  CaptureSites cs;
  cs.on_capture(10, 1, 211, "_Z5k_addPfi", 7, 100, captured_stack());
  cs.on_capture(10, 2, 211, "_Z5k_mulPfi", 7, 101, captured_stack());
  cs.on_clone(10, 100, 500, 9);
  cs.on_clone(10, 101, 501, 9);
  for (int replay = 0; replay < 4; ++replay) {
    EXPECT_NE(cs.on_graph_kernel(10, 500, "_Z5k_addPfi", 0, 100), nullptr);
    EXPECT_NE(cs.on_graph_kernel(10, 501, "_Z5k_mulPfi", 0, 50), nullptr);
  }
  Summary sum;
  cs.fill(&sum, true);
  EXPECT_EQ(sum.graph_capture_launches, 2u);
  EXPECT_EQ(sum.graph_node_clones, 2u);
  EXPECT_EQ(sum.graph_kernels_with_capture_site, 8u);
  EXPECT_EQ(sum.graph_kernels_without_capture_site, 0u);
  ASSERT_EQ(sum.capture_sites.size(), 2u);  // per (kernel, stack): the stacks are the same
  EXPECT_EQ(sum.capture_sites[0].kernel, "_Z5k_addPfi");  // most GPU time first
  EXPECT_EQ(sum.capture_sites[0].records, 4u);
  EXPECT_EQ(sum.capture_sites[0].total_ns, 400u);
  EXPECT_EQ(sum.capture_sites[0].captured_at, "capture_phase(CUstream_st*)");
  EXPECT_EQ(sum.capture_sites[0].captured_at_index, 3);
  EXPECT_EQ(sum.capture_sites[0].stack.front(), "?cudaLaunchKernel+0x10 (libcudart.so.13)");
  EXPECT_EQ(sum.capture_sites[1].kernel, "_Z5k_mulPfi");
  EXPECT_EQ(sum.capture_sites[1].total_ns, 200u);
}

TEST(CaptureSitesTest, UnknownNodesAreCountedNotErrors) {
  CaptureSites cs;
  cs.on_capture(10, 1, 211, "_Z5k_addPfi", 7, 100, captured_stack());
  cs.on_clone(10, 100, 500, 9);
  cs.on_clone(10, 600, 601, 9);  // an explicitly built graph: its original was never captured
  EXPECT_EQ(cs.on_graph_kernel(10, 601, "k_built", 0, 1), nullptr);
  EXPECT_EQ(cs.on_graph_kernel(10, 999, "k_cond_body", 0, 1), nullptr);  // no clone known
  EXPECT_EQ(cs.on_graph_kernel(11, 500, "_Z5k_addPfi", 0, 1), nullptr);  // other process
  EXPECT_NE(cs.on_graph_kernel(10, 500, "_Z5k_addPfi", 0, 1), nullptr);
  Summary sum;
  cs.fill(&sum, false);
  EXPECT_EQ(sum.graph_kernels_with_capture_site, 1u);
  EXPECT_EQ(sum.graph_kernels_without_capture_site, 3u);
  EXPECT_FALSE(sum.capture_sites_enabled);
  EXPECT_TRUE(sum.capture_sites.empty());
}

TEST(CaptureSitesTest, CloneLoopsEnd) {
  CaptureSites cs;
  cs.on_clone(10, 1, 2, 9);
  cs.on_clone(10, 2, 1, 9);
  cs.on_clone(10, 3, 3, 9);
  EXPECT_EQ(cs.on_graph_kernel(10, 1, "k", 0, 1), nullptr);
  EXPECT_EQ(cs.on_graph_kernel(10, 3, "k", 0, 1), nullptr);
}

TEST(CaptureSitesTest, CaptureWithoutStack) {
  CaptureSites cs;
  cs.on_capture(10, 1, -307, "_Z5k_addPfi", 7, 100);
  cs.on_clone(10, 100, 500, 9);
  const CaptureSites::Site *s = cs.on_graph_kernel(10, 500, "", 0, 10);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->stack_id, 0u);
  Summary sum;
  cs.fill(&sum, true);
  ASSERT_EQ(sum.capture_sites.size(), 1u);
  EXPECT_EQ(sum.capture_sites[0].kernel, "_Z5k_addPfi");  // the launch name when the record has none
  EXPECT_EQ(sum.capture_sites[0].captured_at, "");
  EXPECT_TRUE(sum.capture_sites[0].stack.empty());
}

TEST(CaptureSitesTest, MechanismAndRuntimeFrames) {
  EXPECT_TRUE(is_mechanism_frame(frame("f", "libparcagpu.so"), ""));
  EXPECT_TRUE(is_mechanism_frame(frame("f", "libcupti.so.2025.1.0"), ""));
  EXPECT_TRUE(is_mechanism_frame(frame("f", "libcuda.so.580.65.06"), ""));
  EXPECT_FALSE(is_mechanism_frame(frame("f", "libcudart.so.13"), ""));
  EXPECT_TRUE(is_mechanism_frame(frame("f", "renamed.so"), "/opt/renamed.so"));
  // A statically linked runtime: the template wrapper has a return type in its demangled name.
  std::vector<Frame> st = {frame("cudart::cudaApiLaunchKernel(void const*)", "app"),
                           frame("cudaError cudaLaunchKernel<char>(char const*, dim3)", "app"),
                           frame("", "app"),
                           frame("ns::(anonymous namespace)::capture_phase(int)", "app")};
  EXPECT_EQ(captured_at_index(st, "_Z5k_addPfi"), 3);
  EXPECT_EQ(captured_at_index({frame("cuGraphAddKernelNode", "app")}, ""), 0);  // only runtime
  EXPECT_EQ(captured_at_index({}, ""), -1);
}

TEST(CaptureSitesTest, JsonKeys) {
  CaptureSites cs;
  cs.on_capture(10, 1, 211, "_Z5k_addPfi", 7, 100, captured_stack());
  cs.on_clone(10, 100, 500, 9);
  cs.on_graph_kernel(10, 500, "_Z5k_addPfi", 0, 100);
  Summary sum;
  cs.fill(&sum, false);
  std::string js = summary_json(sum);
  for (const char *key : {"graph_capture_launches", "graph_node_clones",
                          "graph_kernels_with_capture_site", "graph_kernels_without_capture_site"})
    EXPECT_NE(js.find(std::string("\"") + key + "\": "), std::string::npos) << key;
  EXPECT_EQ(js.find("capture_sites\": ["), std::string::npos);  // only with --capture-sites
  cs.fill(&sum, true);
  js = summary_json(sum);
  EXPECT_NE(js.find("\"capture_sites\": [{\"kernel\": \"_Z5k_addPfi\", \"records\": 1, "
                    "\"total_ns\": 100, \"captured_at\": \"capture_phase(CUstream_st*)\", "
                    "\"stack\": [\"?cudaLaunchKernel+0x10 (libcudart.so.13)\", "),
            std::string::npos) << js;
  EXPECT_EQ(js.back(), '}');
}

// ---- unwinding ----

// Code in [0x400000, 0x500000): functions of 0x1000 bytes at 0x401000, 0x402000, ...; `calls`
// are the return addresses that follow a call instruction; fp[i] whether function i keeps rbp.
class FakeCode : public CodeView {
 public:
  std::map<uint64_t, bool> calls;
  std::map<uint64_t, Tri> fp;  // by function start
  bool executable(uint64_t a) override { return a >= 0x400000 && a < 0x500000; }
  bool starts_function(uint64_t a) override { return (a & 0xfff) == 0; }
  size_t code_before(uint64_t a, uint8_t *out, size_t n) override {
    if (!executable(a) || n < 8) return 0;
    std::memset(out, 0x90, 8);  // nops
#if defined(__aarch64__)
    if (calls.count(a)) { const uint32_t bl = 0x94000010u; std::memcpy(out + 4, &bl, 4); }
#else
    if (calls.count(a)) out[3] = 0xe8;  // call rel32
#endif
    return 8;
  }
  Tri keeps_frame_pointer(uint64_t a) override {
    auto it = fp.find(a & ~0xfffull);
    return it == fp.end() ? Tri::Unknown : it->second;
  }
};

struct FakeStack {
  uint8_t mem[0x100] = {};
  RawUserStack s;
  FakeStack() {
    s.sp = 0x7000;
    s.raw_base = 0x7000;
    s.raw = mem;
    s.raw_len = sizeof mem;
  }
  void put(uint64_t addr, uint64_t v) { std::memcpy(mem + (addr - 0x7000), &v, 8); }
};

// ip in F0 (keeps rbp) -> F1, F2 (no frame pointer: rbp untouched) -> F3 (user, keeps rbp) ->
// F4 (keeps rbp) -> F5 (libc, no frame pointer) -> F6. The walk skips F2 and F3's return
// addresses; the scan finds them.
TEST(UnwindTest, ScanFillsWhatTheFramePointerWalkSkips) {
  FakeCode code;
  const uint64_t ip = 0x401050, r1 = 0x402010, r2 = 0x403010, r3 = 0x404010, r4 = 0x405010,
                 r5 = 0x406010, r6 = 0x407010, stale = 0x402055;
  for (uint64_t r : {r1, r2, r3, r4, r5, r6}) code.calls[r] = true;
  code.fp[0x401000] = CodeView::Tri::Yes;
  code.fp[0x402000] = CodeView::Tri::No;
  code.fp[0x403000] = CodeView::Tri::No;
  code.fp[0x404000] = CodeView::Tri::Yes;
  code.fp[0x405000] = CodeView::Tri::Yes;
  code.fp[0x406000] = CodeView::Tri::No;
  FakeStack f;
  f.s.ip = ip;
  f.s.fp = 0x7010;
  f.put(0x7008, r6);     // in F0's frame, below its record: not scanned (F0 keeps rbp)
  f.put(0x7010, 0x7080); // F0's record: F1/F2 left rbp alone, so it links to F4's record
  f.put(0x7018, r1);
  f.put(0x7028, stale);  // points into code, but not after a call
  code.calls[0x403000] = true;
  f.put(0x7040, 0x403000);  // after a call, but a function's first instruction: a pointer
  f.put(0x7030, r2);
  f.put(0x7050, r3);
  f.put(0x7080, 0x70a0);
  f.put(0x7088, r4);
  f.put(0x7090, r2);     // between two trusted records: not scanned
  f.put(0x70a0, 0);
  f.put(0x70a8, r5);
  f.put(0x70c0, r6);
  f.s.fp_frames = {ip, r1, r4, r5};  // what bpf_get_stack's walk gives
  const std::vector<UnwoundFrame> out = unwind(f.s, code);
  std::vector<std::pair<uint64_t, bool>> got;
  for (const auto &u : out) got.emplace_back(u.addr, u.scanned);
  const std::vector<std::pair<uint64_t, bool>> want = {
      {ip, false}, {r1, false}, {r2, true}, {r3, true}, {r4, false}, {r5, false}, {r6, true}};
  EXPECT_EQ(got, want);
  EXPECT_FALSE(out[0].is_return);
  EXPECT_TRUE(out[1].is_return);
}

TEST(UnwindTest, GarbageEndsTheWalkAndTheScanTakesOver) {
  FakeCode code;
  const uint64_t ip = 0x401050, r1 = 0x402010, r2 = 0x403010, r3 = 0x404010;
  for (uint64_t r : {r1, r2, r3}) code.calls[r] = true;
  code.fp[0x401000] = CodeView::Tri::Yes;
  code.fp[0x402000] = CodeView::Tri::Yes;  // claims a frame pointer, but its record is garbage
  FakeStack f;
  f.s.ip = ip;
  f.s.fp = 0x7010;
  f.put(0x7010, 0x7040);
  f.put(0x7018, r1);
  f.put(0x7040, 0x1234);
  f.put(0x7048, 0x99999999);  // not in an executable mapping
  f.put(0x7060, r2);
  f.put(0x7070, r3);
  f.s.fp_frames = {ip, r1, 0x99999999};
  std::vector<uint64_t> got;
  for (const auto &u : unwind(f.s, code)) got.push_back(u.addr);
  EXPECT_EQ(got, (std::vector<uint64_t>{ip, r1, r2, r3}));
}

TEST(UnwindTest, NoFramePointerAtAll) {
  FakeCode code;  // nothing known about any function
  const uint64_t ip = 0x401050, r1 = 0x402010, r2 = 0x403010;
  code.calls[r1] = code.calls[r2] = true;
  FakeStack f;
  f.s.ip = ip;
  f.s.fp = 0xdeadbeef;  // rbp used as a general register
  f.put(0x7000, r1);    // at SP itself
  f.put(0x7020, r2);
  f.s.fp_frames = {ip};
  std::vector<std::pair<uint64_t, bool>> got;
  for (const auto &u : unwind(f.s, code)) got.emplace_back(u.addr, u.scanned);
  EXPECT_EQ(got, (std::vector<std::pair<uint64_t, bool>>{{ip, false}, {r1, true}, {r2, true}}));
}

#if defined(__x86_64__)
TEST(UnwindTest, X86CallInstructions) {
  auto is_call = [](std::initializer_list<uint8_t> b) {
    std::vector<uint8_t> v(8, 0x90);
    v.insert(v.end(), b);
    return ends_with_call(v.data(), v.size()) == CodeView::Tri::Yes;
  };
  EXPECT_TRUE(is_call({0xe8, 1, 2, 3, 4}));                    // call rel32
  EXPECT_TRUE(is_call({0xff, 0xd0}));                          // call *%rax
  EXPECT_TRUE(is_call({0x41, 0xff, 0xd3}));                    // call *%r11
  EXPECT_TRUE(is_call({0xff, 0x15, 1, 2, 3, 4}));              // call *disp32(%rip)
  EXPECT_TRUE(is_call({0xff, 0x50, 0x08}));                    // call *0x8(%rax)
  EXPECT_TRUE(is_call({0xff, 0x54, 0x24, 0x08}));              // call *0x8(%rsp)
  EXPECT_TRUE(is_call({0xff, 0x94, 0xc8, 1, 2, 3, 4}));        // call *disp32(%rax,%rcx,8)
  EXPECT_TRUE(is_call({0xff, 0x10}));                          // call *(%rax)
  EXPECT_FALSE(is_call({0x48, 0x89, 0xe5}));                   // mov %rsp,%rbp
  EXPECT_FALSE(is_call({0xff, 0xe0}));                         // jmp *%rax
  EXPECT_FALSE(is_call({0xc3}));                               // ret
  const uint8_t prologue[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x53};
  EXPECT_TRUE(sets_up_frame_pointer(prologue, sizeof prologue));
  const uint8_t leaf[] = {0xf3, 0x0f, 0x1e, 0xfa, 0x53, 0x48, 0x83, 0xec, 0x10};
  EXPECT_FALSE(sets_up_frame_pointer(leaf, sizeof leaf));
}
#endif

// ---- symbolizing ----

TEST(SymbolizerTest, ParsesProcMaps) {
  const auto maps = parse_proc_maps(
      "55d0c0000000-55d0c0001000 r--p 00000000 fd:01 1234  /usr/bin/app\n"
      "55d0c0001000-55d0c0005000 r-xp 00001000 fd:01 1234  /usr/bin/app\n"
      "7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
      "7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0  [vdso]\n"
      "7f1000000000-7f1000001000 r-xp 00002000 fd:01 99 /tmp/lib x.so (deleted)\n");
  ASSERT_EQ(maps.size(), 5u);
  EXPECT_EQ(maps[1].start, 0x55d0c0001000u);
  EXPECT_EQ(maps[1].offset, 0x1000u);
  EXPECT_TRUE(maps[1].exec);
  EXPECT_FALSE(maps[0].exec);
  EXPECT_EQ(maps[1].path, "/usr/bin/app");
  EXPECT_EQ(maps[1].inode, 1234u);
  EXPECT_EQ(maps[2].path, "");
  EXPECT_EQ(maps[4].path, "[vdso]");  // sorted by address
  EXPECT_EQ(maps[3].path, "/tmp/lib x.so (deleted)");
}

TEST(SymbolizerTest, SymbolizesThisProcess) {
  Symbolizer sym;
  const auto addr = reinterpret_cast<uint64_t>(&parcagpu_capture_sites_test_marker);
  Frame f = sym.symbolize(static_cast<uint32_t>(getpid()), addr + 2, false);
  EXPECT_EQ(f.function, "parcagpu_capture_sites_test_marker");
  EXPECT_EQ(f.offset, 2u);
  EXPECT_FALSE(f.module.empty());
  // A return address at the very end of the function still belongs to it (looked up at - 1).
  f = sym.symbolize(static_cast<uint32_t>(getpid()),
                    reinterpret_cast<uint64_t>(&parcagpu_capture_sites_test_marker) + 1, true);
  EXPECT_EQ(f.function, "parcagpu_capture_sites_test_marker");
  // A C++ function, demangled.
  f = sym.symbolize(static_cast<uint32_t>(getpid()),
                    reinterpret_cast<uint64_t>(&captured_at_index), false);
  EXPECT_EQ(f.function.rfind("parcagpu::trace::captured_at_index(", 0), 0u) << f.function;
  EXPECT_EQ(sym.files_loaded(), 1u);  // cached
  EXPECT_EQ(f.text().rfind("parcagpu::trace::captured_at_index(", 0), 0u);
  f.scanned = true;
  EXPECT_EQ(f.text()[0], '?');
}

}  // namespace
}  // namespace parcagpu::trace
