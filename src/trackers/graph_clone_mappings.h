// Which captured node each instantiated node was cloned from (graph_node_clone), kept per exec so
// that a consumer attaching later is told them again (re-firing, in bounded chunks off the launch
// path), and the nodes on the way to an announced capture, whose clones are fired live at
// instantiation. Part of GraphTracker (graph_tracker.h), which says when execs and graphs come and
// go; bounded by what is live: an exec's mappings go at its destroy, wanted nodes with their graph,
// and caps (kMaxClones, kMaxWantedNodes) that only a program keeping that many graphs alive
// reaches, counted and said once. Thread-safe (a lock of its own, taken after GraphTracker's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace parcagpu {

// A node cloned at instantiation: what graph_node_clone carries.
struct GraphClone {
  uint64_t original_node;
  uint64_t cloned_node;
  uint32_t exec_graph;
};

struct GraphCloneStats {
  uint64_t clones = 0;
  uint64_t not_fired = 0;   // of no announced capture: stored, fired only on re-firing
  uint64_t not_stored = 0;  // beyond kMaxClones live: never re-fired to a late consumer
  uint64_t wanted_forgotten_at_cap = 0;  // kMaxWantedNodes: their later clones not fired live
  // Held now: the mappings stored (at most kMaxClones) and the nodes watched (kMaxWantedNodes).
  uint64_t stored = 0;
  uint64_t wanted = 0;
};

class GraphCloneMappings {
 public:
  // A node cloned at instantiation, on the instantiating thread: fired live if its original is
  // wanted (the clone is then wanted too). Whether it may be stored with its exec: not past
  // kMaxClones live (`pending`: the mappings gathered for that exec so far, not stored yet).
  bool on_clone(const GraphClone &c, size_t pending);
  // The mappings of the exec instantiated as `exec_serial` (GraphTracker's serials only grow).
  void store(uint64_t exec_serial, std::vector<GraphClone> clones);
  // The exec was destroyed or forgotten: its mappings go.
  void drop(uint64_t exec_serial);
  // A captured launch was announced (graph_capture_launch) as node `node_id` of graph
  // `graph_id`: the clones of that node, and the clones of those, are fired live at
  // instantiation; other clones are only stored, for re-firing. Firing every clone of every
  // instantiation put half a million events a second into a consumer's ring buffer at the
  // default rate limits (issue 30), though a clone is of use only on the way to an announced
  // capture site.
  void note_capture_node(uint32_t graph_id, uint64_t node_id);
  // A graph is being destroyed (or an exec whose graphs these were): its nodes' clones need no
  // watching any more.
  void forget_graph(uint32_t graph_id);
  // Everything forgotten (GraphTracker's cap on live execs).
  void clear();
  // Re-firing for a consumer that attached late: the watcher calls begin_refire() when the clone
  // consumers grew, then refire_some() each cycle until it returns 0. Each call fires at most
  // `max` stored mappings (those of the execs stored at begin_refire; later ones were fired
  // live, destroyed ones will run no kernel), holds the lock only to copy them, and returns how
  // many it fired.
  void begin_refire();
  size_t refire_some(size_t max);
  GraphCloneStats stats() const;

 private:
  void want_locked(uint32_t graph_id, uint64_t node);

  mutable std::mutex mu_;
  std::map<uint64_t, std::vector<GraphClone>> by_exec_;  // exec serial -> its mappings
  size_t stored_ = 0;                                    // over by_exec_, at most kMaxClones
  // Re-firing cursor: the next exec serial and index in its clones; nothing to do at end.
  uint64_t refire_serial_ = 0, refire_index_ = 0, refire_end_ = 0;
  // Nodes whose clones are fired live (note_capture_node and their clones), by the graph they
  // belong to, forgotten with it.
  std::unordered_map<uint64_t, uint32_t> wanted_nodes_;  // node -> its graph
  std::unordered_map<uint32_t, std::vector<uint64_t>> wanted_by_graph_;
  GraphCloneStats stats_;
};

}  // namespace parcagpu
