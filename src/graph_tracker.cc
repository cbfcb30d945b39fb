#include "graph_tracker.h"

#include <algorithm>
#include <string>

#include "log.h"
#include "usdt.h"

namespace parcagpu {
namespace {

constexpr size_t kMaxClones = 1 << 20;
constexpr size_t kMaxExecs = 1 << 16;
constexpr size_t kMaxOpenLaunches = 64;
constexpr size_t kMaxRetiredExecs = 1024;

// The instantiation in progress on this thread (between its first CLONED and GRAPHEXEC_CREATED).
struct PendingInstantiation {
  bool open = false;
  uint32_t kernel_nodes = 0;
  bool has_conditional = false;
  std::vector<uint32_t> graph_ids;
};
thread_local PendingInstantiation t_pending;

void add_unique(std::vector<uint32_t> *v, uint32_t id) {
  if (id != 0 && std::find(v->begin(), v->end(), id) == v->end()) v->push_back(id);
}

}  // namespace

CUgraphNodeType GraphTracker::node_type(const CUpti_GraphData *gd) const {
  // CUPTI 13 leaves GraphData.nodeType 0 (KERNEL) in GRAPHNODE_CLONED: seen on the H100, where
  // a host-only graph's node came through as a kernel. The driver knows.
  CUgraphNodeType type = gd->nodeType;
  if (cuda_ && gd->node) cuda_->cuGraphNodeGetType(gd->node, &type);
  return type;
}

void GraphTracker::on_node_created(const CUpti_GraphData *gd) {
  // Outside an instantiation this is graph building (cudaGraphAddKernelNode): nothing to keep.
  // Inside one, it is a node of a body graph being instantiated.
  if (!t_pending.open || !gd || !gd->graph) return;
  uint32_t id = 0;
  if (cupti_.cuptiGetGraphId(gd->graph, &id) == CUPTI_SUCCESS) add_unique(&t_pending.graph_ids, id);
  const CUgraphNodeType type = node_type(gd);
  if (type == CU_GRAPH_NODE_TYPE_CONDITIONAL) t_pending.has_conditional = true;
  debug_log("instantiation: node created in graph %u, type %d", id, static_cast<int>(type));
}

void GraphTracker::on_node_cloned(const CUpti_GraphData *gd) {
  if (!gd) return;
  PendingInstantiation &p = t_pending;
  p.open = true;
  uint32_t graph_id = 0;
  if (gd->graph && cupti_.cuptiGetGraphId(gd->graph, &graph_id) == CUPTI_SUCCESS)
    add_unique(&p.graph_ids, graph_id);
  const CUgraphNodeType type = node_type(gd);
  if (type == CU_GRAPH_NODE_TYPE_KERNEL) ++p.kernel_nodes;
  if (type == CU_GRAPH_NODE_TYPE_CONDITIONAL) p.has_conditional = true;
  uint64_t original = 0, cloned = 0;
  if (gd->originalNode) cupti_.cuptiGetGraphNodeId(gd->originalNode, &original);
  if (gd->node) cupti_.cuptiGetGraphNodeId(gd->node, &cloned);
  uint32_t original_graph = 0;
  if (gd->originalGraph) cupti_.cuptiGetGraphId(gd->originalGraph, &original_graph);
  debug_log("instantiation: node %llu of graph %u cloned as %llu into graph %u, type %d",
            static_cast<unsigned long long>(original), original_graph,
            static_cast<unsigned long long>(cloned), graph_id, static_cast<int>(type));
  // Without node ids (a CUPTI lacking cuptiGetGraphNodeId) a clone links nothing to nothing.
  if (!cupti_.available(cupti_.cuptiGetGraphNodeId)) return;
  usdt::graph_node_clone(original, cloned, graph_id);
  std::lock_guard<std::mutex> lock(mu_);
  if (clones_.size() >= kMaxClones) clones_.erase(clones_.begin(), clones_.begin() + kMaxClones / 2);
  clones_.push_back({original, cloned, graph_id});
  ++stats_.clones;
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
  if (live_execs_.size() >= kMaxExecs) {
    // Pathological churn without destroys: start over rather than grow.
    live_execs_.clear();
    execs_.clear();
    retired_.clear();
    graph_to_exec_.clear();
  }
  const uint64_t serial = next_serial_++;
  auto old = live_execs_.find(gd->graphExec);
  if (old != live_execs_.end()) retire_locked(old->second);  // handle reused without a destroy
  for (uint32_t id : e.graph_ids) graph_to_exec_[id] = serial;
  live_execs_[gd->graphExec] = serial;
  execs_[serial] = std::move(e);
  ++stats_.execs;
}

void GraphTracker::retire_locked(uint64_t serial) {
  retired_.push_back(serial);
  while (retired_.size() > kMaxRetiredExecs) {
    const uint64_t gone = retired_.front();
    retired_.pop_front();
    auto it = execs_.find(gone);
    if (it == execs_.end()) continue;
    for (uint32_t id : it->second.graph_ids) {
      auto g = graph_to_exec_.find(id);
      if (g != graph_to_exec_.end() && g->second == gone) graph_to_exec_.erase(g);
    }
    execs_.erase(it);
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

GraphTracker::ExecFacts GraphTracker::facts(const void *exec) const {
  ExecFacts f;
  std::lock_guard<std::mutex> lock(mu_);
  auto live = live_execs_.find(exec);
  if (live == live_execs_.end()) return f;
  auto it = execs_.find(live->second);
  if (it == execs_.end()) return f;
  f.known = true;
  f.has_conditional = it->second.has_conditional;
  f.kernel_nodes = it->second.kernel_nodes;
  return f;
}

void GraphTracker::on_conditional_launch(const void *exec, uint32_t correlation_id,
                                         uint64_t launch_ts) {
  std::lock_guard<std::mutex> lock(mu_);
  auto live = live_execs_.find(exec);
  if (live == live_execs_.end()) return;
  auto it = execs_.find(live->second);
  if (it == execs_.end()) return;
  auto &open = it->second.open_launches;
  if (open.size() >= kMaxOpenLaunches) open.pop_front();
  open.push_back({correlation_id, launch_ts});
}

void GraphTracker::count_hostonly_launch() {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.hostonly_launches;
}

void GraphTracker::refire_clones() {
  std::vector<Clone> copy;
  {
    std::lock_guard<std::mutex> lock(mu_);
    copy = clones_;
  }
  for (const Clone &c : copy) usdt::graph_node_clone(c.original_node, c.cloned_node, c.exec_graph);
}

GraphStats GraphTracker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace parcagpu
