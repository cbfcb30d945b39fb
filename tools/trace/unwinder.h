// Unwinding a copied user stack by DWARF CFI (.eh_frame / .debug_frame), as
// `perf --call-graph dwarf` does: the BPF program copies the registers and the top of the user
// stack at the probe (struct pt_stack_copy), and libdwfl unwinds it here (dwfl_attach_state +
// dwfl_getthread_frames). Code built without frame pointers unwinds whole.
//
// One Dwfl per process, its modules the process's executable file mappings at their load
// addresses (reported as they become known). Memory reads are served from the copy alone: the
// live process's stack is another moment's, so the walk ends where the copy ends. It ends at the first
// address that lies in no module (heap, stack, JIT code, garbage): such a frame is never
// returned, and the caller learns that the walk ended there.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "owns_handles.h"
#include "symbolizer.h"

namespace parcagpu::trace {

constexpr int kDwarfRegs = 17;  // x86-64: rax rdx rcx rbx rsi rdi rbp rsp r8..r15, rip (16)

struct CopiedStack {
  const uint64_t *regs = nullptr;  // kDwarfRegs registers, DWARF order
  const uint8_t *data = nullptr;   // the stack from regs[7] (rsp) up
  size_t size = 0;
};

struct UnwindResult {
  std::vector<uint64_t> pcs;     // pcs[0] the probe's address, then return addresses
  bool ended_outside_code = false;  // stopped at an address in no module
  // The walk reached a frame whose CFI says it has no caller (_start, clone3: the return address
  // marked undefined), so the stack is whole to the thread's start; false where it ended early
  // (the copy ran out, a frame without CFI, PT_STACK_MAX frames).
  bool whole = false;
};

class DwarfUnwinder : OwnsHandles {
 public:
  DwarfUnwinder();
  ~DwarfUnwinder();

  // `maps`: the executable mappings of `pid` (Symbolizer::maps). At most `max` pcs.
  UnwindResult unwind(uint32_t pid, uint32_t tid, const std::vector<MapEntry> &maps, const CopiedStack &stack,
                      size_t max);
  void forget(uint32_t pid);

  struct Process;  // per process: its Dwfl and the unwind under way (unwinder.cc)

 private:
  std::unordered_map<uint32_t, std::unique_ptr<Process>> procs_;
};

}  // namespace parcagpu::trace
