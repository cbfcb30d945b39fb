#include "unwinder.h"

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>

namespace parcagpu::trace {
namespace {

char *g_debuginfo_path = nullptr;
const Dwfl_Callbacks kCallbacks = {dwfl_build_id_find_elf, dwfl_standard_find_debuginfo,
                                   dwfl_offline_section_address, &g_debuginfo_path};

}  // namespace

struct DwarfUnwinder::Process {
  uint32_t pid = 0;
  Dwfl *dwfl = nullptr;
  bool attached = false;
  std::set<std::string> reported;  // path|load address
  // The unwind under way (the thread callbacks get this Process).
  uint32_t tid = 0;
  CopiedStack stack;
  UnwindResult *result = nullptr;
  size_t max = 0;
  bool read_outside_copy = false;  // a read the copy could not answer: the walk was cut there

  ~Process() {
    if (dwfl) dwfl_end(dwfl);
  }

  // Every executable file mapping not reported yet, at its load address: base = start - file
  // offset, the file's first PT_LOAD at file offset 0 (as perf's unwind-libdw reports modules).
  void report(const std::vector<MapEntry> &maps) {
    bool began = false;
    for (const MapEntry &m : maps) {
      if (!m.exec || m.path.empty() || m.path[0] != '/' || m.start < m.offset) continue;
      const std::string path = live_path(m.path);
      const uint64_t base = m.start - m.offset;
      if (!reported.insert(path + "|" + std::to_string(base)).second) continue;
      if (!began) dwfl_report_begin_add(dwfl);
      began = true;
      std::string open_path = "/proc/" + std::to_string(pid) + "/root" + path;
      if (access(open_path.c_str(), R_OK) != 0) open_path = path;
      dwfl_report_elf(dwfl, path.c_str(), open_path.c_str(), -1, base, false);
    }
    if (began) dwfl_report_end(dwfl, nullptr, nullptr);
  }

  bool read_word(Dwarf_Addr addr, Dwarf_Word *out) {
    const uint64_t sp = stack.regs[7];
    if (addr >= sp && addr - sp + sizeof *out <= stack.size) {
      std::memcpy(out, stack.data + (addr - sp), sizeof *out);
      return true;
    }
    // Outside the copy: no answer, so the walk ends there. The process's memory now (what was
    // read here before) holds the stack of a later moment: frames above the copy read from it
    // are another call's, or garbage, and a stack made of them would be invented. The copy
    // reaches the stack's end wherever that is within --stack-bytes (copy_stack).
    read_outside_copy = true;
    return false;
  }

  static pid_t next_thread(Dwfl *, void *arg, void **thread_argp) {
    auto *p = static_cast<Process *>(arg);
    if (*thread_argp) return 0;
    *thread_argp = p;
    return static_cast<pid_t>(p->tid);
  }
  static bool get_thread(Dwfl *, pid_t tid, void *arg, void **thread_argp) {
    auto *p = static_cast<Process *>(arg);
    *thread_argp = p;
    return static_cast<uint32_t>(tid) == p->tid;
  }
  static bool memory_read(Dwfl *, Dwarf_Addr addr, Dwarf_Word *result, void *arg) {
    return static_cast<Process *>(arg)->read_word(addr, result);
  }
  static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg) {
    auto *p = static_cast<Process *>(thread_arg);
    Dwarf_Word regs[kDwarfRegs];
    std::memcpy(regs, p->stack.regs, sizeof regs);
    return dwfl_thread_state_registers(thread, 0, kDwarfRegs, regs);
  }
  static int on_frame(Dwfl_Frame *frame, void *arg) {
    auto *p = static_cast<Process *>(arg);
    Dwarf_Addr pc = 0;
    bool activation = false;
    if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
    // A return address: the call is one byte before it.
    const Dwarf_Addr code = activation || pc == 0 ? pc : pc - 1;
    if (!dwfl_addrmodule(p->dwfl, code)) {
      p->result->ended_outside_code = pc != 0;
      return DWARF_CB_ABORT;
    }
    p->result->pcs.push_back(pc);
    return p->result->pcs.size() >= p->max ? DWARF_CB_ABORT : DWARF_CB_OK;
  }
};

namespace {
const Dwfl_Thread_Callbacks kThreadCallbacks = {
    DwarfUnwinder::Process::next_thread, DwarfUnwinder::Process::get_thread,
    DwarfUnwinder::Process::memory_read, DwarfUnwinder::Process::set_initial_registers, nullptr, nullptr};
}  // namespace

DwarfUnwinder::DwarfUnwinder() = default;
DwarfUnwinder::~DwarfUnwinder() = default;

void DwarfUnwinder::forget(uint32_t pid) { procs_.erase(pid); }

UnwindResult DwarfUnwinder::unwind(uint32_t pid, uint32_t tid, const std::vector<MapEntry> &maps,
                                   const CopiedStack &stack, size_t max) {
  UnwindResult r;
  if (!stack.regs || max == 0) return r;
  std::unique_ptr<Process> &slot = procs_[pid];
  if (!slot) {
    slot = std::make_unique<Process>();
    slot->pid = pid;
    slot->dwfl = dwfl_begin(&kCallbacks);
  }
  Process &p = *slot;
  if (!p.dwfl) return r;
  p.report(maps);
  if (!p.attached) {
    // The machine comes from the first module's ELF: without one there is nothing to unwind.
    if (!dwfl_attach_state(p.dwfl, nullptr, static_cast<pid_t>(pid), &kThreadCallbacks, &p)) return r;
    p.attached = true;
  }
  p.tid = tid;
  p.stack = stack;
  p.result = &r;
  p.max = max;
  p.read_outside_copy = false;
  const int rc = dwfl_getthread_frames(p.dwfl, static_cast<pid_t>(tid), &Process::on_frame, &p);
  // libdwfl returns 0 both where a frame's CFI says it has no caller and where the caller's
  // return address could not be read (past the copy): only the first, with no read refused, is
  // the thread's start.
  r.whole = rc == 0 && !p.read_outside_copy;
  p.result = nullptr;
  return r;
}

}  // namespace parcagpu::trace
