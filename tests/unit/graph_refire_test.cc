// Re-firing stored graph_node_clone mappings for a late consumer: bounded chunks, nothing twice,
// nothing stored after the attach (those were fired live).
#include <gtest/gtest.h>

#include "graph_tracker.h"

namespace parcagpu {
namespace {

// A GraphData with no handles: the tracker stores a mapping without asking CUPTI anything, as
// long as the CUPTI it was given has node ids at all (else a mapping links nothing to nothing).
void clone_one(GraphTracker &g) {
  CUpti_GraphData gd{};
  g.on_node_cloned(&gd);
}

CUptiResult CUPTIAPI fake_node_id(CUgraphNode, uint64_t *id) {
  *id = 1;
  return CUPTI_SUCCESS;
}

CuptiApi cupti_with_node_ids() {
  CuptiApi api;
  api.cuptiGetGraphNodeId = &fake_node_id;
  return api;
}

TEST(GraphRefire, InBoundedChunksUntilDone) {
  const CuptiApi cupti = cupti_with_node_ids();
  GraphTracker g(cupti, nullptr);
  for (int i = 0; i < 5000; ++i) clone_one(g);
  EXPECT_EQ(g.refire_some(1024), 0u) << "nothing to re-fire before a consumer attached";
  g.begin_refire();
  std::vector<size_t> chunks;
  for (size_t n; (n = g.refire_some(1024)) > 0;) chunks.push_back(n);
  EXPECT_EQ(chunks, (std::vector<size_t>{1024, 1024, 1024, 1024, 904}));
}

TEST(GraphRefire, OnlyWhatWasStoredBeforeTheAttach) {
  const CuptiApi cupti = cupti_with_node_ids();
  GraphTracker g(cupti, nullptr);
  for (int i = 0; i < 100; ++i) clone_one(g);
  g.begin_refire();
  EXPECT_EQ(g.refire_some(60), 60u);
  for (int i = 0; i < 50; ++i) clone_one(g);  // fired live to the new consumer already
  EXPECT_EQ(g.refire_some(60), 40u);
  EXPECT_EQ(g.refire_some(60), 0u);
  EXPECT_EQ(g.clones_stored(), 150u);
  // Another consumer: everything stored again, from the start.
  g.begin_refire();
  size_t total = 0;
  for (size_t n; (n = g.refire_some(64)) > 0;) total += n;
  EXPECT_EQ(total, 150u);
}

CUptiResult CUPTIAPI node_id_of_handle(CUgraphNode node, uint64_t *id) {
  *id = reinterpret_cast<uintptr_t>(node);
  return CUPTI_SUCCESS;
}

void clone_node(GraphTracker &g, uintptr_t original, uintptr_t cloned) {
  CUpti_GraphData gd{};
  gd.originalNode = reinterpret_cast<CUgraphNode>(original);
  gd.node = reinterpret_cast<CUgraphNode>(cloned);
  g.on_node_cloned(&gd);
}

// Issue 30: only the clones of an announced capture (and their clones) are fired live; every
// clone is stored for re-firing as before.
TEST(GraphClones, FiredLiveOnlyOnTheWayToAnAnnouncedCapture) {
  CuptiApi cupti;
  cupti.cuptiGetGraphNodeId = &node_id_of_handle;
  GraphTracker g(cupti, nullptr);
  clone_node(g, 1, 2);  // nothing announced behind node 1
  EXPECT_EQ(g.stats().clones_not_fired, 1u);
  g.note_capture_node(1);
  clone_node(g, 1, 3);  // fired
  clone_node(g, 3, 4);  // a clone of that clone (a cloned graph instantiated): fired
  clone_node(g, 2, 5);  // still nothing behind node 2
  EXPECT_EQ(g.stats().clones_not_fired, 2u);
  EXPECT_EQ(g.stats().clones, 4u);
  EXPECT_EQ(g.clones_stored(), 4u);
}

}  // namespace
}  // namespace parcagpu
