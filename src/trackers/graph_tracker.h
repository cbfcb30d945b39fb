// What CUPTI's graph resource callbacks tell about executable graphs, kept so launches and
// kernel records can be told right (docs/cupti-facts.md, facts 6 to 8):
//  - how many kernels a launch of an exec produces (its entry completes exactly, and an exec
//    with no kernels at all, host functions only, is not announced: nothing could match it);
//  - which exec owns a conditional node's body graph: body kernels arrive with correlation ID 0
//    and the body graph's id, and are handed back to the launch that ran them;
//  - which captured node each instantiated node was cloned from (graph_node_clone), fired again
//    when a consumer attaches later.
// Instantiation happens inside one API call on one thread: CLONED/CREATED events are gathered
// per thread until GRAPHEXEC_CREATED closes them into one exec. The execs by serial are
// GraphExecs (graph_execs.h), the clone mappings and the nodes on the way to announced captures
// GraphCloneMappings (graph_clone_mappings.h).
//
// Memory is bounded by what is live (issue 30): an exec's facts and clone mappings go when
// CUPTI says it is destroyed (GRAPHEXEC_DESTROY_STARTING; conditional execs' facts stay among the
// last kMaxRetiredExecs destroyed, their body kernels' records come later), and the nodes whose
// clones are fired live go with their graph (GRAPH_DESTROY_STARTING for a captured graph, the
// exec's destroy for its nodes). So the stores hold the live execs (at most kMaxExecs), their
// clone mappings (at most kMaxClones) and the wanted nodes of live graphs (at most
// kMaxWantedNodes): caps that only a program keeping that many graphs alive reaches, and what
// goes at a cap is counted (GraphStats) and said once.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>

#include "base/cupti_api.h"
#include "base/log.h"
#include "trackers/graph_clone_mappings.h"
#include "trackers/graph_execs.h"

namespace parcagpu {

struct GraphStats {
  uint64_t execs = 0;
  uint64_t clones = 0;
  uint64_t clones_not_fired = 0;   // of no announced capture: stored, fired only on re-firing
  uint64_t clones_not_stored = 0;  // beyond kMaxClones live: never re-fired to a late consumer
  uint64_t wanted_forgotten_at_cap = 0;  // kMaxWantedNodes: their later clones not fired live
  uint64_t execs_forgotten_at_cap = 0;   // kMaxExecs live: launches of them not told right
  uint64_t hostonly_launches = 0;        // not announced: no kernel could ever match
  uint64_t conditional_records = 0;      // correlation-0 records handed back to their launch
  uint64_t conditional_ambiguous = 0;    // ... owner guessed: queued launches of one exec
  uint64_t conditional_orphans = 0;      // ... with no known owner
  uint64_t conditional_unannounced = 0;  // ... of a launch the tracker refused: not delivered
  // Conditional execs destroyed while an announced launch of theirs was still awaiting kernels,
  // forgotten at kMaxRetiredExecs: those launches' body kernels are not delivered.
  uint64_t conditional_owners_forgotten = 0;
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
  // A graph (not an exec) is being destroyed: nothing will be instantiated from it any more, so
  // its nodes' clones need no watching.
  void on_graph_destroyed(const CUpti_GraphData *gd);
  // The clone mappings: note_capture_node at an announced capture, re-firing for a late
  // consumer (graph_clone_mappings.h).
  GraphCloneMappings &clones() { return clones_; }

  struct ExecFacts {
    bool known = false;
    bool has_conditional = false;
    uint32_t kernel_nodes = 0;
  };
  // The facts of an announced launch's exec, which is from now on known to be uploaded (a later
  // launch is not its first, take_first_launch). A known exec with neither kernels nor
  // conditional nodes (host functions only) is counted: its launch is not announced.
  ExecFacts on_launch(const void *exec);
  // True the first time it is asked for a live exec (any thread) not seen launched before: its
  // launch now is its first, which uploads it (docs/pc-sampling.md P19, P21). False for an exec
  // not known here.
  bool take_first_launch(const void *exec);
  // An announced launch of an exec with conditional nodes: the owner of its body kernels.
  // launch_ts: CUPTI's clock (cuptiGetTimestamp) at the launch, the clock of kernel records.
  void on_conditional_launch(const void *exec, uint32_t correlation_id, uint64_t launch_ts);
  // Whether any live exec has conditional nodes: the launch path asks before it looks further
  // at an unannounced graph launch (lock-free).
  bool conditional_execs_live() const { return execs_.conditional_live(); }
  // A launch not announced whose kernels kernel activity records (or may: `surely`: false): its
  // body kernels, which come with correlation ID 0 like an announced launch's, are its own, not
  // the announced launch before it's (issue 42: at the default rates the launch after an
  // announced one ran while activity was held on for it, and its kernels were handed to it).
  // False if `exec` is not a conditional exec known here.
  bool on_conditional_recorded(const void *exec, uint32_t correlation_id, uint64_t launch_ts,
                               bool surely);
  // A launch on_conditional_recorded surely recorded saw kernel activity switched during its
  // call: its kernels may not come.
  void on_conditional_maybe_unrecorded(const void *exec, uint32_t correlation_id);
  // That launch was not announced after all (the correlation tracker was full): its body kernels
  // still run after the launch before it and must not be handed to that one. Seen in a soak with
  // every launch announced: such a kernel, ended late (activity went off while it ran, as the
  // launch held none), was attributed to the previous launch and overlapped its stream's next
  // kernel (an impossible record).
  void on_conditional_unannounced(const void *exec, uint32_t correlation_id);
  // Retired conditional execs are kept while an announced launch of theirs is alive (its body
  // kernels' records may come after the destroy); the watcher lets go of the others here.
  template <typename Alive>
  void prune_retired(Alive alive);
  // Whether a correlation-0 record of a graph no exec is known for may have been an announced
  // launch's: only if graph IDs failed at instantiation, execs were forgotten at a cap, or an
  // announced launch's exec was not known. Otherwise it is a kernel of an exec none of whose
  // launches was announced (forgotten at its destroy): not a loss.
  bool owners_may_be_unknown() const { return owners_unknown_.load(std::memory_order_relaxed); }
  // The launch that owns a correlation-0 kernel record of graph `graph_id` that ran from
  // `start` to `end`; 0 if unknown. `alive` says whether a launch is still being tracked.
  // *unknown_graph (if given) tells why 0: no exec is known for the graph (its kernels cannot
  // be attributed at all: a loss) rather than no announced launch of it in flight.
  template <typename Alive>
  uint32_t conditional_owner(uint32_t graph_id, uint64_t start, uint64_t end, Alive alive,
                             bool *unknown_graph = nullptr);
  // Execs (live and retired) held: what the cap bounds.
  size_t execs_stored() const;
  GraphStats stats() const;

 private:
  using Exec = GraphExec;
  CUgraphNodeType node_type(const CUpti_GraphData *gd) const;
  void retire_locked(uint64_t serial);
  void add_open_launch_locked(Exec &e, const Exec::OpenLaunch &l);
  template <typename OpenLaunches>
  static size_t conditional_launch(const OpenLaunches &open, uint64_t start, bool *ambiguous);

  const CuptiApi &cupti_;
  const CudaApi *cuda_;
  mutable std::mutex mu_;
  GraphExecs execs_;
  GraphCloneMappings clones_;
  GraphStats stats_;
  std::atomic<bool> owners_unknown_{false};  // owners_may_be_unknown()
};

// Launches of one exec run one after the other, and a kernel cannot start before its launch was
// issued: the owner is the latest launch issued before the kernel started. That is certain only
// if the launch before it had finished by then; if it was still running (queued launches), the
// kernel may be the earlier launch's: a guess (*ambiguous). Returns its position + 1 in `open`,
// or 0 for a kernel that started before every launch in `open` was issued (launch times and
// kernel records are on CUPTI's one clock): it is an earlier launch's, one not announced (at
// the default rates most are not) or one given up already.
template <typename OpenLaunches>
size_t GraphTracker::conditional_launch(const OpenLaunches &open, uint64_t start, bool *ambiguous) {
  size_t k = open.size();
  while (k > 0 && open[k - 1].launch_ts > start) --k;
  // An earlier launch that has no kernel yet ran first (same exec: in order), so it takes this
  // one: queued launches all get kernels, though where one ends is then a guess.
  // (Not one whose kernels may never have been recorded: it would take every later one's.)
  for (size_t i = 0; i + 1 < k; ++i)
    if (open[i].last_end == 0 && !open[i].maybe_unrecorded) {
      k = i + 1;
      break;
    }
  if (k == 0) return 0;
  if (k >= 2) {
    const auto &prev = open[k - 2];
    *ambiguous = prev.last_end == 0 || prev.last_end >= open[k - 1].launch_ts;
  }
  return k;
}

template <typename Alive>
uint32_t GraphTracker::conditional_owner(uint32_t graph_id, uint64_t start, uint64_t end,
                                         Alive alive, bool *unknown_graph) {
  std::lock_guard<std::mutex> lock(mu_);
  Exec *e = execs_.by_graph(graph_id);
  if (unknown_graph) *unknown_graph = e == nullptr;
  if (!e) {
    if (stats_.conditional_orphans++ < 8)
      debug_log("correlation-0 kernel record of graph %u: no exec instantiated with that graph",
                graph_id);
    return 0;
  }
  auto &open = e->open_launches;
  // An announced launch goes when it is no longer tracked; an unannounced one once the launch
  // after it got a kernel (launches of one exec run in order: the GPU is past it).
  while (!open.empty() && (open.front().unannounced ? open.size() > 1 && open[1].last_end != 0
                                                    : !alive(open.front().correlation_id)))
    open.pop_front();
  if (open.empty()) {
    if (stats_.conditional_orphans++ < 8)
      debug_log("correlation-0 kernel record of graph %u: its exec has no launch in flight",
                graph_id);
    return 0;
  }
  ++stats_.conditional_records;
  bool ambiguous = false;
  const size_t k = conditional_launch(open, start, &ambiguous);
  if (k == 0) {
    --stats_.conditional_records;
    ++stats_.conditional_unannounced;
    return 0;  // started before every launch known here: an unannounced earlier one's
  }
  auto &owner = open[k - 1];
  if (end > owner.last_end) owner.last_end = end;
  // (Counted whichever launch is guessed: a guess may hand an announced launch's kernel to an
  // unannounced one, or the reverse.)
  const bool say_guess = ambiguous && stats_.conditional_ambiguous++ % 1000 == 0;
  if (owner.unannounced) {
    --stats_.conditional_records;
    ++stats_.conditional_unannounced;
    return 0;  // a kernel of an unannounced launch: nobody waits for it
  }
  if (say_guess)
    debug_log(
        "conditional kernel of graph %u: %zu launches of its exec are in flight and the "
        "earlier one may still have been running; attributed to correlation %u "
        "(%llu such records so far)",
        graph_id, open.size(), owner.correlation_id,
        static_cast<unsigned long long>(stats_.conditional_ambiguous));
  return owner.correlation_id;
}

template <typename Alive>
void GraphTracker::prune_retired(Alive alive) {
  std::lock_guard<std::mutex> lock(mu_);
  std::deque<uint64_t> kept;
  for (uint64_t serial : execs_.retired()) {
    Exec *e = execs_.find(serial);
    if (!e) continue;
    auto &open = e->open_launches;
    while (!open.empty() && !open.front().unannounced && !alive(open.front().correlation_id))
      open.pop_front();
    bool owns = false;
    for (const auto &l : open) owns = owns || (!l.unannounced && alive(l.correlation_id));
    if (owns)
      kept.push_back(serial);
    else
      execs_.forget(serial);
  }
  execs_.retired().swap(kept);
}

}  // namespace parcagpu
