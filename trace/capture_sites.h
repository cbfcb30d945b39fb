// Capture-site attribution (issue 5, item 3), without BPF: which code recorded each graph kernel
// into its graph during stream capture.
//
//   graph_capture_launch(corr, cbid, name, graphId, nodeId) -> capture site of node nodeId:
//       the launch name and the user stack at the probe (mechanism frames dropped)
//   graph_node_clone(original, cloned, execGraphId)         -> cloned came from original
//   kernel record (graphId != 0, graphNodeId)               -> follow the clones back to a
//       captured node; its capture site, or none (explicitly built graphs, conditional bodies)
//
// Node IDs are per process; everything is keyed by (pid, node ID).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "joiner.h"
#include "symbolizer.h"

namespace parcagpu::trace {

// The mechanism, not the user's code: frames in the library itself (libparcagpu*, or the file
// given as `lib`), in libcupti* and in libcuda.so* (not libcudart).
bool is_mechanism_frame(const Frame &f, const std::string &lib_path);

// The frame a capture is attributed to ("captured at"): the first frame that is not CUDA runtime
// plumbing (libcudart*, cuda* / cu[A-Z]* / __cuda* / cudart:: functions, __device_stub__*, the
// kernel's own host stub named `launch_name`) and has a symbol; else the first frame. Index into
// `stack`, or -1 when it is empty.
int captured_at_index(const std::vector<Frame> &stack, std::string_view launch_name);

class CaptureSites {
 public:
  // `lib_path`: the traced library's resolved path (its frames are dropped as mechanism).
  explicit CaptureSites(std::string lib_path = "") : lib_path_(std::move(lib_path)) {}

  struct Site {
    std::string launch_name;  // the probe's name argument (kernel symbol or API name)
    int32_t signed_cbid = 0;
    uint32_t graph_id = 0;    // the graph being captured into
    uint32_t stack_id = 0;    // into stacks(); 0 = no stack (taken without --capture-sites)
  };
  struct Stack {
    std::vector<Frame> frames;  // innermost first, mechanism frames dropped
    int captured_at = -1;       // index into frames, -1 if none
    std::string captured_at_function() const;  // "" if none
  };

  // graph_capture_launch. `stack`: the symbolized user stack, innermost first (empty without
  // --capture-sites); mechanism frames are dropped here.
  void on_capture(uint32_t pid, uint32_t correlation_id, int32_t signed_cbid,
                  std::string_view name, uint32_t graph_id, uint64_t node_id,
                  std::vector<Frame> stack = {});
  // graph_node_clone.
  void on_clone(uint32_t pid, uint64_t original_node_id, uint64_t cloned_node_id,
                uint32_t exec_graph_id);
  // A graph kernel record (graphId != 0): its capture site, or nullptr (counted either way).
  // Aggregated per (kernel name, capture stack) with its GPU time.
  const Site *on_graph_kernel(uint32_t pid, uint64_t node_id, std::string_view kernel_name,
                              uint64_t start_ns, uint64_t end_ns);
  // The capture site of a node (following clones), or nullptr. No counting.
  const Site *resolve(uint32_t pid, uint64_t node_id) const;

  const Stack &stack(uint32_t id) const { return stacks_[id]; }

  // Counters and (with_sites) the per (kernel, stack) table, sorted by GPU time.
  void fill(Summary *s, bool with_sites) const;

 private:
  struct Process {
    std::unordered_map<uint64_t, uint64_t> cloned_from;  // cloned node -> original node
    std::unordered_map<uint64_t, Site> sites;            // captured node -> site
  };
  uint32_t intern(std::vector<Frame> frames, std::string_view launch_name);

  std::string lib_path_;
  std::unordered_map<uint32_t, Process> procs_;
  std::vector<Stack> stacks_{Stack{}};       // [0]: no stack
  std::map<std::string, uint32_t> stack_ids_;  // joined frame texts -> id
  struct Agg {
    uint64_t records = 0, total_ns = 0;
  };
  std::map<std::pair<std::string, uint32_t>, Agg> by_kernel_stack_;
  uint64_t captures_ = 0, clones_ = 0, with_site_ = 0, without_site_ = 0;
  uint64_t clone_cycles_ = 0;
};

}  // namespace parcagpu::trace
