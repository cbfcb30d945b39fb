// GPU time by CPU stack: every matched kernel's GPU time (end - start) added to the stack of
// its launch (or, with --capture-sites, of its capture), per kernel name. What the top-N table,
// the folded output and the flame graph show.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "flamegraph.h"
#include "joiner.h"
#include "stacks.h"

namespace parcagpu::trace {

class GpuProfile {
 public:
  void add(uint32_t stack_id, uint32_t kernel_name_id, uint64_t gpu_ns);
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
  // Every stack, most GPU time first (ties: fewer frames first, then id).
  std::vector<Row> rows() const;

 private:
  struct Cell {
    uint64_t gpu_ns = 0, kernels = 0;
  };
  std::unordered_map<uint64_t, Cell> cells_;  // stack id << 32 | kernel name id
  uint64_t total_ns_ = 0, total_kernels_ = 0;
};

// The top `n` rows, with frame texts and kernel names, for the reports.
std::vector<StackSummary> summarize_stacks(const GpuProfile &p, const StackTable &stacks,
                                           const NameTable &names, size_t n);

// One folded stack per (stack, kernel): frames root first, "[gpu] kernel" last.
std::vector<FoldedStack> folded_stacks(const GpuProfile &p, const StackTable &stacks,
                                       const NameTable &names);

}  // namespace parcagpu::trace
