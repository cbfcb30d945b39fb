// Re-firing stored graph_node_clone mappings for a late consumer: bounded chunks, nothing twice,
// nothing stored after the attach (those were fired live), nothing of a destroyed exec. And the
// tracker's stores bounded by what is live (issue 30): destroyed execs and graphs forgotten.
#include <gtest/gtest.h>

#include "graph_tracker.h"

namespace parcagpu {
namespace {

// Handles are their own IDs: a node handle 7 has node ID 7, a graph handle 9 graph ID 9.
CUptiResult CUPTIAPI node_id_of_handle(CUgraphNode node, uint64_t *id) {
  *id = reinterpret_cast<uintptr_t>(node);
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI graph_id_of_handle(CUgraph graph, uint32_t *id) {
  *id = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(graph));
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI exec_id_of_handle(CUgraphExec exec, uint32_t *id) {
  *id = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(exec));
  return CUPTI_SUCCESS;
}

CuptiApi cupti_with_ids() {
  CuptiApi api;
  api.cuptiGetGraphNodeId = &node_id_of_handle;
  api.cuptiGetGraphId = &graph_id_of_handle;
  api.cuptiGetGraphExecId = &exec_id_of_handle;
  return api;
}

void clone_node(GraphTracker &g, uintptr_t original, uintptr_t cloned, uintptr_t graph = 0) {
  CUpti_GraphData gd{};
  gd.originalNode = reinterpret_cast<CUgraphNode>(original);
  gd.node = reinterpret_cast<CUgraphNode>(cloned);
  gd.graph = reinterpret_cast<CUgraph>(graph);
  g.on_node_cloned(&gd);
}

void exec_event(GraphTracker &g, uintptr_t exec, bool created) {
  CUpti_GraphData gd{};
  gd.graphExec = reinterpret_cast<CUgraphExec>(exec);
  created ? g.on_exec_created(&gd) : g.on_exec_destroyed(&gd);
}

// An exec (handle and graph ID `exec`) instantiated with `n` clones of nodes original_base + i,
// cloned as exec << 20 | i.
void instantiate(GraphTracker &g, uintptr_t exec, int n, uintptr_t original_base = 1) {
  for (int i = 0; i < n; ++i) clone_node(g, original_base + i, exec << 20 | i, exec);
  exec_event(g, exec, true);
}

void destroy_graph(GraphTracker &g, uintptr_t graph) {
  CUpti_GraphData gd{};
  gd.graph = reinterpret_cast<CUgraph>(graph);
  g.on_graph_destroyed(&gd);
}

TEST(GraphRefire, InBoundedChunksUntilDone) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  instantiate(g, 1, 3000);
  instantiate(g, 2, 2000);
  EXPECT_EQ(g.refire_some(1024), 0u) << "nothing to re-fire before a consumer attached";
  g.begin_refire();
  std::vector<size_t> chunks;
  for (size_t n; (n = g.refire_some(1024)) > 0;) chunks.push_back(n);
  EXPECT_EQ(chunks, (std::vector<size_t>{1024, 1024, 1024, 1024, 904}));
}

TEST(GraphRefire, OnlyWhatWasStoredBeforeTheAttach) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  instantiate(g, 1, 100);
  g.begin_refire();
  EXPECT_EQ(g.refire_some(60), 60u);
  instantiate(g, 2, 50);  // fired live to the new consumer already
  EXPECT_EQ(g.refire_some(60), 40u);
  EXPECT_EQ(g.refire_some(60), 0u);
  EXPECT_EQ(g.clones_stored(), 150u);
  // Another consumer: everything stored again, from the start.
  g.begin_refire();
  size_t total = 0;
  for (size_t n; (n = g.refire_some(64)) > 0;) total += n;
  EXPECT_EQ(total, 150u);
}

TEST(GraphRefire, NothingOfAnExecDestroyedMeanwhile) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  instantiate(g, 1, 100);
  instantiate(g, 2, 100);
  instantiate(g, 3, 100);
  g.begin_refire();
  EXPECT_EQ(g.refire_some(50), 50u);  // half of exec 1
  exec_event(g, 1, false);
  exec_event(g, 2, false);
  size_t total = 0;
  for (size_t n; (n = g.refire_some(64)) > 0;) total += n;
  EXPECT_EQ(total, 100u) << "exec 3's mappings only";
  EXPECT_EQ(g.clones_stored(), 100u);
}

// Issue 30: only the clones of an announced capture (and their clones) are fired live; every
// clone is stored for re-firing as before.
TEST(GraphClones, FiredLiveOnlyOnTheWayToAnAnnouncedCapture) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  clone_node(g, 1, 2, 100);  // nothing announced behind node 1
  EXPECT_EQ(g.stats().clones_not_fired, 1u);
  g.note_capture_node(50, 1);
  clone_node(g, 1, 3, 100);  // fired
  clone_node(g, 3, 4, 100);  // a clone of that clone (a cloned graph instantiated): fired
  clone_node(g, 2, 5, 100);  // still nothing behind node 2
  exec_event(g, 100, true);
  EXPECT_EQ(g.stats().clones_not_fired, 2u);
  EXPECT_EQ(g.stats().clones, 4u);
  EXPECT_EQ(g.clones_stored(), 4u);
  EXPECT_EQ(g.wanted_stored(), 3u);  // 1, 3, 4
}

// Issue 30: a soak's mock app grew by 650 MB a minute, ~20 MB of it this tracker's clone store
// (capped at 2^20, never trimmed). What a destroyed exec or graph held goes with it.
TEST(GraphStores, BoundedByWhatIsLive) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  for (uintptr_t i = 1; i <= 20000; ++i) {
    const uintptr_t captured = 1000000 + i;  // the captured graph, its node captured << 8
    g.note_capture_node(static_cast<uint32_t>(captured), captured << 8);
    for (int k = 0; k < 3; ++k) clone_node(g, k == 0 ? captured << 8 : 7, i << 20 | k, i);
    exec_event(g, i, true);
    EXPECT_EQ(g.clones_stored(), 3u);
    EXPECT_EQ(g.wanted_stored(), 2u);  // the captured node and its clone
    exec_event(g, i, false);
    destroy_graph(g, captured);
  }
  EXPECT_EQ(g.clones_stored(), 0u);
  EXPECT_EQ(g.wanted_stored(), 0u);
  EXPECT_EQ(g.execs_stored(), 0u);
  EXPECT_EQ(g.stats().clones, 60000u);
  EXPECT_EQ(g.stats().clones_not_stored + g.stats().wanted_forgotten_at_cap +
                g.stats().execs_forgotten_at_cap,
            0u);
  // Live ones stay: a graph kept alive keeps its wanted node, a live exec its mappings.
  g.note_capture_node(5, 5 << 8);
  instantiate(g, 9, 2, 5 << 8);
  EXPECT_EQ(g.clones_stored(), 2u);
  EXPECT_EQ(g.wanted_stored(), 2u);  // 5 << 8 and its one clone
}

}  // namespace
}  // namespace parcagpu

namespace parcagpu {
namespace {

// A conditional exec (handle and graph 77, body graph 78) launched twice; the first launch was
// refused by the full correlation tracker (never tracked), the second announced. The first one's
// body kernels were handed to the second (its only tracked sibling) once the first was popped as
// not alive; now they stay the first's and are not delivered.
TEST(GraphConditional, KernelsOfAnUnannouncedLaunchAreNotHandedToItsSibling) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  CUpti_GraphData cond{};
  cond.graph = reinterpret_cast<CUgraph>(uintptr_t{77});
  cond.nodeType = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  g.on_node_cloned(&cond);
  CUpti_GraphData body{};
  body.graph = reinterpret_cast<CUgraph>(uintptr_t{78});
  g.on_node_created(&body);
  exec_event(g, 77, true);
  const void *exec = reinterpret_cast<const void *>(uintptr_t{77});
  g.on_conditional_launch(exec, 10, 100);
  g.on_conditional_unannounced(exec, 10);
  g.on_conditional_launch(exec, 11, 150);
  auto alive = [](uint32_t c) { return c == 11; };
  // The first launch's body kernels (from 110; the second was issued at 150, clocks may
  // disagree): not the second's.
  EXPECT_EQ(g.conditional_owner(78, 110, 120, alive), 0u);
  EXPECT_EQ(g.conditional_owner(78, 140, 160, alive), 0u);
  // The second's, once they start after its launch.
  EXPECT_EQ(g.conditional_owner(78, 170, 180, alive), 11u);
  EXPECT_EQ(g.conditional_owner(78, 190, 200, alive), 11u);
  EXPECT_EQ(g.stats().conditional_unannounced, 2u);
  EXPECT_EQ(g.stats().conditional_records, 2u);
}

}  // namespace
}  // namespace parcagpu
