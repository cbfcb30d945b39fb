// The graph execs GraphTracker knows, by serial (graph_execs.h).
#include "trackers/graph_execs.h"

#include <utility>

namespace parcagpu {

uint64_t GraphExecs::add(const void *handle, GraphExec e) {
  const uint64_t serial = next_serial_++;
  for (uint32_t id : e.graph_ids) graph_to_exec_[id] = serial;
  live_[handle] = serial;
  if (e.has_conditional) conditional_live_.fetch_add(1, std::memory_order_relaxed);
  execs_[serial] = std::move(e);
  return serial;
}

uint64_t GraphExecs::live_serial(const void *handle) const {
  auto it = live_.find(handle);
  return it == live_.end() ? 0 : it->second;
}

GraphExec *GraphExecs::live(const void *handle) {
  auto it = live_.find(handle);
  return it == live_.end() ? nullptr : find(it->second);
}

GraphExec *GraphExecs::find(uint64_t serial) {
  auto it = execs_.find(serial);
  return it == execs_.end() ? nullptr : &it->second;
}

GraphExec *GraphExecs::by_graph(uint32_t graph_id) {
  auto g = graph_to_exec_.find(graph_id);
  return g == graph_to_exec_.end() ? nullptr : find(g->second);
}

void GraphExecs::unlive(const void *handle) { live_.erase(handle); }

void GraphExecs::retiring(const GraphExec &e) {
  if (e.has_conditional) conditional_live_.fetch_sub(1, std::memory_order_relaxed);
}

void GraphExecs::forget(uint64_t serial) {
  auto it = execs_.find(serial);
  if (it == execs_.end()) return;
  for (uint32_t id : it->second.graph_ids) {
    auto g = graph_to_exec_.find(id);
    if (g != graph_to_exec_.end() && g->second == serial) graph_to_exec_.erase(g);
  }
  execs_.erase(it);
}

void GraphExecs::clear() {
  live_.clear();
  conditional_live_.store(0, std::memory_order_relaxed);
  execs_.clear();
  retired_.clear();
  graph_to_exec_.clear();
}

}  // namespace parcagpu
