#include "graph_tracker.h"

#include <algorithm>
#include <string>

#include "log.h"
#include "usdt.h"

namespace parcagpu {
namespace {

constexpr size_t kMaxClones = 1 << 20;
constexpr size_t kMaxWantedNodes = 1 << 16;
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

RepeatedError g_graph_id_failed("graphs", "cuptiGetGraphId failed at instantiation");
RepeatedError g_node_id_failed("graphs", "cuptiGetGraphNodeId failed at instantiation");
RepeatedError g_node_type_failed("graphs", "cuGraphNodeGetType failed");

void graph_id_failed(const CuptiApi &cupti, CUptiResult r) {
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
    graph_id_failed(cupti_, r);
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
      graph_id_failed(cupti_, r);
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
    want_locked(cloned);
    usdt::graph_node_clone(original, cloned, graph_id);
  } else {
    ++stats_.clones_not_fired;
  }
  if (clones_.size() >= kMaxClones) {
    clones_.erase(clones_.begin(), clones_.begin() + kMaxClones / 2);
    clone_seq_base_ += kMaxClones / 2;
  }
  clones_.push_back({original, cloned, graph_id});
  ++stats_.clones;
}

void GraphTracker::note_capture_node(uint64_t node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  want_locked(node_id);
}

void GraphTracker::want_locked(uint64_t node) {
  const uint64_t seq = ++wanted_seq_;
  wanted_nodes_[node] = seq;
  wanted_order_.emplace_back(node, seq);
  while (wanted_order_.size() > kMaxWantedNodes) {
    const auto [old, old_seq] = wanted_order_.front();
    wanted_order_.pop_front();
    if (auto it = wanted_nodes_.find(old); it != wanted_nodes_.end() && it->second == old_seq)
      wanted_nodes_.erase(it);
  }
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
  auto forget = [this](uint64_t gone) {
    auto it = execs_.find(gone);
    if (it == execs_.end()) return;
    for (uint32_t id : it->second.graph_ids) {
      auto g = graph_to_exec_.find(id);
      if (g != graph_to_exec_.end() && g->second == gone) graph_to_exec_.erase(g);
    }
    execs_.erase(it);
  };
  // Only conditional execs are needed after their destroy (their body kernels' records come
  // later); the others go at once, so the retired budget is theirs under heavy exec churn.
  auto it = execs_.find(serial);
  if (it != execs_.end() && !it->second.has_conditional) return forget(serial);
  retired_.push_back(serial);
  while (retired_.size() > kMaxRetiredExecs) {
    const uint64_t gone = retired_.front();
    retired_.pop_front();
    forget(gone);
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
  if (live == live_execs_.end()) return f;
  auto it = execs_.find(live->second);
  if (it == execs_.end()) return f;
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

void GraphTracker::begin_refire() {
  std::lock_guard<std::mutex> lock(mu_);
  refire_next_ = clone_seq_base_;
  refire_end_ = clone_seq_base_ + clones_.size();
  debug_log("a graph_node_clone consumer attached: re-firing %llu stored mappings",
            static_cast<unsigned long long>(refire_end_ - refire_next_));
}

size_t GraphTracker::clones_stored() const {
  std::lock_guard<std::mutex> lock(mu_);
  return clones_.size();
}

size_t GraphTracker::refire_some(size_t max) {
  std::vector<Clone> chunk;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (refire_next_ < clone_seq_base_) refire_next_ = clone_seq_base_;  // the oldest went
    if (refire_next_ >= refire_end_) return 0;
    const uint64_t n = std::min<uint64_t>(max, refire_end_ - refire_next_);
    const auto first =
        clones_.begin() + static_cast<std::ptrdiff_t>(refire_next_ - clone_seq_base_);
    chunk.assign(first, first + static_cast<std::ptrdiff_t>(n));
    refire_next_ += n;
  }
  for (const Clone &c : chunk) usdt::graph_node_clone(c.original_node, c.cloned_node, c.exec_graph);
  return chunk.size();
}

GraphStats GraphTracker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace parcagpu
