// graph_node_clone mappings: fired live on the way to announced captures, stored per exec for
// re-firing (graph_clone_mappings.h).
#include "trackers/graph_clone_mappings.h"

#include "base/log.h"
#include "base/usdt.h"

namespace parcagpu {
namespace {

// Caps on what live graphs hold: reached only by a program that keeps that many alive at once.
// ~24 B a clone, ~100 B a wanted node: at most ~25 MB and ~7 MB.
constexpr size_t kMaxClones = 1 << 20;
constexpr size_t kMaxWantedNodes = 1 << 16;

// Losses at the caps, said at their first occurrence and counted (GraphStats too).
RepeatedError g_clone_cap("graphs", "graph node clones not stored (cap)");
RepeatedError g_wanted_cap("graphs", "wanted graph nodes forgotten (cap)", "nodes");

}  // namespace

bool GraphCloneMappings::on_clone(const GraphClone &c, size_t pending) {
  std::lock_guard<std::mutex> lock(mu_);
  if (wanted_nodes_.count(c.original_node)) {
    want_locked(c.exec_graph, c.cloned_node);
    usdt::graph_node_clone(c.original_node, c.cloned_node, c.exec_graph);
  } else {
    ++stats_.not_fired;
  }
  ++stats_.clones;
  // Stored with its exec (GRAPHEXEC_CREATED) for re-firing, while the live execs' mappings fit.
  if (stored_ + pending >= kMaxClones) {
    ++stats_.not_stored;
    g_clone_cap.report(kErrDataLost,
                       "%zu graph node clones of live graph execs stored: further ones are not "
                       "re-fired to a consumer that attaches later (counted as clones not stored)",
                       kMaxClones);
    return false;
  }
  return true;
}

void GraphCloneMappings::store(uint64_t exec_serial, std::vector<GraphClone> clones) {
  if (clones.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  stored_ += clones.size();
  by_exec_[exec_serial] = std::move(clones);
}

void GraphCloneMappings::drop(uint64_t exec_serial) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_exec_.find(exec_serial);
  if (it == by_exec_.end()) return;
  stored_ -= it->second.size();
  by_exec_.erase(it);
}

void GraphCloneMappings::note_capture_node(uint32_t graph_id, uint64_t node_id) {
  std::lock_guard<std::mutex> lock(mu_);
  want_locked(graph_id, node_id);
}

void GraphCloneMappings::want_locked(uint32_t graph_id, uint64_t node) {
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

void GraphCloneMappings::forget_graph(uint32_t graph_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto g = wanted_by_graph_.find(graph_id);
  if (g == wanted_by_graph_.end()) return;
  for (uint64_t node : g->second) {
    auto w = wanted_nodes_.find(node);
    if (w != wanted_nodes_.end() && w->second == graph_id) wanted_nodes_.erase(w);
  }
  wanted_by_graph_.erase(g);
}

void GraphCloneMappings::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  by_exec_.clear();
  stored_ = 0;
  wanted_nodes_.clear();
  wanted_by_graph_.clear();
}

void GraphCloneMappings::begin_refire() {
  std::lock_guard<std::mutex> lock(mu_);
  refire_serial_ = 0;
  refire_index_ = 0;
  // Execs stored later have higher serials: fired live to the new consumer already.
  refire_end_ = by_exec_.empty() ? 0 : by_exec_.rbegin()->first + 1;
  debug_log("a graph_node_clone consumer attached: re-firing %zu stored mappings of live execs",
            stored_);
}

size_t GraphCloneMappings::refire_some(size_t max) {
  std::vector<GraphClone> chunk;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Execs destroyed meanwhile are skipped (their mappings went with them), later ones were
    // fired live.
    for (auto it = by_exec_.lower_bound(refire_serial_);
         it != by_exec_.end() && it->first < refire_end_ && chunk.size() < max; ++it) {
      if (it->first != refire_serial_) refire_index_ = 0;
      refire_serial_ = it->first;
      const auto &clones = it->second;
      while (refire_index_ < clones.size() && chunk.size() < max)
        chunk.push_back(clones[refire_index_++]);
      if (refire_index_ == clones.size()) {
        refire_serial_ = it->first + 1;
        refire_index_ = 0;
      }
    }
    if (chunk.empty()) refire_serial_ = refire_end_;  // done
  }
  for (const GraphClone &c : chunk)
    usdt::graph_node_clone(c.original_node, c.cloned_node, c.exec_graph);
  return chunk.size();
}

GraphCloneStats GraphCloneMappings::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  GraphCloneStats s = stats_;
  s.stored = stored_;
  s.wanted = wanted_nodes_.size();
  return s;
}

}  // namespace parcagpu
