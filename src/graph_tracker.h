// What CUPTI's graph resource callbacks tell about executable graphs, kept so launches and
// kernel records can be told right (ground truth, facts 6 to 8):
//  - how many kernels a launch of an exec produces (its entry completes exactly, and an exec
//    with no kernels at all, host functions only, is not announced: nothing could match it);
//  - which exec owns a conditional node's body graph: body kernels arrive with correlation ID 0
//    and the body graph's id, and are handed back to the launch that ran them;
//  - which captured node each instantiated node was cloned from (graph_node_clone), fired again
//    when a consumer attaches later.
// Instantiation happens inside one API call on one thread: CLONED/CREATED events are gathered
// per thread until GRAPHEXEC_CREATED closes them into one exec.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cupti_api.h"
#include "log.h"

namespace parcagpu {

struct GraphStats {
  uint64_t execs = 0;
  uint64_t clones = 0;
  uint64_t hostonly_launches = 0;     // not announced: no kernel could ever match
  uint64_t conditional_records = 0;   // correlation-0 records handed back to their launch
  uint64_t conditional_ambiguous = 0; // ... where several launches of the exec were open
  uint64_t conditional_orphans = 0;   // ... with no known owner
};

class GraphTracker {
 public:
  // cuda may be null (no libcuda): node types then come from CUPTI's GraphData alone.
  GraphTracker(const CuptiApi &cupti, const CudaApi *cuda) : cupti_(cupti), cuda_(cuda) {}

  // Resource callbacks (any thread, outside launch calls).
  void on_node_created(const CUpti_GraphData *gd);
  void on_node_cloned(const CUpti_GraphData *gd);
  void on_exec_created(const CUpti_GraphData *gd);
  void on_exec_destroyed(const CUpti_GraphData *gd);

  struct ExecFacts {
    bool known = false;
    bool has_conditional = false;
    uint32_t kernel_nodes = 0;
  };
  ExecFacts facts(const void *exec) const;
  // An announced launch of an exec with conditional nodes: the owner of its body kernels.
  void on_conditional_launch(const void *exec, uint32_t correlation_id);
  void count_hostonly_launch();
  // The launch that owns a correlation-0 kernel record of graph `graph_id`; 0 if unknown.
  // `alive` says whether a launch is still being tracked (older ones are skipped).
  template <typename Alive>
  uint32_t conditional_owner(uint32_t graph_id, Alive alive);
  // Fires graph_node_clone for every clone remembered (a consumer attached late).
  void refire_clones();
  GraphStats stats() const;

 private:
  struct Clone {
    uint64_t original_node;
    uint64_t cloned_node;
    uint32_t exec_graph;
  };
  struct Exec {
    uint32_t kernel_nodes = 0;
    bool has_conditional = false;
    std::vector<uint32_t> graph_ids;  // every graph seen while it was instantiated
    std::deque<uint32_t> open_launches;  // conditional execs: launches that may own kernels
  };
  CUgraphNodeType node_type(const CUpti_GraphData *gd) const;
  void retire_locked(uint64_t serial);

  const CuptiApi &cupti_;
  const CudaApi *cuda_;
  mutable std::mutex mu_;
  // Execs by a serial number rather than by handle: an exec destroyed right after its launch
  // (common) still owns the kernels whose records arrive later, and a new exec may reuse the
  // handle meanwhile. Destroyed execs are retired, not erased, and the oldest retired ones go.
  std::unordered_map<const void *, uint64_t> live_execs_;   // handle -> serial
  std::unordered_map<uint64_t, Exec> execs_;                 // serial -> facts
  std::deque<uint64_t> retired_;                             // destroyed serials, oldest first
  std::unordered_map<uint32_t, uint64_t> graph_to_exec_;     // exec and body graph ids -> serial
  uint64_t next_serial_ = 1;
  std::vector<Clone> clones_;  // bounded: the oldest half goes at the cap
  GraphStats stats_;
};

template <typename Alive>
uint32_t GraphTracker::conditional_owner(uint32_t graph_id, Alive alive) {
  std::lock_guard<std::mutex> lock(mu_);
  auto g = graph_to_exec_.find(graph_id);
  auto e = g == graph_to_exec_.end() ? execs_.end() : execs_.find(g->second);
  if (e == execs_.end()) {
    if (stats_.conditional_orphans++ < 8)
      debug_log("correlation-0 kernel record of graph %u: no exec instantiated with that graph",
                graph_id);
    return 0;
  }
  auto &open = e->second.open_launches;
  while (!open.empty() && !alive(open.front())) open.pop_front();
  if (open.empty()) {
    if (stats_.conditional_orphans++ < 8)
      debug_log("correlation-0 kernel record of graph %u: its exec has no launch in flight",
                graph_id);
    return 0;
  }
  ++stats_.conditional_records;
  // Launches of one exec run in order; with several open, the oldest is the likeliest owner,
  // but it is a guess: counted, and logged by the caller.
  if (open.size() > 1) {
    if (stats_.conditional_ambiguous++ % 1000 == 0)
      debug_log("conditional kernel of graph %u: %zu launches of its exec are open, attributed "
                "to the oldest (correlation %u); %llu such records so far",
                graph_id, open.size(), open.front(),
                static_cast<unsigned long long>(stats_.conditional_ambiguous));
  }
  return open.front();
}

}  // namespace parcagpu
