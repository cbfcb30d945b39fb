// Symbolizing user addresses of traced processes with elfutils (libdwfl/libdw): function names
// (ELF symbols, demangled), inlined calls and file:line where the file or its separate debug
// file (.gnu_debuglink, /usr/lib/debug/.build-id) has DWARF. No network: debuginfod is not
// consulted (DEBUGINFOD_URLS is cleared), so a lookup never stalls the event loop.
//
// Where an address lies: the process's executable mappings as the kernel reported them when
// they were made (perf MMAP2 records, tools/trace/mmap_tracker.h, fed in through on_exec / on_mmap /
// on_fork / on_exit), so that a process that launched and exited before its events were read
// is still symbolized; processes that were running before the tracer started are snapshotted
// from /proc/PID/maps on their first event (and again when an address is not in the snapshot).
// Files are opened through /proc/PID/root while the process lives (containers), and cached per
// (path, device, inode): a second process of the same program costs nothing.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "owns_handles.h"

namespace parcagpu::trace {

struct MapEntry {
  uint64_t start = 0, end = 0, offset = 0;
  bool exec = false;
  uint64_t inode = 0;
  std::string dev;   // "fd:01"
  std::string path;  // "" for anonymous mappings
};

// Parses the text of /proc/PID/maps (exposed for tests).
std::vector<MapEntry> parse_proc_maps(std::string_view text);
// "/x/y (deleted)" -> "/x/y"
std::string live_path(const std::string &path);
// The whole file at `path` (a /proc file: maps, cgroup); false when it cannot be opened.
bool read_file(const std::string &path, std::string *out);

// A symbolized frame. One address gives several frames when calls were inlined into it: the
// innermost (inlined) first, the function that holds the code last.
struct Frame {
  std::string function;  // demangled, full signature; "" when nothing covers the address
  std::string module;    // file basename, "[anon]" / "[vdso]" / "[unmapped]" ...
  std::string path;      // full path of the module ("" when not file-backed)
  std::string file;      // source file, from DWARF ("" without debug info)
  int line = 0;
  uint64_t offset = 0;   // from the function's start, or (no function) the file address
  bool inlined = false;  // code of this function inlined into the next frame's function
  // A CPython frame (tools/trace/python.h): function = co_qualname, file = co_filename, line from
  // the code's location table; name() and text() are "basename.py:LINE qualname".
  bool python = false;
  std::string python_name() const;  // defined in python.cc
  // A frame that names something rather than code (the autograd node a backward launch ran
  // in, "[backward] MmBackward0": tools/trace/autograd.h; the root "[stack cut short]" of a stack
  // whose DWARF walk ended before the thread's start): name() and text() are `function` as is.
  bool label = false;
  // The function without return type and parameters ("ns::f<T>", "main"), or "module+0xADDR".
  std::string name() const;
  // The frame with its call site: name(), then " (file.cc:12)" with a line, else the offset in
  // the function and its module ("f+0x1a (module)": two call sites in one function of a stripped
  // binary stay two frames); " [inlined]" when inlined. The frame names of every output: the
  // text report, the folded stacks, the flame graph, pprof's locations, the JSON: one distinct
  // stack, one distinct key.
  std::string text() const;
};

// "ret ns::fn<T>(args) const" -> "ns::fn<T>": no return type, no parameters.
std::string short_function_name(std::string_view demangled);
// abi::__cxa_demangle, or the name unchanged when it is not a mangled C++ name.
std::string demangle(std::string_view name);

class DwarfImage;  // one ELF file through libdwfl

class Symbolizer : OwnsHandles {
 public:
  Symbolizer();
  ~Symbolizer();

  // A user stack of process `pid`: ips[0] is the probe's address, the others return addresses
  // (looked up at address - 1: the call). Innermost first, inlined frames expanded.
  std::vector<Frame> symbolize_stack(uint32_t pid, const uint64_t *ips, size_t n);

  // One address of process `pid` (is_return: a return address, looked up at addr - 1).
  std::vector<Frame> symbolize(uint32_t pid, uint64_t addr, bool is_return);

  // Snapshots the maps of a process seen for the first time whose mappings were not all
  // reported (it was running before the tracer started); no-op afterwards.
  void note_process(uint32_t pid) { process(pid); }

  // The executable mappings known for `pid` (read from /proc/PID/maps if none are yet).
  const std::vector<MapEntry> &maps(uint32_t pid) { return process(pid).maps; }

  // Mapping events, in the order they happened. on_exec: the process exec'd, its mappings are
  // all reported from now on; on_mmap: an executable mapping; on_fork: a new process, with
  // the parent's mappings; on_exit: forgotten by prune() `keep_ns` after now_ns.
  void on_exec(uint32_t pid);
  void on_mmap(uint32_t pid, MapEntry m);
  void on_fork(uint32_t parent, uint32_t child);
  void on_exit(uint32_t pid, uint64_t now_ns);
  // Forgets processes that exited more than keep_ns ago; returns their pids.
  std::vector<uint32_t> prune(uint64_t now_ns, uint64_t keep_ns);
  size_t processes() const { return procs_.size(); }

  // Test hook: the maps of a process, instead of /proc/PID/maps.
  void set_maps(uint32_t pid, std::vector<MapEntry> maps);

  uint64_t files_loaded() const { return files_loaded_; }

 private:
  struct Process {
    std::vector<MapEntry> maps;  // sorted by start
    bool complete = false;       // every mapping known: exec seen, or /proc/PID/maps read
    bool proc_tried = false;     // /proc/PID/maps read (or tried) for an incomplete process
    bool fixed = false;          // set_maps(): never re-read
    bool reread_this_stack = false;
    uint64_t exited_at = 0;      // on_exit's now_ns, 0 = alive
  };
  Process &process(uint32_t pid);
  const MapEntry *find_map(uint32_t pid, uint64_t addr, bool may_reread);
  DwarfImage *image(uint32_t pid, const MapEntry &m);

  std::unordered_map<uint32_t, Process> procs_;
  std::map<std::string, std::unique_ptr<DwarfImage>> images_;  // key: path|dev|inode
  uint64_t files_loaded_ = 0;
};

}  // namespace parcagpu::trace
