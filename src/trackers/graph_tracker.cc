#include "trackers/graph_tracker.h"

#include <algorithm>
#include <string>

#include "base/log.h"

namespace parcagpu {
namespace {

// Caps on what live graphs hold (graph_tracker.h; the clone mappings' are
// graph_clone_mappings.cc): reached only by a program that keeps that many alive at once.
constexpr size_t kMaxExecs = 1 << 16;
constexpr size_t kMaxOpenLaunches = 256;
// Destroyed conditional execs with announced launches awaiting kernels: no more than the
// correlation tracker holds launches (PARCAGPU_MAX_OUTSTANDING's default).
constexpr size_t kMaxRetiredExecs = 16384;

// The instantiation in progress on this thread (between its first CLONED and GRAPHEXEC_CREATED).
struct PendingInstantiation {
  bool open = false;
  uint32_t kernel_nodes = 0;
  bool has_conditional = false;
  std::vector<uint32_t> graph_ids;
  std::vector<GraphClone> clones;
};
thread_local PendingInstantiation t_pending;

RepeatedError g_graph_id_failed("graphs", "cuptiGetGraphId failed at instantiation");
RepeatedError g_node_id_failed("graphs", "cuptiGetGraphNodeId failed at instantiation");
RepeatedError g_node_type_failed("graphs", "cuGraphNodeGetType failed");
// Losses at the caps, said at their first occurrence and counted (GraphStats too).
RepeatedError g_exec_cap("graphs", "graph execs forgotten (cap)", "execs");
RepeatedError g_retired_cap("graphs", "destroyed conditional execs forgotten with launches (cap)",
                            "execs");

void graph_id_failed(const CuptiApi &cupti, CUptiResult r, std::atomic<bool> *owners_unknown) {
  owners_unknown->store(true, std::memory_order_relaxed);
  if (!cupti.available(cupti.cuptiGetGraphId)) return;  // reported once at start
  g_graph_id_failed.report(r,
                           "cuptiGetGraphId failed at instantiation: %s; kernels of the "
                           "conditional bodies of such graphs cannot be handed to their launch "
                           "and are not delivered",
                           cupti_result_string(cupti, r));
}

void add_unique(std::vector<uint32_t> *v, uint32_t id) {
  if (id != 0 && std::find(v->begin(), v->end(), id) == v->end()) v->push_back(id);
}

}  // namespace

CUgraphNodeType GraphTracker::node_type(const CUpti_GraphData *gd) const {
  // CUPTI 13 leaves GraphData.nodeType 0 (KERNEL) in GRAPHNODE_CLONED: seen on the H100, where
  // a host-only graph's node came through as a kernel. The driver knows.
  CUgraphNodeType type = gd->nodeType;
  if (cuda_ && gd->node) {
    CUgraphNodeType asked = type;
    if (const CUresult r = cuda_->cuGraphNodeGetType(gd->node, &asked); r == CUDA_SUCCESS)
      type = asked;
    else
      g_node_type_failed.report(kErrDriver,
                                "cuGraphNodeGetType failed (CUresult %d); node types come from "
                                "CUPTI, which reports cloned nodes as kernels: launches of "
                                "host-only graphs may be announced without kernels and "
                                "conditional graphs not recognised",
                                static_cast<int>(r));
  }
  return type;
}

void GraphTracker::on_node_created(const CUpti_GraphData *gd) {
  // Outside an instantiation this is graph building (cudaGraphAddKernelNode): nothing to keep.
  // Inside one, it is a node of a body graph being instantiated.
  if (!t_pending.open || !gd || !gd->graph) return;
  uint32_t id = 0;
  if (const CUptiResult r = cupti_.cuptiGetGraphId(gd->graph, &id); r == CUPTI_SUCCESS)
    add_unique(&t_pending.graph_ids, id);
  else
    graph_id_failed(cupti_, r, &owners_unknown_);
  const CUgraphNodeType type = node_type(gd);
  if (type == CU_GRAPH_NODE_TYPE_CONDITIONAL) t_pending.has_conditional = true;
  debug_log("instantiation: node created in graph %u, type %d", id, static_cast<int>(type));
}

void GraphTracker::on_node_cloned(const CUpti_GraphData *gd) {
  if (!gd) return;
  PendingInstantiation &p = t_pending;
  p.open = true;
  uint32_t graph_id = 0;
  if (gd->graph) {
    if (const CUptiResult r = cupti_.cuptiGetGraphId(gd->graph, &graph_id); r == CUPTI_SUCCESS)
      add_unique(&p.graph_ids, graph_id);
    else
      graph_id_failed(cupti_, r, &owners_unknown_);
  }
  const CUgraphNodeType type = node_type(gd);
  if (type == CU_GRAPH_NODE_TYPE_KERNEL) ++p.kernel_nodes;
  if (type == CU_GRAPH_NODE_TYPE_CONDITIONAL) p.has_conditional = true;
  uint64_t original = 0, cloned = 0;
  CUptiResult ir = CUPTI_SUCCESS;
  if (gd->originalNode) ir = cupti_.cuptiGetGraphNodeId(gd->originalNode, &original);
  if (ir == CUPTI_SUCCESS && gd->node) ir = cupti_.cuptiGetGraphNodeId(gd->node, &cloned);
  if (ir != CUPTI_SUCCESS && cupti_.available(cupti_.cuptiGetGraphNodeId))
    g_node_id_failed.report(ir,
                            "cuptiGetGraphNodeId failed at instantiation: %s; graph_node_clone "
                            "carries node 0 for such nodes (their kernels cannot be mapped "
                            "to the captured node)",
                            cupti_result_string(cupti_, ir));
  uint32_t original_graph = 0;
  if (gd->originalGraph) cupti_.cuptiGetGraphId(gd->originalGraph, &original_graph);
  debug_log("instantiation: node %llu of graph %u cloned as %llu into graph %u, type %d",
            static_cast<unsigned long long>(original), original_graph,
            static_cast<unsigned long long>(cloned), graph_id, static_cast<int>(type));
  // Without node ids (a CUPTI lacking cuptiGetGraphNodeId) a clone links nothing to nothing.
  if (!cupti_.available(cupti_.cuptiGetGraphNodeId)) return;
  const GraphClone clone{original, cloned, graph_id};
  if (clones_.on_clone(clone, p.clones.size())) p.clones.push_back(clone);
}

void GraphTracker::on_graph_destroyed(const CUpti_GraphData *gd) {
  if (!gd || !gd->graph) return;
  uint32_t id = 0;
  if (cupti_.cuptiGetGraphId(gd->graph, &id) != CUPTI_SUCCESS) return;
  clones_.forget_graph(id);
}

void GraphTracker::on_exec_created(const CUpti_GraphData *gd) {
  PendingInstantiation p = std::move(t_pending);
  t_pending = PendingInstantiation{};
  if (!gd || !gd->graphExec) return;
  Exec e;
  e.kernel_nodes = p.kernel_nodes;
  e.has_conditional = p.has_conditional;
  e.graph_ids = std::move(p.graph_ids);
  std::string ids;
  for (uint32_t id : e.graph_ids) ids += " " + std::to_string(id);
  uint32_t exec_id = 0;
  cupti_.cuptiGetGraphExecId(gd->graphExec, &exec_id);
  debug_log("graph exec %p (id %u) instantiated: %u kernel nodes%s, graphs seen:%s",
            (void *)gd->graphExec, exec_id, e.kernel_nodes,
            e.has_conditional ? ", conditional" : "", ids.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  if (execs_.live_count() >= kMaxExecs) {
    // So many execs alive (or never destroyed): start over rather than grow. Launches of the
    // forgotten ones are told as unknown execs (announced, their kernels counted as they come).
    stats_.execs_forgotten_at_cap += execs_.stored();
    owners_unknown_.store(true, std::memory_order_relaxed);
    g_exec_cap.report_n(execs_.stored(), kErrDataLost,
                        "%zu graph execs alive: their facts are forgotten (conditional body "
                        "kernels of them are not delivered, host-only ones are announced)",
                        kMaxExecs);
    execs_.clear();
    clones_.clear();
  }
  // A handle reused without a destroy: the exec live under it is retired first.
  if (const uint64_t old = execs_.live_serial(gd->graphExec)) retire_locked(old);
  clones_.store(execs_.add(gd->graphExec, std::move(e)), std::move(p.clones));
  ++stats_.execs;
}

void GraphTracker::retire_locked(uint64_t serial) {
  // A destroyed exec runs nothing more: its mappings are of no use to a consumer attaching
  // later, and no node of it will be cloned again.
  Exec *e = execs_.find(serial);
  if (!e) return;
  execs_.retiring(*e);
  clones_.drop(serial);
  for (uint32_t id : e->graph_ids) clones_.forget_graph(id);
  // Only a conditional exec with an announced launch awaiting kernels is needed after its
  // destroy (its body kernels' records come later, issue 42: under exec churn a ring of the last
  // destroyed ones lost them before the flush); the others go at once. A record of an exec
  // forgotten so is of a launch not announced. Kept ones go in prune_retired.
  if (!e->has_conditional || !e->owns_announced()) return execs_.forget(serial);
  std::deque<uint64_t> &retired = execs_.retired();
  retired.push_back(serial);
  while (retired.size() > kMaxRetiredExecs) {
    const uint64_t gone = retired.front();
    retired.pop_front();
    const Exec *g = execs_.find(gone);
    if (g && g->owns_announced()) {
      ++stats_.conditional_owners_forgotten;
      owners_unknown_.store(true, std::memory_order_relaxed);
      g_retired_cap.report(kErrDataLost,
                           "%zu destroyed conditional graph execs with announced launches "
                           "awaiting kernels: the oldest is forgotten, its launches' body "
                           "kernels are not delivered",
                           kMaxRetiredExecs);
    }
    execs_.forget(gone);
  }
}

void GraphTracker::on_exec_destroyed(const CUpti_GraphData *gd) {
  if (!gd || !gd->graphExec) return;
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t serial = execs_.live_serial(gd->graphExec);
  if (serial == 0) return;
  // Its kernels may still be in flight or in an unflushed buffer: keep the facts a while.
  retire_locked(serial);
  execs_.unlive(gd->graphExec);
}

GraphTracker::ExecFacts GraphTracker::on_launch(const void *exec) {
  ExecFacts f;
  std::lock_guard<std::mutex> lock(mu_);
  Exec *e = execs_.live(exec);
  if (!e) {
    // An announced launch of an exec not known here: if it has conditional nodes, their
    // kernels' graph is not known either.
    owners_unknown_.store(true, std::memory_order_relaxed);
    return f;
  }
  e->launched = true;
  f.known = true;
  f.has_conditional = e->has_conditional;
  f.kernel_nodes = e->kernel_nodes;
  if (f.kernel_nodes == 0 && !f.has_conditional) ++stats_.hostonly_launches;
  return f;
}

bool GraphTracker::take_first_launch(const void *exec) {
  std::lock_guard<std::mutex> lock(mu_);
  Exec *e = execs_.live(exec);
  if (!e || e->launched) return false;
  e->launched = true;
  return true;
}

// Launches of unannounced entries whose successor got a kernel are done (launches of one exec run
// in order); at the cap the oldest goes.
void GraphTracker::add_open_launch_locked(Exec &e, const Exec::OpenLaunch &l) {
  auto &open = e.open_launches;
  for (size_t i = 0; i + 1 < open.size();) {
    if (open[i].unannounced && open[i + 1].last_end != 0)
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  }
  if (open.size() >= kMaxOpenLaunches) open.pop_front();
  // In launch order, which threads launching one exec at once may not call in.
  auto at = open.end();
  while (at != open.begin() && (at - 1)->launch_ts > l.launch_ts) --at;
  open.insert(at, l);
}

void GraphTracker::on_conditional_launch(const void *exec, uint32_t correlation_id,
                                         uint64_t launch_ts) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Exec *e = execs_.live(exec)) add_open_launch_locked(*e, {correlation_id, launch_ts});
}

bool GraphTracker::on_conditional_recorded(const void *exec, uint32_t correlation_id,
                                           uint64_t launch_ts, bool surely) {
  std::lock_guard<std::mutex> lock(mu_);
  Exec *e = execs_.live(exec);
  if (!e || !e->has_conditional) return false;
  Exec::OpenLaunch l{correlation_id, launch_ts};
  l.unannounced = true;
  l.maybe_unrecorded = !surely;
  add_open_launch_locked(*e, l);
  return true;
}

void GraphTracker::on_conditional_maybe_unrecorded(const void *exec, uint32_t correlation_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Exec *e = execs_.live(exec))
    for (auto &l : e->open_launches)
      if (l.correlation_id == correlation_id) l.maybe_unrecorded = true;
}

void GraphTracker::on_conditional_unannounced(const void *exec, uint32_t correlation_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Exec *e = execs_.live(exec))
    for (auto &l : e->open_launches)
      if (l.correlation_id == correlation_id) l.unannounced = true;
}

size_t GraphTracker::execs_stored() const {
  std::lock_guard<std::mutex> lock(mu_);
  return execs_.stored();
}

GraphStats GraphTracker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  GraphStats s = stats_;
  const GraphCloneStats c = clones_.stats();
  s.clones = c.clones;
  s.clones_not_fired = c.not_fired;
  s.clones_not_stored = c.not_stored;
  s.wanted_forgotten_at_cap = c.wanted_forgotten_at_cap;
  return s;
}

}  // namespace parcagpu
