// The agent's loader rules (agent_notes.h): which notes it attaches, and how it reads argument
// specs.
#include "agent_notes.h"

#include <asm/ptrace.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace parcagpu::agent {
namespace {

SdtNote note(const std::string &name, uint64_t pc, const std::string &provider = "parcagpu") {
  SdtNote n;
  n.provider = provider;
  n.name = name;
  n.args = "8@%rdi";
  n.pc = n.file_offset = pc;
  return n;
}

std::vector<std::string> names(const AgentChoice &c) {
  std::vector<std::string> v;
  for (const auto &p : c.attach) v.push_back(p.note.name);
  return v;
}

TEST(AgentChoice, LastNoteOfEachNameWins) {
  const AgentChoice c =
      choose_agent_probes({note("cuda_correlation", 0x10), note("activity_batch", 0x20),
                           note("activity_batch", 0x30), note("cuda_correlation", 0x5)});
  ASSERT_TRUE(c.error.empty()) << c.error;
  ASSERT_EQ(c.attach.size(), 2u);
  EXPECT_EQ(c.attach[0].probe, AC_PROBE_CUDA_CORRELATION);
  EXPECT_EQ(c.attach[0].note.pc, 0x5u);
  EXPECT_EQ(c.attach[1].probe, AC_PROBE_ACTIVITY_BATCH);
  EXPECT_EQ(c.attach[1].note.pc, 0x30u);
}

TEST(AgentChoice, OnlyTheNamesTheAgentKnows) {
  std::vector<SdtNote> notes;
  for (const char *n : {"cuda_correlation", "kernel_executed", "activity_batch", "pc_sample_batch",
                        "stall_reason_map", "cubin_loaded", "cubin_unloaded", "gpu_config", "error",
                        "graph_capture_launch", "graph_node_clone"})
    notes.push_back(note(n, notes.size() + 1));
  notes.push_back(note("cuda_correlation", 0x99, "otherprovider"));
  const AgentChoice c = choose_agent_probes(notes);
  ASSERT_TRUE(c.error.empty());
  EXPECT_EQ(names(c), (std::vector<std::string>{"cuda_correlation", "activity_batch",
                                                "cubin_loaded", "pc_sample_batch",
                                                "stall_reason_map", "error", "gpu_config"}));
  EXPECT_EQ(c.attach[0].note.pc, 1u);  // not the other provider's
  EXPECT_TRUE(c.has_kernel_fallback);
  EXPECT_EQ(c.kernel_fallback.note.name, "kernel_executed");
  std::vector<std::string> ignored = c.ignored;
  std::sort(ignored.begin(), ignored.end());
  EXPECT_EQ(ignored, (std::vector<std::string>{"cubin_unloaded", "graph_capture_launch",
                                               "graph_node_clone", "kernel_executed"}));
}

TEST(AgentChoice, KernelExecutedOnlyWithoutActivityBatch) {
  const AgentChoice c =
      choose_agent_probes({note("kernel_executed", 1), note("cuda_correlation", 2)});
  ASSERT_TRUE(c.error.empty());
  EXPECT_EQ(names(c), (std::vector<std::string>{"cuda_correlation", "kernel_executed"}));
  EXPECT_FALSE(c.has_kernel_fallback);
  EXPECT_TRUE(c.ignored.empty());
}

TEST(AgentChoice, RefusesWithoutCorrelationOrKernelSource) {
  EXPECT_FALSE(choose_agent_probes({note("activity_batch", 1)}).error.empty());
  EXPECT_FALSE(
      choose_agent_probes({note("cuda_correlation", 1), note("gpu_config", 2)}).error.empty());
  EXPECT_TRUE(
      choose_agent_probes({note("cuda_correlation", 1), note("gpu_config", 2)}).attach.empty());
  EXPECT_FALSE(choose_agent_probes({}).error.empty());
}

uint16_t reg(size_t off) { return static_cast<uint16_t>(off); }

TEST(ArgSpecs, RegistersMemoryAndConstants) {
  ac_probe_spec s;
  std::string err;
  ASSERT_TRUE(
      parse_arg_specs("4@%esi -4@-20(%rbp) 8@(%rax) 4@$128 -4@-9 8@%r12 1@%sil 2@%r9w", &s, &err))
      << err;
  ASSERT_EQ(s.nargs, 8u);
  EXPECT_EQ(s.args[0].type, AC_ARG_REG);
  EXPECT_EQ(s.args[0].reg_off, reg(offsetof(pt_regs, rsi)));
  EXPECT_EQ(s.args[0].bitshift, 32);
  EXPECT_FALSE(s.args[0].is_signed);
  EXPECT_EQ(s.args[1].type, AC_ARG_REG_DEREF);
  EXPECT_EQ(s.args[1].reg_off, reg(offsetof(pt_regs, rbp)));
  EXPECT_EQ(static_cast<int64_t>(s.args[1].val_off), -20);
  EXPECT_TRUE(s.args[1].is_signed);
  EXPECT_EQ(s.args[2].type, AC_ARG_REG_DEREF);
  EXPECT_EQ(s.args[2].val_off, 0u);
  EXPECT_EQ(s.args[2].bitshift, 0);
  EXPECT_EQ(s.args[3].type, AC_ARG_CONST);
  EXPECT_EQ(s.args[3].val_off, 128u);
  EXPECT_EQ(s.args[4].type, AC_ARG_CONST);  // bare constant
  EXPECT_EQ(static_cast<int64_t>(s.args[4].val_off), -9);
  EXPECT_EQ(s.args[5].reg_off, reg(offsetof(pt_regs, r12)));
  EXPECT_EQ(s.args[6].reg_off, reg(offsetof(pt_regs, rsi)));
  EXPECT_EQ(s.args[6].bitshift, 56);
  EXPECT_EQ(s.args[7].reg_off, reg(offsetof(pt_regs, r9)));
  EXPECT_EQ(s.args[7].bitshift, 48);
}

TEST(ArgSpecs, EmptyIsNoArguments) {
  ac_probe_spec s;
  std::string err;
  ASSERT_TRUE(parse_arg_specs("", &s, &err));
  EXPECT_EQ(s.nargs, 0u);
}

TEST(ArgSpecs, WhatTheAgentCannotReadFailsWhole) {
  // Segment-relative (TLS), indexed, symbolic and high-byte operands are beyond the agent's
  // parser: it attaches such a probe without a spec, and every argument reads as 0.
  for (const char *bad : {"8@%fs:0x28", "8@8(%rax,%rbx,8)", "4@counter(%rip)", "1@%ah", "4@%xmm0",
                          "16@%rax", "8@%rdi 8@garbage(", "4@%eax 4@%foo"}) {
    ac_probe_spec s;
    s.nargs = 99;
    std::string err;
    EXPECT_FALSE(parse_arg_specs(bad, &s, &err)) << bad;
    EXPECT_EQ(s.nargs, 0u) << bad;
    EXPECT_FALSE(err.empty()) << bad;
  }
  ac_probe_spec s;
  std::string err;
  EXPECT_FALSE(
      parse_arg_specs("8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax 8@%rax "
                      "8@%rax 8@%rax 8@%rax 8@%rax",
                      &s, &err));  // 13 > 12
}

}  // namespace
}  // namespace parcagpu::agent
