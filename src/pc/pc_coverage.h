// Which hot kernels have no PC samples yet, so that a window due opens at a launch of one
// (decide_pc_step, pc_step.h). Windows are few (an episode costs ~110 ms, P13; the sample
// credit and the duty cap space them seconds apart) and span 32 launches, so a kernel launched
// once in a step of a few hundred launches was inside a window opened at a random launch with
// p ~0.1 each time: on an H200 PyTorch training loop 21 of 39 kernels with GPU time, several with
// a few % of it, had no sample after 35 s (docs/pc-sampling.md, "Coverage").
//
// Kernels are known by their full (mangled) name, hashed: GPU time from every kernel activity
// record (PcSampler::on_kernel_record), sampled from every PC record drained, eager launches
// from the launch callbacks' symbolName while a window is due. A graph launch carries no name:
// it is a target while a hot unsampled kernel was never seen launched eagerly (it runs in graphs
// or through another path). Any thread; one mutex, taken only while a window is due, at a
// drain, and once per activity record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace parcagpu {

class PcCoverage {
 public:
  // A kernel is hot with at least this share of the GPU time seen (the goal is every kernel
  // with 2% of it: half that, as the share seen is itself a sample).
  static constexpr double kHotShare = 0.01;
  // Kernels kept at most (a program with more distinct kernels: the rest are not targeted).
  static constexpr size_t kMaxKernels = 8192;

  static uint64_t key(const char *name);
  // A kernel ran for gpu_ns (an activity record).
  void on_kernel(const char *name, uint64_t gpu_ns);
  // A PC record named this function.
  void on_sampled(const char *name);
  // Whether a window due should open at this launch: an eager launch of `function` (its name,
  // nullptr for a graph launch) whose kernel is hot and has no samples yet. Notes the eager
  // launch.
  bool wanted_at(const char *function);
  // Hot kernels with no samples yet.
  size_t targets() const;
  uint64_t kernels_not_kept() const;

 private:
  struct Kernel {
    uint64_t gpu_ns = 0;
    bool sampled = false;
    bool eager = false;  // seen at an eager launch (wanted_at)
  };
  bool hot(const Kernel &k) const;
  bool graph_wanted();  // under mu_

  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Kernel> kernels_;
  uint64_t total_ns_ = 0;
  uint64_t not_kept_ = 0;
  // wanted_at(nullptr) scans every kernel: its answer is kept, and scanned again after a kernel
  // was sampled or first seen eager, and every kGraphRescan graph launches (hot shares drift).
  static constexpr uint32_t kGraphRescan = 64;
  bool graph_wanted_ = false;
  bool graph_dirty_ = true;
  uint32_t graph_queries_ = 0;
};

}  // namespace parcagpu
