#include "trackers/graph_tracker.h"

#include <algorithm>
#include <string>

#include "base/log.h"
#include "base/usdt.h"

namespace parcagpu {
namespace {

// Caps on what live graphs hold (graph_tracker.h): reached only by a program that keeps that
// many alive at once. ~24 B a clone, ~100 B a wanted node: at most ~25 MB and ~7 MB.
constexpr size_t kMaxClones = 1 << 20;
constexpr size_t kMaxWantedNodes = 1 << 16;
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
RepeatedError g_clone_cap("graphs", "graph node clones not stored (cap)");
RepeatedError g_wanted_cap("graphs", "wanted graph nodes forgotten (cap)", "nodes");
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
  std::lock_guard<std::mutex> lock(mu_);
  if (wanted_nodes_.count(original)) {
    want_locked(graph_id, cloned);
    usdt::graph_node_clone(original, cloned, graph_id);
  } else {
    ++stats_.clones_not_fired;
  }
  ++stats_.clones;
  // Stored with its exec (GRAPHEXEC_CREATED) for re-firing, while the live execs' mappings fit.
  if (clones_stored_ + p.clones.size() >= kMaxClones) {
    ++stats_.clones_not_stored;
    g_clone_cap.report(kErrDataLost,
                       "%zu graph node clones of live graph execs stored: further ones are not "
                       "re-fired to a consumer that attaches later (counted as clones not stored)",
                       kMaxClones);
    return;
  }
  p.clones.push_back({original, cloned, graph_id});
}

void GraphTracker::note_capture_node(uint32_t graph_id, uint64_t node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  want_locked(graph_id, node_id);
}

void GraphTracker::want_locked(uint32_t graph_id, uint64_t node) {
  if (wanted_nodes_.size() >= kMaxWantedNodes) {
    // So many live graphs with announced captures: start over rather than grow.
    stats_.wanted_forgotten_at_cap += wanted_nodes_.size();
    g_wanted_cap.report_n(wanted_nodes_.size(), kErrDataLost,
                          "%zu graph nodes on the way to announced captures held by live graphs: "
                          "forgotten, their later clones are not fired live (graph kernels "
                          "without a capture site)",
                          kMaxWantedNodes);
    wanted_nodes_.clear();
    wanted_by_graph_.clear();
  }
  if (wanted_nodes_.emplace(node, graph_id).second) wanted_by_graph_[graph_id].push_back(node);
}

void GraphTracker::forget_wanted_locked(uint32_t graph_id) {
  auto g = wanted_by_graph_.find(graph_id);
  if (g == wanted_by_graph_.end()) return;
  for (uint64_t node : g->second) {
    auto w = wanted_nodes_.find(node);
    if (w != wanted_nodes_.end() && w->second == graph_id) wanted_nodes_.erase(w);
  }
  wanted_by_graph_.erase(g);
}

void GraphTracker::on_graph_destroyed(const CUpti_GraphData *gd) {
  if (!gd || !gd->graph) return;
  uint32_t id = 0;
  if (cupti_.cuptiGetGraphId(gd->graph, &id) != CUPTI_SUCCESS) return;
  std::lock_guard<std::mutex> lock(mu_);
  forget_wanted_locked(id);
}

void GraphTracker::on_exec_created(const CUpti_GraphData *gd) {
  PendingInstantiation p = std::move(t_pending);
  t_pending = PendingInstantiation{};
  if (!gd || !gd->graphExec) return;
  Exec e;
  e.kernel_nodes = p.kernel_nodes;
  e.has_conditional = p.has_conditional;
  e.graph_ids = std::move(p.graph_ids);
  e.clones = std::move(p.clones);
  std::string ids;
  for (uint32_t id : e.graph_ids) ids += " " + std::to_string(id);
  uint32_t exec_id = 0;
  cupti_.cuptiGetGraphExecId(gd->graphExec, &exec_id);
  debug_log("graph exec %p (id %u) instantiated: %u kernel nodes%s, graphs seen:%s",
            (void *)gd->graphExec, exec_id, e.kernel_nodes,
            e.has_conditional ? ", conditional" : "", ids.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  if (live_execs_.size() >= kMaxExecs) {
    // So many execs alive (or never destroyed): start over rather than grow. Launches of the
    // forgotten ones are told as unknown execs (announced, their kernels counted as they come).
    stats_.execs_forgotten_at_cap += execs_.size();
    owners_unknown_.store(true, std::memory_order_relaxed);
    g_exec_cap.report_n(execs_.size(), kErrDataLost,
                        "%zu graph execs alive: their facts are forgotten (conditional body "
                        "kernels of them are not delivered, host-only ones are announced)",
                        kMaxExecs);
    live_execs_.clear();
    conditional_live_.store(0, std::memory_order_relaxed);
    execs_.clear();
    retired_.clear();
    graph_to_exec_.clear();
    wanted_nodes_.clear();
    wanted_by_graph_.clear();
    clones_stored_ = 0;
  }
  clones_stored_ += e.clones.size();
  const uint64_t serial = next_serial_++;
  auto old = live_execs_.find(gd->graphExec);
  if (old != live_execs_.end()) retire_locked(old->second);  // handle reused without a destroy
  for (uint32_t id : e.graph_ids) graph_to_exec_[id] = serial;
  live_execs_[gd->graphExec] = serial;
  if (e.has_conditional) conditional_live_.fetch_add(1, std::memory_order_relaxed);
  execs_[serial] = std::move(e);
  ++stats_.execs;
}

void GraphTracker::forget_locked(uint64_t serial) {
  auto it = execs_.find(serial);
  if (it == execs_.end()) return;
  for (uint32_t id : it->second.graph_ids) {
    auto g = graph_to_exec_.find(id);
    if (g != graph_to_exec_.end() && g->second == serial) graph_to_exec_.erase(g);
  }
  clones_stored_ -= it->second.clones.size();
  execs_.erase(it);
}

void GraphTracker::retire_locked(uint64_t serial) {
  // A destroyed exec runs nothing more: its mappings are of no use to a consumer attaching
  // later, and no node of it will be cloned again.
  auto it = execs_.find(serial);
  if (it == execs_.end()) return;
  if (it->second.has_conditional) conditional_live_.fetch_sub(1, std::memory_order_relaxed);
  clones_stored_ -= it->second.clones.size();
  std::vector<Clone>().swap(it->second.clones);
  for (uint32_t id : it->second.graph_ids) forget_wanted_locked(id);
  // Only a conditional exec with an announced launch awaiting kernels is needed after its
  // destroy (its body kernels' records come later, issue 42: under exec churn a ring of the last
  // destroyed ones lost them before the flush); the others go at once. A record of an exec
  // forgotten so is of a launch not announced. Kept ones go in prune_retired.
  if (!it->second.has_conditional || !it->second.owns_announced()) return forget_locked(serial);
  retired_.push_back(serial);
  while (retired_.size() > kMaxRetiredExecs) {
    const uint64_t gone = retired_.front();
    retired_.pop_front();
    auto g = execs_.find(gone);
    if (g != execs_.end() && g->second.owns_announced()) {
      ++stats_.conditional_owners_forgotten;
      owners_unknown_.store(true, std::memory_order_relaxed);
      g_retired_cap.report(kErrDataLost,
                           "%zu destroyed conditional graph execs with announced launches "
                           "awaiting kernels: the oldest is forgotten, its launches' body "
                           "kernels are not delivered",
                           kMaxRetiredExecs);
    }
    forget_locked(gone);
  }
}

void GraphTracker::on_exec_destroyed(const CUpti_GraphData *gd) {
  if (!gd || !gd->graphExec) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_execs_.find(gd->graphExec);
  if (it == live_execs_.end()) return;
  // Its kernels may still be in flight or in an unflushed buffer: keep the facts a while.
  retire_locked(it->second);
  live_execs_.erase(it);
}

GraphTracker::ExecFacts GraphTracker::on_launch(const void *exec) {
  ExecFacts f;
  std::lock_guard<std::mutex> lock(mu_);
  auto live = live_execs_.find(exec);
  auto it = live == live_execs_.end() ? execs_.end() : execs_.find(live->second);
  if (it == execs_.end()) {
    // An announced launch of an exec not known here: if it has conditional nodes, their
    // kernels' graph is not known either.
    owners_unknown_.store(true, std::memory_order_relaxed);
    return f;
  }
  it->second.launched = true;
  f.known = true;
  f.has_conditional = it->second.has_conditional;
  f.kernel_nodes = it->second.kernel_nodes;
  return f;
}

bool GraphTracker::take_first_launch(const void *exec) {
  std::lock_guard<std::mutex> lock(mu_);
  auto live = live_execs_.find(exec);
  if (live == live_execs_.end()) return false;
  auto it = execs_.find(live->second);
  if (it == execs_.end() || it->second.launched) return false;
  it->second.launched = true;
  return true;
}

GraphTracker::Exec *GraphTracker::live_exec_locked(const void *exec) {
  auto live = live_execs_.find(exec);
  if (live == live_execs_.end()) return nullptr;
  auto it = execs_.find(live->second);
  return it == execs_.end() ? nullptr : &it->second;
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
  if (Exec *e = live_exec_locked(exec)) add_open_launch_locked(*e, {correlation_id, launch_ts});
}

bool GraphTracker::on_conditional_recorded(const void *exec, uint32_t correlation_id,
                                           uint64_t launch_ts, bool surely) {
  std::lock_guard<std::mutex> lock(mu_);
  Exec *e = live_exec_locked(exec);
  if (!e || !e->has_conditional) return false;
  Exec::OpenLaunch l{correlation_id, launch_ts};
  l.unannounced = true;
  l.maybe_unrecorded = !surely;
  add_open_launch_locked(*e, l);
  return true;
}

void GraphTracker::on_conditional_maybe_unrecorded(const void *exec, uint32_t correlation_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Exec *e = live_exec_locked(exec))
    for (auto &l : e->open_launches)
      if (l.correlation_id == correlation_id) l.maybe_unrecorded = true;
}

void GraphTracker::on_conditional_unannounced(const void *exec, uint32_t correlation_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (Exec *e = live_exec_locked(exec))
    for (auto &l : e->open_launches)
      if (l.correlation_id == correlation_id) l.unannounced = true;
}

void GraphTracker::count_hostonly_launch() {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.hostonly_launches;
}

void GraphTracker::begin_refire() {
  std::lock_guard<std::mutex> lock(mu_);
  refire_serial_ = 0;
  refire_index_ = 0;
  refire_end_ = next_serial_;
  debug_log("a graph_node_clone consumer attached: re-firing %zu stored mappings of live execs",
            clones_stored_);
}

size_t GraphTracker::clones_stored() const {
  std::lock_guard<std::mutex> lock(mu_);
  return clones_stored_;
}

size_t GraphTracker::execs_stored() const {
  std::lock_guard<std::mutex> lock(mu_);
  return execs_.size();
}

size_t GraphTracker::wanted_stored() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wanted_nodes_.size();
}

size_t GraphTracker::refire_some(size_t max) {
  std::vector<Clone> chunk;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Execs destroyed meanwhile are skipped (their mappings went with them), later ones were
    // fired live.
    for (auto it = execs_.lower_bound(refire_serial_);
         it != execs_.end() && it->first < refire_end_ && chunk.size() < max; ++it) {
      if (it->first != refire_serial_) refire_index_ = 0;
      refire_serial_ = it->first;
      const auto &clones = it->second.clones;
      while (refire_index_ < clones.size() && chunk.size() < max)
        chunk.push_back(clones[refire_index_++]);
      if (refire_index_ == clones.size()) {
        refire_serial_ = it->first + 1;
        refire_index_ = 0;
      }
    }
    if (chunk.empty()) refire_serial_ = refire_end_;  // done
  }
  for (const Clone &c : chunk) usdt::graph_node_clone(c.original_node, c.cloned_node, c.exec_graph);
  return chunk.size();
}

GraphStats GraphTracker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace parcagpu
