// Capture-site attribution, without BPF: which code recorded each graph kernel into its graph
// during stream capture.
//
//   graph_capture_launch(corr, cbid, name, graphId, nodeId) -> capture site of node nodeId:
//       the launch name and the user stack at the probe (a StackTable id)
//   graph_node_clone(original, cloned, execGraphId)         -> cloned came from original
//   kernel record (graphId != 0, graphNodeId)               -> follow the clones back to a
//       captured node; its capture site, or none (explicitly built graphs, conditional bodies)
//
// Node IDs are per process; everything is keyed by (pid, node ID). Bounded like the joiner, by
// count only (an instantiated graph may be replayed for hours): two generations of at most
// max_entries/2 each; an entry that is used moves to the current one, the old one is dropped
// when the current one is full (counted). A process's entries go when it is gone (forget()).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "joiner.h"
#include "stacks.h"

namespace parcagpu::trace {

// The frame a capture is attributed to ("captured at"): the first frame that is not CUDA runtime
// plumbing (libcudart*, cuda* / cu[A-Z]* / __cuda* / cudart:: functions, __device_stub__*, the
// kernel's own host stub named `launch_name`) and has a symbol; else the first frame. Index into
// `stack`, or -1 when it is empty.
int captured_at_index(const std::vector<Frame> &stack, std::string_view launch_name);

class CaptureSites {
 public:
  CaptureSites(const StackTable &stacks, const NameTable &names, size_t max_entries = 1 << 20)
      : stacks_(stacks), names_(names), max_entries_(max_entries < 2 ? 2 : max_entries) {}

  struct Site {
    std::string launch_name;  // the probe's name argument (kernel symbol or API name)
    int32_t signed_cbid = 0;
    uint32_t graph_id = 0;    // the graph being captured into
    uint32_t stack_id = 0;    // StackTable id; kNone without --capture-sites
    int captured_at = -1;     // index into the stack's frames
  };

  // graph_capture_launch, with the StackTable id of the user stack (kNone without one).
  void on_capture(uint32_t pid, uint32_t correlation_id, int32_t signed_cbid,
                  std::string_view name, uint32_t graph_id, uint64_t node_id, uint32_t stack_id);
  // graph_node_clone.
  void on_clone(uint32_t pid, uint64_t original_node_id, uint64_t cloned_node_id,
                uint32_t exec_graph_id);
  // A graph kernel record (graphId != 0): its capture site, or nullptr (counted either way).
  // Aggregated per (kernel name id, capture stack) with its GPU time.
  const Site *on_graph_kernel(uint32_t pid, uint64_t node_id, uint32_t kernel_name_id,
                              uint64_t gpu_ns);
  // The capture site of a node (following clones), or nullptr. No counting.
  const Site *resolve(uint32_t pid, uint64_t node_id);
  // "captured at" function of a site ("" without a stack).
  std::string captured_at_function(const Site &s) const;
  // A process that is gone: its clone map and sites.
  void forget(uint32_t pid);
  size_t entries() const;

  // Adds the counters to s and sets (with_sites) the per (kernel, stack) table, sorted by GPU time.
  void fill(Summary *s, bool with_sites) const;

 private:
  struct Key {
    uint32_t pid;
    uint64_t node;
    bool operator==(const Key &o) const { return pid == o.pid && node == o.node; }
  };
  struct KeyHash {
    size_t operator()(const Key &k) const { return std::hash<uint64_t>{}(k.node * 0x9e3779b97f4a7c15ull ^ k.pid); }
  };
  struct Generation {
    std::unordered_map<Key, uint64_t, KeyHash> cloned_from;  // cloned node -> original node
    std::unordered_map<Key, Site, KeyHash> sites;            // captured node -> site
    size_t size() const { return cloned_from.size() + sites.size(); }
  };
  template <typename Map>
  typename Map::mapped_type *find(Map Generation::*which, const Key &k);
  void maybe_rotate();

  const StackTable &stacks_;
  const NameTable &names_;
  size_t max_entries_;
  Generation cur_, old_;
  std::unordered_set<uint32_t> pids_;  // processes with entries in cur_ or old_ (forget())
  struct Agg {
    uint64_t records = 0, total_ns = 0;
    std::string launch_name;
    int captured_at = -1;
  };
  std::map<std::pair<uint32_t, uint32_t>, Agg> by_kernel_stack_;  // (kernel name id, stack id)
  Counters c_;  // the capture counters
};

}  // namespace parcagpu::trace
