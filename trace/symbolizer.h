// Symbolizing user addresses of traced processes from their own ELF files: /proc/PID/maps says
// which file (and file offset) an address belongs to, the file's .symtab / .dynsym (or those of
// its local separate debug file, /usr/lib/debug/.build-id/xx/yyyy.debug) name the function,
// abi::__cxa_demangle makes it readable. No network, no debuginfod.
//
// Where an address lies: the process's executable mappings as the kernel reported them when
// they were made (perf MMAP2 records, trace/mmap_tracker.h, fed in through on_exec / on_mmap /
// on_fork / on_exit), so that a process that captured and exited before its events were read
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

#include "stack_unwind.h"

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

class ElfImage;  // one mapped ELF file, its symbols and PT_LOAD segments

// A symbolized frame.
struct Frame {
  std::string function;  // demangled; "" when no symbol covers the address
  std::string module;    // file basename, "[anon]" / "[vdso]" / ...
  std::string path;      // full path of the module ("" when not file-backed)
  uint64_t offset = 0;   // from the function's start, or (no function) the file-relative address
  bool scanned = false;  // recovered by the stack scan, not by the frame-pointer walk
  // "function+0x1f (module)", "module+0x1234" without a function; "?" first when scanned.
  std::string text() const;
};

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();

  // Unwinds a captured user stack of process `pid` and symbolizes it (innermost first).
  std::vector<Frame> symbolize_stack(uint32_t pid, const RawUserStack &s);

  // One address of process `pid` (is_return: a return address, looked up at addr - 1).
  Frame symbolize(uint32_t pid, uint64_t addr, bool is_return);

  // Snapshots the maps of a process seen for the first time whose mappings were not all
  // reported (it was running before the tracer started); no-op afterwards. Called on a
  // process's first event of any kind.
  void note_process(uint32_t pid) { process(pid); }

  // Mapping events, in the order they happened. on_exec: the process exec'd, its mappings are
  // all reported from now on; on_mmap: an executable mapping; on_fork: a new process, with
  // the parent's mappings; on_exit: forgotten by prune() `keep_ns` after now_ns.
  void on_exec(uint32_t pid);
  void on_mmap(uint32_t pid, MapEntry m);
  void on_fork(uint32_t parent, uint32_t child);
  void on_exit(uint32_t pid, uint64_t now_ns);
  void prune(uint64_t now_ns, uint64_t keep_ns);
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
    bool reread_this_event = false;
    uint64_t exited_at = 0;      // on_exit's now_ns, 0 = alive
  };
  class View;
  Process &process(uint32_t pid);
  const MapEntry *find_map(uint32_t pid, uint64_t addr, bool may_reread);
  ElfImage *image(uint32_t pid, const MapEntry &m);

  std::unordered_map<uint32_t, Process> procs_;
  std::map<std::string, std::unique_ptr<ElfImage>> images_;  // key: path|dev|inode
  uint64_t files_loaded_ = 0;
};

}  // namespace parcagpu::trace
