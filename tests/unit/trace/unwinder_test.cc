// Unit tests of the DWARF unwinder (tools/trace/unwinder.h) on a stack captured in this process: the
// registers as getcontext() leaves them and a copy of the stack above them, as the BPF program
// copies them at a probe. The chain of noinline callers must come back, in order.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "symbolizer.h"
#include "unwinder.h"

namespace parcagpu::trace {
namespace {

struct Captured {
  uint64_t regs[kDwarfRegs] = {};
  std::vector<uint8_t> stack;
};

std::vector<MapEntry> read_maps() {
  std::string text;
  if (FILE *f = std::fopen("/proc/self/maps", "re")) {
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    std::fclose(f);
  }
  return parse_proc_maps(text);
}

// The registers in DWARF order (rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip) and `bytes` of
// stack from rsp: what copy_stack() in parcagpu_trace.bpf.c sends.
__attribute__((noinline)) void capture(Captured *c, const size_t wanted) {
  ucontext_t uc;
  getcontext(&uc);
  size_t bytes = wanted;
  const greg_t *g = uc.uc_mcontext.gregs;
  const int order[kDwarfRegs] = {REG_RAX, REG_RDX, REG_RCX, REG_RBX, REG_RSI, REG_RDI, REG_RBP, REG_RSP, REG_R8,
                                 REG_R9,  REG_R10, REG_R11, REG_R12, REG_R13, REG_R14, REG_R15, REG_RIP};
  for (int i = 0; i < kDwarfRegs; ++i) c->regs[i] = static_cast<uint64_t>(g[order[i]]);
  // As the BPF program, no further than the stack goes: main's frame may be near its top.
  const uint64_t sp = c->regs[7];
  const std::vector<MapEntry> maps = read_maps();
  for (const MapEntry &m : maps)
    if (sp >= m.start && sp < m.end && m.end - sp < bytes) bytes = m.end - sp;
  c->stack.resize(bytes);
  std::memcpy(c->stack.data(), reinterpret_cast<const void *>(c->regs[7]), bytes);
  asm volatile("" ::: "memory");
}

volatile int g_after;
__attribute__((noinline)) void unwind_test_inner(Captured *c, size_t bytes) {
  capture(c, bytes);
  g_after = g_after + 1;  // no tail call: this frame stays
}
__attribute__((noinline)) void unwind_test_outer(Captured *c, size_t bytes) {
  unwind_test_inner(c, bytes);
  g_after = g_after + 1;
}

std::vector<std::string> names(Symbolizer &sym, uint32_t pid, const std::vector<uint64_t> &pcs) {
  std::vector<std::string> out;
  for (const Frame &f : sym.symbolize_stack(pid, pcs.data(), pcs.size()))
    if (!f.inlined) out.push_back(f.name());
  return out;
}

size_t index_of(const std::vector<std::string> &v, const std::string &s) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].find(s) != std::string::npos) return i;
  return v.size();
}

TEST(UnwinderTest, UnwindsACapturedStackThroughItsCallers) {
  Captured c;
  unwind_test_outer(&c, 8192);
  const uint32_t pid = static_cast<uint32_t>(getpid()), tid = static_cast<uint32_t>(syscall(SYS_gettid));
  Symbolizer sym;
  DwarfUnwinder unwinder;
  const UnwindResult r = unwinder.unwind(pid, tid, sym.maps(pid), {c.regs, c.stack.data(), c.stack.size()}, 127);
  ASSERT_GE(r.pcs.size(), 3u);
  EXPECT_EQ(r.pcs[0], c.regs[16]);
  const std::vector<std::string> n = names(sym, pid, r.pcs);
  std::string all;
  for (const std::string &s : n) all += s + ";";
  const size_t capture_at = index_of(n, "capture"), inner = index_of(n, "unwind_test_inner"),
               outer = index_of(n, "unwind_test_outer"), body = index_of(n, "UnwindsACapturedStack");
  ASSERT_LT(body, n.size()) << all;
  EXPECT_EQ(capture_at, 0u) << all;
  EXPECT_EQ(inner, capture_at + 1) << all;
  EXPECT_EQ(outer, inner + 1) << all;
  EXPECT_EQ(body, outer + 1) << all;
  EXPECT_NE(index_of(n, "main"), n.size()) << all;  // on to main: the copy holds every frame
}

TEST(UnwinderTest, NoRegistersNoFrames) {
  Symbolizer sym;
  DwarfUnwinder unwinder;
  const uint32_t pid = static_cast<uint32_t>(getpid());
  EXPECT_TRUE(unwinder.unwind(pid, pid, sym.maps(pid), {}, 127).pcs.empty());
}

// A return address that points at no code (a heap address) ends the walk, counted, unprinted.
TEST(UnwinderTest, AnAddressInNoModuleEndsTheWalk) {
  Captured c;
  unwind_test_outer(&c, 8192);
  const uint32_t pid = static_cast<uint32_t>(getpid()), tid = static_cast<uint32_t>(syscall(SYS_gettid));
  std::vector<uint8_t> heap(64);
  c.regs[16] = reinterpret_cast<uint64_t>(heap.data());  // the probe "fired" in the heap
  Symbolizer sym;
  DwarfUnwinder unwinder;
  const UnwindResult r = unwinder.unwind(pid, tid, sym.maps(pid), {c.regs, c.stack.data(), c.stack.size()}, 127);
  EXPECT_TRUE(r.pcs.empty());
  EXPECT_TRUE(r.ended_outside_code);
}

}  // namespace
}  // namespace parcagpu::trace
