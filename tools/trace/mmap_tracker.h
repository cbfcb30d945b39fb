// The executable mappings of every process as the kernel reports them when they are made: one
// perf dummy event per CPU with mmap2 / comm_exec / task records (what `perf record` uses to
// symbolize), fed to the Symbolizer in time order. With it, a process that captured a graph and
// exited before its events were read (milliseconds, in the mock) is still symbolized; without
// it (perf_event_open refused) the Symbolizer falls back to /proc/PID/maps snapshots.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "owns_handles.h"
#include "symbolizer.h"

namespace parcagpu::trace {

class MmapTracker : OwnsHandles {
 public:
  MmapTracker() = default;
  ~MmapTracker();

  // Opens the per-CPU events. False (with a reason) when perf_event_open is refused.
  bool open(std::string *error);
  bool is_open() const { return !cpus_.empty(); }

  // What else wants the records: every new executable file mapping (target discovery), and
  // the processes forgotten 30 s after they exited (their caches go).
  struct Hooks {
    std::function<void(uint32_t pid, const MapEntry &m)> mapping;
    std::function<void(uint32_t pid)> gone;
    std::function<void(uint32_t pid)> exec;  // the process runs a new program
  };

  // Reads every record written so far, applies them to `sym` in time order, and forgets
  // processes that exited more than 30 s ago. Call it before symbolizing a stack (the mappings
  // made before the launch are then known) and regularly (so the buffers do not overflow).
  void drain(Symbolizer *sym, const Hooks &hooks = {});

  uint64_t lost() const { return lost_; }        // records the kernel dropped (buffer full)
  uint64_t records() const { return records_; }  // records applied

 private:
  struct Cpu {
    int fd = -1;
    void *base = nullptr;
    size_t size = 0;  // bytes mapped: one header page + the data pages
  };
  std::vector<Cpu> cpus_;
  std::vector<uint8_t> scratch_;
  uint64_t lost_ = 0, records_ = 0;
  uint64_t last_prune_ns_ = 0;
};

}  // namespace parcagpu::trace
