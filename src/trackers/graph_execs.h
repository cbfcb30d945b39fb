// The graph execs GraphTracker knows (graph_tracker.h), by a serial number rather than by handle:
// an exec destroyed right after its launch (common) still owns the kernels whose records arrive
// later, and a new exec may reuse the handle meanwhile. Destroyed execs are retired, not erased
// (GraphTracker decides which are kept and for how long). No lock of its own: GraphTracker's is
// held for every call, except conditional_live(), read lock-free.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

namespace parcagpu {

// What an exec's instantiation told, and its launches that may own conditional body kernels.
struct GraphExec {
  uint32_t kernel_nodes = 0;
  bool has_conditional = false;
  bool launched = false;            // seen launched (on_launch, take_first_launch)
  std::vector<uint32_t> graph_ids;  // every graph seen while it was instantiated
  struct OpenLaunch {
    uint32_t correlation_id;
    uint64_t launch_ts;
    uint64_t last_end = 0;          // end of the last kernel attributed to it
    bool unannounced = false;       // its kernels are dropped (on_conditional_unannounced)
    bool maybe_unrecorded = false;  // its kernels may never come (activity switched meanwhile)
  };
  std::deque<OpenLaunch> open_launches;  // conditional execs: launches that may own kernels
  // An announced launch of it may still await kernels (unannounced entries aside).
  bool owns_announced() const {
    for (const auto &l : open_launches)
      if (!l.unannounced) return true;
    return false;
  }
};

class GraphExecs {
 public:
  // A new exec instantiated as `handle`, whose serial is returned. The caller retires an exec
  // live under the same handle first (a handle reused without a destroy).
  uint64_t add(const void *handle, GraphExec e);
  // The serial of the exec live as `handle`, 0 if none.
  uint64_t live_serial(const void *handle) const;
  // The exec live as `handle`, of serial `serial`, or owning graph `graph_id`; null if none.
  GraphExec *live(const void *handle);
  GraphExec *find(uint64_t serial);
  GraphExec *by_graph(uint32_t graph_id);
  // `handle` destroyed: its exec (retired by the caller) is no longer live.
  void unlive(const void *handle);
  // An exec going from live to retired: no longer counted among the conditional ones.
  void retiring(const GraphExec &e);
  // Its facts and graph IDs gone.
  void forget(uint64_t serial);
  // Destroyed serials kept, oldest first (GraphTracker's to manage).
  std::deque<uint64_t> &retired() { return retired_; }
  size_t live_count() const { return live_.size(); }
  size_t stored() const { return execs_.size(); }  // live and retired
  void clear();
  // Whether any live exec has conditional nodes (lock-free).
  bool conditional_live() const { return conditional_live_.load(std::memory_order_relaxed) != 0; }

 private:
  std::unordered_map<const void *, uint64_t> live_;       // handle -> serial
  std::map<uint64_t, GraphExec> execs_;                   // serial -> facts
  std::deque<uint64_t> retired_;                          // destroyed serials, oldest first
  std::unordered_map<uint32_t, uint64_t> graph_to_exec_;  // exec and body graph ids -> serial
  uint64_t next_serial_ = 1;
  std::atomic<uint32_t> conditional_live_{0};  // live execs with conditional nodes
};

}  // namespace parcagpu
