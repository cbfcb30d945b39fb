// How the production agent's loader finds and chooses probes (docs/probe-abi.md, "How the agent
// attaches"), for the agent-faithful test consumer: no BPF here, unit-tested in
// agent_notes_test.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent_consumer.h"

namespace parcagpu::agent {

// One .note.stapsdt entry, with the addresses the agent computes from it: .stapsdt.base
// adjustment, then virtual address to file offset through the PT_LOAD segments.
struct SdtNote {
  std::string provider, name, args;
  uint64_t pc = 0;                // probe address (link-time, adjusted)
  uint64_t file_offset = 0;       // where the uprobe goes
  uint64_t semaphore = 0;         // semaphore address, 0 = none
  uint64_t semaphore_offset = 0;  // its file offset (the uprobe's reference counter)
};

// Every stapsdt note of `path`, in file order. False with a reason when the file is unreadable.
bool read_sdt_notes(const std::string &path, std::vector<SdtNote> *notes, std::string *error);

struct ChosenProbe {
  ac_probe probe;
  SdtNote note;
};

struct AgentChoice {
  std::vector<ChosenProbe> attach;   // in the agent's order: correlation, kernel source, optional
  bool has_kernel_fallback = false;  // kernel_executed, used if activity_batch cannot be attached
  ChosenProbe kernel_fallback;
  std::vector<std::string> ignored;  // parcagpu probe names the agent does not attach
  std::string error;                 // non-empty: the agent would not attach to this file at all
};

// The agent's choice among the notes: provider "parcagpu" only; per name the LAST note;
// cuda_correlation required; activity_batch, else kernel_executed, required; cubin_loaded,
// pc_sample_batch, stall_reason_map, error and gpu_config when present; nothing else.
AgentChoice choose_agent_probes(const std::vector<SdtNote> &notes);

// Parses a note's argument string the way the agent's USDT parser does ("8@%rdi", "-4@-20(%rbp)",
// "8@(%rax)", "4@$128", "4@128"; x86-64 register names of any width it knows). Fills *spec; on a
// string the agent cannot parse returns false with a reason, and *spec has nargs 0 (every
// argument read then fails, as with the agent, which attaches such a probe without a spec).
bool parse_arg_specs(const std::string &args, ac_probe_spec *spec, std::string *error);

// The probe's name as in the library's notes.
const char *probe_name(ac_probe p);

}  // namespace parcagpu::agent
