// Unit tests of parcagpu-trace's stacks and capture-site attribution (no BPF):
// tools/trace/capture_sites.h, tools/trace/stacks.h, tools/trace/symbolizer.h.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "capture_sites.h"
#include "report.h"
#include "stacks.h"
#include "symbolizer.h"

extern "C" __attribute__((noinline, used)) int parcagpu_capture_sites_test_marker(int x) {
  asm volatile("" : "+r"(x));
  return x + 1;
}

namespace parcagpu::trace {
namespace {

Frame frame(const char *function, const char *module, bool inlined = false) {
  Frame f;
  f.function = function;
  f.module = module;
  f.path = std::string("/opt/") + module;
  f.offset = 0x10;
  f.inlined = inlined;
  return f;
}

// The stack of a launch captured in `capture_phase`, as a dynamic libcudart program shows it.
std::vector<Frame> captured_stack() {
  return {frame("parcagpu::LaunchCallbacks::on_launch()", "libparcagpu.so"),
          frame("", "libcupti.so.13"),
          frame("cuLaunchKernel", "libcuda.so.1"),
          frame("cudaLaunchKernel", "libcudart.so.13"),
          frame("__device_stub__Z5k_addPfi(float*, int)", "app"),
          frame("k_add(float*, int)", "app"),
          frame("capture_phase(CUstream_st*)", "app"),
          frame("main", "app")};
}

// What StackResolver does with a stack: mechanism frames dropped, interned.
uint32_t intern(StackTable &t, std::vector<Frame> frames) {
  std::erase_if(frames, [](const Frame &f) { return is_mechanism_frame(f, {}); });
  return t.intern(std::move(frames));
}

struct Fixture {
  StackTable stacks;
  NameTable names;
  CaptureSites cs{stacks, names};
};

TEST(CaptureSitesTest, CloneChainLeadsToTheCaptureSite) {
  Fixture x;
  const uint32_t st = intern(x.stacks, captured_stack());
  x.cs.on_capture(10, 1, 211, "_Z5k_addPfi", 7, 100, st);
  x.cs.on_clone(10, 100, 200, 8);  // cudaGraphClone of the captured graph
  x.cs.on_clone(10, 200, 300, 9);  // that clone instantiated
  const CaptureSites::Site *s = x.cs.on_graph_kernel(10, 300, x.names.id("_Z5k_addPfi"), 500);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->launch_name, "_Z5k_addPfi");
  EXPECT_EQ(s->signed_cbid, 211);
  EXPECT_EQ(s->graph_id, 7u);
  EXPECT_EQ(s->stack_id, st);
  const std::vector<Frame> &frames = x.stacks.frames(st);
  // Mechanism frames (libparcagpu, libcupti, libcuda) are dropped, libcudart is kept.
  ASSERT_EQ(frames.size(), 5u);
  EXPECT_EQ(frames[0].function, "cudaLaunchKernel");
  // "captured at": past the runtime, the device stub and the kernel's host stub.
  EXPECT_EQ(s->captured_at, 3);
  EXPECT_EQ(x.cs.captured_at_function(*s), "capture_phase");
  EXPECT_EQ(x.cs.resolve(10, 200), s);
  EXPECT_EQ(x.cs.resolve(10, 100), s);  // the captured node itself
}

TEST(CaptureSitesTest, KernelOfAClonedNodeIsAttributed) {
  Fixture x;
  const uint32_t st = intern(x.stacks, captured_stack());
  x.cs.on_capture(10, 1, 211, "_Z5k_addPfi", 7, 100, st);
  x.cs.on_capture(10, 2, 211, "_Z5k_mulPfi", 7, 101, st);
  x.cs.on_clone(10, 100, 500, 9);
  x.cs.on_clone(10, 101, 501, 9);
  for (int replay = 0; replay < 4; ++replay) {
    EXPECT_NE(x.cs.on_graph_kernel(10, 500, x.names.id("_Z5k_addPfi"), 100), nullptr);
    EXPECT_NE(x.cs.on_graph_kernel(10, 501, x.names.id("_Z5k_mulPfi"), 50), nullptr);
  }
  Summary sum;
  x.cs.fill(&sum, true);
  EXPECT_EQ(sum.graph_capture_launches, 2u);
  EXPECT_EQ(sum.graph_node_clones, 2u);
  EXPECT_EQ(sum.graph_kernels_with_capture_site, 8u);
  EXPECT_EQ(sum.graph_kernels_without_capture_site, 0u);
  ASSERT_EQ(sum.capture_sites.size(), 2u);  // per (kernel, stack): the stacks are the same
  EXPECT_EQ(sum.capture_sites[0].kernel, "_Z5k_addPfi");  // most GPU time first
  EXPECT_EQ(sum.capture_sites[0].kernel_demangled, "k_add(float*, int)");
  EXPECT_EQ(sum.capture_sites[0].records, 4u);
  EXPECT_EQ(sum.capture_sites[0].total_ns, 400u);
  EXPECT_EQ(sum.capture_sites[0].captured_at, "capture_phase");
  EXPECT_EQ(sum.capture_sites[0].captured_at_index, 3);
  EXPECT_EQ(sum.capture_sites[0].stack.front(), "cudaLaunchKernel+0x10 (libcudart.so.13)");  // no line: the offset
  EXPECT_EQ(sum.capture_sites[1].kernel, "_Z5k_mulPfi");
  EXPECT_EQ(sum.capture_sites[1].total_ns, 200u);
}

TEST(CaptureSitesTest, UnknownNodesAreCountedNotErrors) {
  Fixture x;
  x.cs.on_capture(10, 1, 211, "_Z5k_addPfi", 7, 100, intern(x.stacks, captured_stack()));
  x.cs.on_clone(10, 100, 500, 9);
  x.cs.on_clone(10, 600, 601, 9);  // an explicitly built graph: its original was never captured
  EXPECT_EQ(x.cs.on_graph_kernel(10, 601, x.names.id("k_built"), 1), nullptr);
  EXPECT_EQ(x.cs.on_graph_kernel(10, 999, x.names.id("k_cond_body"), 1), nullptr);  // no clone
  EXPECT_EQ(x.cs.on_graph_kernel(11, 500, x.names.id("_Z5k_addPfi"), 1), nullptr);  // other pid
  EXPECT_NE(x.cs.on_graph_kernel(10, 500, x.names.id("_Z5k_addPfi"), 1), nullptr);
  Summary sum;
  x.cs.fill(&sum, false);
  EXPECT_EQ(sum.graph_kernels_with_capture_site, 1u);
  EXPECT_EQ(sum.graph_kernels_without_capture_site, 3u);
  EXPECT_FALSE(sum.capture_sites_enabled);
  EXPECT_TRUE(sum.capture_sites.empty());
}

TEST(CaptureSitesTest, CloneLoopsEnd) {
  Fixture x;
  x.cs.on_clone(10, 1, 2, 9);
  x.cs.on_clone(10, 2, 1, 9);
  x.cs.on_clone(10, 3, 3, 9);
  EXPECT_EQ(x.cs.on_graph_kernel(10, 1, x.names.id("k"), 1), nullptr);
  EXPECT_EQ(x.cs.on_graph_kernel(10, 3, x.names.id("k"), 1), nullptr);
}

TEST(CaptureSitesTest, CaptureWithoutStack) {
  Fixture x;
  x.cs.on_capture(10, 1, -307, "_Z5k_addPfi", 7, 100, StackTable::kNone);
  x.cs.on_clone(10, 100, 500, 9);
  const CaptureSites::Site *s = x.cs.on_graph_kernel(10, 500, x.names.id(""), 10);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->stack_id, StackTable::kNone);
  Summary sum;
  x.cs.fill(&sum, true);
  ASSERT_EQ(sum.capture_sites.size(), 1u);
  EXPECT_EQ(sum.capture_sites[0].kernel, "_Z5k_addPfi");  // the launch name when the record has none
  EXPECT_EQ(sum.capture_sites[0].captured_at, "");
  EXPECT_TRUE(sum.capture_sites[0].stack.empty());
}

// Bounded by count (an exec may be replayed for hours, so not by age): what is used survives,
// what is not is forgotten, counted; a process that is gone leaves nothing behind.
TEST(CaptureSitesTest, BoundedAndForgetsProcesses) {
  StackTable stacks;
  NameTable names;
  CaptureSites cs(stacks, names, /*max_entries=*/100);
  cs.on_capture(10, 1, 211, "k", 7, 1, StackTable::kNone);
  cs.on_clone(10, 1, 2, 9);
  const uint32_t k = names.id("k");
  size_t peak = 0;
  for (uint64_t n = 1000; n < 11000; ++n) {
    cs.on_clone(10, n, n + 100000, 9);  // instantiations nothing runs
    ASSERT_NE(cs.on_graph_kernel(10, 2, k, 1), nullptr) << n;  // the replayed exec
    peak = std::max(peak, cs.entries());
  }
  EXPECT_LE(peak, 100u);
  Summary sum;
  cs.fill(&sum, false);
  EXPECT_GT(sum.capture_entries_forgotten, 9000u);
  cs.forget(10);
  EXPECT_EQ(cs.entries(), 0u);
  EXPECT_EQ(cs.on_graph_kernel(10, 2, k, 1), nullptr);
  sum = Summary{};
  cs.fill(&sum, false);
  EXPECT_EQ(sum.capture_processes_forgotten, 1u);
}

TEST(CaptureSitesTest, MechanismAndRuntimeFrames) {
  EXPECT_TRUE(is_mechanism_frame(frame("f", "libparcagpu.so"), {}));
  EXPECT_TRUE(is_mechanism_frame(frame("f", "libcupti.so.2025.1.0"), {}));
  EXPECT_TRUE(is_mechanism_frame(frame("f", "libcuda.so.580.65.06"), {}));
  EXPECT_FALSE(is_mechanism_frame(frame("f", "libcudart.so.13"), {}));
  EXPECT_TRUE(is_mechanism_frame(frame("f", "renamed.so"), {"/x", "/opt/renamed.so"}));
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
  Fixture x;
  x.cs.on_capture(10, 1, 211, "_Z5k_addPfi", 7, 100, intern(x.stacks, captured_stack()));
  x.cs.on_clone(10, 100, 500, 9);
  x.cs.on_graph_kernel(10, 500, x.names.id("_Z5k_addPfi"), 100);
  Summary sum;
  x.cs.fill(&sum, false);
  Json j = summary_json(sum);
  for (const char *key : {"graph_capture_launches", "graph_node_clones",
                          "graph_kernels_with_capture_site", "graph_kernels_without_capture_site"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_FALSE(j.contains("capture_sites"));  // only with --capture-sites
  sum = Summary{};
  x.cs.fill(&sum, true);
  j = summary_json(sum);
  ASSERT_EQ(j["capture_sites"].size(), 1u);
  EXPECT_EQ(json_line(j["capture_sites"][0]),
            "{\"kernel\":\"_Z5k_addPfi\",\"demangled\":\"k_add(float*, int)\",\"records\":1,"
            "\"total_ns\":100,\"captured_at\":\"capture_phase\",\"stack\":[\"cudaLaunchKernel+0x10 "
            "(libcudart.so.13)\",\"__device_stub__Z5k_addPfi+0x10 (app)\",\"k_add+0x10 (app)\","
            "\"capture_phase+0x10 (app)\",\"main+0x10 (app)\"]}");
}

// ---- names and stacks ----

TEST(StacksTest, ShortFunctionNames) {
  EXPECT_EQ(short_function_name("mockapp::(anonymous namespace)::launch_thread(mockapp::Options const&, int)"),
            "mockapp::(anonymous namespace)::launch_thread");
  EXPECT_EQ(short_function_name("void std::__invoke_impl<void, void (*)(int), int>(std::__invoke_other, void (*&&)(int), int&&)"),
            "std::__invoke_impl<void, void (*)(int), int>");
  EXPECT_EQ(short_function_name("main::{lambda(int)#1}::operator()(int) const"),
            "main::{lambda(int)#1}::operator()");
  EXPECT_EQ(short_function_name("bool ns::operator<<(ns::A const&, int)"), "ns::operator<<");
  EXPECT_EQ(short_function_name("operator new(unsigned long)"), "operator new");
  EXPECT_EQ(short_function_name("main"), "main");
  EXPECT_EQ(short_function_name("foo(int) [clone .isra.0]"), "foo");
  EXPECT_EQ(demangle("_Z5k_addPfi"), "k_add(float*, int)");
  EXPECT_EQ(demangle("k_caf\xc3\xa9"), "k_caf\xc3\xa9");  // not mangled: unchanged
  NameTable names;
  const uint32_t id = names.id("_ZN2ns6kernelILi4EEEvPf");
  EXPECT_EQ(names.id("_ZN2ns6kernelILi4EEEvPf"), id);
  EXPECT_EQ(names.demangled(id), "void ns::kernel<4>(float*)");
  EXPECT_EQ(names.display(id), "ns::kernel<4>");
}

TEST(StacksTest, InternsAndBoundsStacks) {
  StackTable t(/*max_stacks=*/StackTable::kFirstReal + 2);
  const uint32_t a = t.intern({frame("a(int)", "app"), frame("main", "app")});
  EXPECT_GE(a, StackTable::kFirstReal);
  EXPECT_EQ(t.intern({frame("a(int)", "app"), frame("main", "app")}), a);
  Frame at_line = frame("a(int)", "app");
  at_line.file = "/src/a.cc";
  at_line.line = 12;
  const uint32_t b = t.intern({at_line, frame("main", "app")});  // another call site
  EXPECT_NE(b, a);
  EXPECT_EQ(t.intern({frame("c", "app")}), StackTable::kOverflow);
  EXPECT_EQ(t.overflowed(), 1u);
  EXPECT_EQ(t.intern({}), StackTable::kNone);
  EXPECT_EQ(at_line.text(), "a (a.cc:12)");
  at_line.inlined = true;
  EXPECT_EQ(at_line.text(), "a (a.cc:12) [inlined]");
  EXPECT_EQ(frame("", "libx.so").name(), "libx.so+0x10");
}

// ---- symbolizing (libdwfl on this test binary: built with -g) ----

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
  EXPECT_EQ(live_path(maps[3].path), "/tmp/lib x.so");
}

// The address of the instruction that follows, in code the compiler must inline here.
static inline __attribute__((always_inline)) uint64_t inlined_here() {
  uint64_t pc;
  asm volatile("1: lea 1b(%%rip), %0" : "=r"(pc));  // SYMBOLIZER_TEST_INLINED_LINE
  return pc;
}

extern "C" __attribute__((noinline, used)) uint64_t parcagpu_symbolizer_test_outer() {
  const uint64_t pc = inlined_here();  // SYMBOLIZER_TEST_CALL_LINE
  asm volatile("" ::: "memory");
  return pc;
}

extern "C" __attribute__((noinline, used)) uint64_t parcagpu_symbolizer_test_lambda_outer() {
  auto here = []() __attribute__((always_inline)) {
    uint64_t pc;
    asm volatile("1: lea 1b(%%rip), %0" : "=r"(pc));
    return pc;
  };
  const uint64_t pc = here();
  asm volatile("" ::: "memory");
  return pc;
}

int line_of(const char *marker) {
  FILE *f = std::fopen(__FILE__, "r");
  if (!f) return -1;
  char buf[512];
  int n = 0, found = -1;
  while (std::fgets(buf, sizeof buf, f)) {
    ++n;
    if (std::strstr(buf, marker) && !std::strstr(buf, "line_of(")) found = n;
  }
  std::fclose(f);
  return found;
}

TEST(SymbolizerTest, FunctionsInlinesAndLinesOfThisProcess) {
  Symbolizer sym;
  const uint32_t self = static_cast<uint32_t>(getpid());
  const auto marker = reinterpret_cast<uint64_t>(&parcagpu_capture_sites_test_marker);
  std::vector<Frame> f = sym.symbolize(self, marker + 2, false);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].function, "parcagpu_capture_sites_test_marker");
  EXPECT_EQ(f[0].offset, 2u);
  EXPECT_FALSE(f[0].module.empty());
  EXPECT_EQ(f[0].file.substr(f[0].file.rfind('/') + 1), "capture_sites_test.cc");
  // A return address at the very end of the function still belongs to it (looked up at - 1).
  f = sym.symbolize(self, marker + 1, true);
  EXPECT_EQ(f.back().function, "parcagpu_capture_sites_test_marker");
  // A C++ function, demangled.
  f = sym.symbolize(self, reinterpret_cast<uint64_t>(&captured_at_index), false);
  EXPECT_EQ(f.back().function.rfind("parcagpu::trace::captured_at_index(", 0), 0u) << f.back().function;
  EXPECT_EQ(f.back().name(), "parcagpu::trace::captured_at_index");
  EXPECT_EQ(sym.files_loaded(), 1u);  // one file, cached
  // Inlined code: the inlined function first (at its own line), then its caller at the call.
  f = sym.symbolize(self, parcagpu_symbolizer_test_outer(), false);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_TRUE(f[0].inlined);
  EXPECT_EQ(f[0].name(), "parcagpu::trace::(anonymous namespace)::inlined_here");
  EXPECT_EQ(f[0].line, line_of("SYMBOLIZER_TEST_INLINED_LINE"));
  EXPECT_FALSE(f[1].inlined);
  EXPECT_EQ(f[1].function, "parcagpu_symbolizer_test_outer");
  EXPECT_EQ(f[1].line, line_of("SYMBOLIZER_TEST_CALL_LINE"));
  EXPECT_EQ(f[0].text(), "parcagpu::trace::(anonymous namespace)::inlined_here (capture_sites_test.cc:" +
                             std::to_string(f[0].line) + ") [inlined]");
  // An inlined lambda: its closure type has no name.
  f = sym.symbolize(self, parcagpu_symbolizer_test_lambda_outer(), false);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].name(), "{lambda}::operator()");
  EXPECT_EQ(f[1].function, "parcagpu_symbolizer_test_lambda_outer");
  // Unmapped addresses say so.
  f = sym.symbolize(self, 8, false);
  EXPECT_EQ(f[0].module, "[unmapped]");
}

}  // namespace
}  // namespace parcagpu::trace
