// Which library files to attach to. With -l, that file. Without, every file with parcagpu SDT
// notes that a process maps, whatever its path or container (the production agent finds the
// library the same way): the running processes' /proc/PID/maps at start, then every executable
// mapping the kernel reports (perf mmap records, tools/trace/mmap_tracker.h), or a /proc rescan every
// 2 s where those are refused. Uprobes are per file (inode): attaching once to a file covers
// every process that maps it, now and later. -p narrows both to one process, -c to the
// processes of one cgroup (v2): only their files are looked at (the BPF programs drop the
// events of other processes that share a file).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "bpf_session.h"
#include "options.h"
#include "symbolizer.h"

namespace parcagpu::trace {

struct Library {
  std::string path;   // what the tracer opens and attaches to (maybe /proc/PID/root/...)
  std::string shown;  // the path as the process sees it
  dev_t dev = 0;
  ino_t ino = 0;
  std::vector<std::string> probes;  // parcagpu probe names in its notes
  uint32_t pid = 0;                 // the process it was found in (0 with -l)
};

// The parcagpu probes of an ELF file (unique names, note order); false with a reason when the
// file cannot be read. `verbose` lists the notes, handled or not, on stderr.
bool parcagpu_probes(const std::string &path, std::vector<std::string> *probes,
                     std::string *error, bool verbose);

// A cgroup v2 directory's path below its mount ("/" for the root, "/a/b"), or "" when `dir`
// is not in a cgroup v2 file system.
std::string cgroup_v2_path(const std::string &dir);

class Targets {
 public:
  Targets(const Options &o, BpfSession &bpf) : opt_(o), bpf_(bpf) {}

  // Called for each library file just before its probes are attached (e.g. an extension with a BPF
  // object of its own that must raise the semaphores first): false with *error skips the file.
  std::function<bool(const Library &, std::string *error)> before_attach;
  // Called for each library once attached (before its events can arrive).
  std::function<void(const Library &)> on_attached;

  // -l: checks and attaches LIB (false with *error / *err on failure); warns when no running
  // process maps it. Without -l: scans the running processes (or -p's), attaches what it finds,
  // warns when nothing matched.
  bool start(std::string *error, int *err);
  // A new executable file mapping of process `pid`.
  void on_mapping(uint32_t pid, const MapEntry &m);
  // Without mapping records: rescans /proc (every 2 s at most).
  void rescan(uint64_t now_ns);

  const std::vector<Library> &libraries() const { return libs_; }
  int probes_attached() const { return attached_; }
  bool discovering() const { return opt_.lib.empty(); }

 private:
  bool start_with_lib(std::string *error, int *err);  // -l LIB: attach to that file now
  bool consider(uint32_t pid, const std::string &mapped_path, bool report_errors);
  bool in_cgroup(uint32_t pid) const;
  bool attach(Library lib, std::string *error, int *err);
  void scan_processes();

  const Options &opt_;
  BpfSession &bpf_;
  std::vector<Library> libs_;
  std::set<std::pair<dev_t, ino_t>> checked_;           // files looked at (notes or not)
  std::set<std::pair<std::string, uint64_t>> seen_maps_;  // (dev, inode) of mappings looked at
  int attached_ = 0;
  uint64_t last_scan_ns_ = 0;
  std::string cgroup_rel_;  // -c as a path below the cgroup2 mount ("/a/b")
};

}  // namespace parcagpu::trace
