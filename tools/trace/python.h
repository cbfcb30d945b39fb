// CPython frames in launch stacks (3.11, 3.12, 3.13). The BPF program copies the firing
// thread's _PyInterpreterFrame chain (code object, instruction pointer, entry byte: struct
// pt_py_stack in trace_events.h) for the processes userland registered in its "py_procs" map;
// this file is the userland half:
//   * detect_python: is a process CPython? (the _PyRuntime and Py_Version symbols of its
//     executable or of a mapped libpython3.X.so) -> the struct pt_py_proc for the map;
//   * PythonFrames: a copied chain -> symbolized Python frames ("file.py:LINE function"), the
//     code objects read from /proc/PID/mem (process_vm_readv) and cached per (pid, code);
//   * py_code_line: the 3.11+ location table (co_linetable) -> the line of an instruction;
//   * merge_python_frames: the Python frames put in place of the native frames of the
//     interpreter loop that ran them (as py-spy --native does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "counters.h"
#include "symbolizer.h"
#include "trace_events.h"

namespace parcagpu::trace {

// The offsets of one CPython minor version (from its internal headers: pycore_runtime.h,
// pycore_interp.h, pycore_pystate.h / cpython/pystate.h, pycore_frame.h, cpython/code.h).
struct PyLayout {
  int major = 0, minor = 0;
  uint32_t runtime_interp_head = 0;  // _PyRuntimeState.interpreters.head
  pt_py_proc bpf{};                  // interp_head is the only field left 0
  bool owner_field = false;          // 3.12+: entry byte is `owner`; 3.11: `is_entry`
  uint32_t code_filename = 0, code_name = 0, code_qualname = 0, code_firstlineno = 0,
           code_linetable = 0, code_adaptive = 0;  // PyCodeObject
  uint32_t ascii_size = 0;    // sizeof(PyASCIIObject): where compact ASCII data starts
  uint32_t compact_size = 0;  // sizeof(PyCompactUnicodeObject)
  uint32_t compact_utf8 = 0;  // PyCompactUnicodeObject.utf8 (char *, may be NULL)
};
// The layout of CPython major.minor, or nullptr when not supported. For 3.13 this is the
// headers' table; detect_python uses the process's own _Py_DebugOffsets instead.
const PyLayout *py_layout(int major, int minor);

// 3.13: the offsets as the interpreter itself publishes them in the _Py_DebugOffsets at the start
// of _PyRuntime (what debuggers read), rather than the table's, so that a 3.13.x whose internal
// structs moved is still read right. `words`: the first kPyDebugOffsetsWords 8-byte words of
// _PyRuntime (cookie "xdebugpy", version, free_threaded, then the runtime, interpreter, thread
// state, frame and code object sections of 3.13's pycore_runtime.h). nullptr when they are not
// 3.13's, or a free-threaded build's (not supported). The layout lives as long as the tool.
constexpr size_t kPyDebugOffsetsWords = 44;
const PyLayout *py_layout_from_debug_offsets(const std::vector<uint64_t> &words, int minor);

// FRAME_OWNED_BY_CSTACK (3.12+): the shim frame an interpreter loop pushes where it starts.
constexpr uint8_t kPyFrameOwnedByCStack = 3;

// The line of the instruction at byte offset `addr` of a code object, from its location table
// (co_linetable, 3.11+ format: CPython's Objects/locations.md) and co_firstlineno. -1 where
// the table says the instruction has no line, 0 where the table ends before `addr` or is
// malformed; an offset before the code (3.11's prev_instr before the first instruction) gives
// co_firstlineno, as PyCode_Addr2Line does.
int py_code_line(const uint8_t *table, size_t size, int firstlineno, int64_t addr);

// A Python frame as a stack frame: function = co_qualname, file = co_filename, module
// "[python]", python = true; Frame::name() is "basename.py:LINE qualname".
Frame python_frame(const std::string &qualname, const std::string &filename, int line);

// Python frames of one thread, innermost first, split by the interpreter-loop run that
// executes them: groups[0] is run by the innermost _PyEval_EvalFrameDefault.
using PyFrameGroups = std::vector<std::vector<Frame>>;

// `native` (innermost first, symbolized) with each native _PyEval_EvalFrameDefault frame
// replaced by its group of Python frames, pairing them from the innermost out. When the
// counts differ (the native unwind ended early, or the Python chain was cut at
// PT_PY_FRAMES_MAX) the pairs still go from the innermost out; groups left over go where the
// outermost interpreter frame is, or (no interpreter frame at all) after the native frames;
// interpreter frames left over stay as they are. *mismatch says that happened.
std::vector<Frame> merge_python_frames(const std::vector<Frame> &native, const PyFrameGroups &groups,
                                       bool *mismatch);

// Is process `pid` (executable mappings `maps`) CPython 3.11+? Looks for _PyRuntime and
// Py_Version in the symbols of a mapped file named python* or libpython3*; fills *out (the
// run-time address of interpreters.head and the version's offsets) and *version ("3.12").
bool detect_python(uint32_t pid, const std::vector<MapEntry> &maps, pt_py_proc *out, std::string *version,
                   const PyLayout **layout);

// Code objects -> frames, per process.
class PythonFrames {
 public:
  // A process found to be Python (its layout), or gone.
  void add_process(uint32_t pid, const PyLayout *layout) { procs_[pid].layout = layout; }
  void forget(uint32_t pid) { procs_.erase(pid); }
  bool knows(uint32_t pid) const { return procs_.count(pid) != 0; }
  // The chain of one event as groups (see PyFrameGroups); shim frames are dropped, and a
  // code object that cannot be read gives a "[python] ?" frame (counted in
  // c->python_frame_read_errors; the frames in c->python_frames).
  PyFrameGroups groups(uint32_t pid, const pt_py_stack &s, Counters *c);

 private:
  struct Code {
    bool ok = false;
    std::string qualname, filename;
    int firstlineno = 0;
    std::vector<uint8_t> linetable;
  };
  struct Proc {
    const PyLayout *layout = nullptr;
    std::unordered_map<uint64_t, Code> codes;
  };
  const Code &code(uint32_t pid, Proc &p, uint64_t addr);
  std::unordered_map<uint32_t, Proc> procs_;
};

}  // namespace parcagpu::trace
