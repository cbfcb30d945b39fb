// GPU time by CPU stack: every matched kernel's GPU time (end - start) added to the stack of
// its launch (or, with --capture-sites, of its capture), per kernel name. What the top-N table,
// the folded output and the flame graph show.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "flamegraph.h"
#include "joiner.h"
#include "processes.h"
#include "stacks.h"

namespace parcagpu::trace {

// Whose GPU time: the process (ProcessTable id, ProcessTable::kUnknown for none) and the device
// (the kernel record's deviceId).
struct Origin {
  uint32_t process = UINT32_MAX;
  uint32_t device = 0;
};

class GpuProfile {
 public:
  void add(uint32_t stack_id, uint32_t kernel_name_id, uint64_t gpu_ns, Origin origin = {});
  void clear();
  uint64_t total_ns() const { return total_ns_; }
  uint64_t total_kernels() const { return total_kernels_; }
  size_t stacks() const;

  struct KernelCell {
    uint32_t kernel = 0;
    uint64_t gpu_ns = 0, kernels = 0;
  };
  struct Row {
    uint32_t stack_id = 0;
    uint64_t gpu_ns = 0, kernels = 0;
    std::vector<KernelCell> by_kernel;  // most GPU time first
  };
  // Every stack, most GPU time first (ties: fewer frames first, then id); processes and devices
  // added up.
  std::vector<Row> rows() const;

  // Every (stack, kernel, process, device) cell, in a fixed order (stack, kernel, process,
  // device): what pprof labels per process (pprof.h) and the table by process add up.
  struct Cell {
    uint32_t stack_id = 0, kernel = 0;
    Origin origin;
    uint64_t gpu_ns = 0, kernels = 0;
  };
  std::vector<Cell> cells() const;

 private:
  struct Key {
    uint32_t stack_id, kernel, process, device;
    bool operator==(const Key &) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key &k) const {
      uint64_t h = (static_cast<uint64_t>(k.stack_id) << 32 | k.kernel) * 0x9e3779b97f4a7c15ull;
      return h ^ ((static_cast<uint64_t>(k.process) << 32 | k.device) + (h >> 29));
    }
  };
  struct Sum {
    uint64_t gpu_ns = 0, kernels = 0;
  };
  std::unordered_map<Key, Sum, KeyHash> cells_;
  uint64_t total_ns_ = 0, total_kernels_ = 0;
};

// The top `n` rows, with frame texts and kernel names, for the reports.
std::vector<StackSummary> summarize_stacks(const GpuProfile &p, const StackTable &stacks,
                                           const NameTable &names, size_t n);

// GPU time by process: one row per process of `processes` with matched kernels (cells without a
// process are left out), ranked processes first by rank, then by pid; each with its devices and
// its top `n` kernels.
std::vector<ProcessSummary> summarize_processes(const GpuProfile &p, const ProcessTable &processes,
                                                const NameTable &names, size_t n);

// One folded stack per (stack, kernel): frames root first, "[gpu] kernel" last.
std::vector<FoldedStack> folded_stacks(const GpuProfile &p, const StackTable &stacks,
                                       const NameTable &names);

}  // namespace parcagpu::trace
