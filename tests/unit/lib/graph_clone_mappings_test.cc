// GraphCloneMappings (graph_clone_mappings.h): which clones are fired live (those on the way to an
// announced capture, and their clones), what is stored per exec for re-firing, what goes with an
// exec or a graph, and the caps, counted.
#include "trackers/graph_clone_mappings.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/log.h"
#include "error_sites.h"

namespace parcagpu {
namespace {

uint64_t fired(const GraphCloneMappings &m) { return m.stats().clones - m.stats().not_fired; }

// A clone of `original` as `cloned` into exec graph `graph`, stored with exec `serial`.
void instantiate(GraphCloneMappings &m, uint64_t serial, uint32_t graph,
                 std::vector<std::pair<uint64_t, uint64_t>> nodes) {
  std::vector<GraphClone> pending;
  for (const auto &[original, cloned] : nodes) {
    const GraphClone c{original, cloned, graph};
    if (m.on_clone(c, pending.size())) pending.push_back(c);
  }
  m.store(serial, std::move(pending));
}

TEST(GraphCloneMappings, ClonesOfAWantedNodeAndTheirClonesAreFiredLive) {
  GraphCloneMappings m;
  m.note_capture_node(1, 100);
  instantiate(m, 1, 2, {{100, 200}, {101, 201}});
  EXPECT_EQ(fired(m), 1u);
  EXPECT_EQ(m.stats().not_fired, 1u);
  // The clone is wanted in its turn (a cloned graph instantiated again).
  instantiate(m, 2, 3, {{200, 300}, {201, 301}});
  EXPECT_EQ(fired(m), 2u);
  EXPECT_EQ(m.stats().wanted, 3u);  // 100, 200, 300
  EXPECT_EQ(m.stats().stored, 4u) << "every clone is stored, fired live or not";
}

// Wanted nodes go with their graph; another graph's stay.
TEST(GraphCloneMappings, AGraphsWantedNodesGoWithIt) {
  GraphCloneMappings m;
  m.note_capture_node(1, 100);
  m.note_capture_node(1, 101);
  m.note_capture_node(2, 102);
  m.forget_graph(1);
  EXPECT_EQ(m.stats().wanted, 1u);
  instantiate(m, 1, 9, {{100, 200}, {102, 202}});
  EXPECT_EQ(fired(m), 1u) << "only node 102's clone";
  m.forget_graph(7);                // no such graph: nothing
  EXPECT_EQ(m.stats().wanted, 2u);  // 102 and its clone 202
}

// A node noted again under another graph belongs to the first one it was noted under: forgetting
// the second graph does not drop it.
TEST(GraphCloneMappings, ANodeIsForgottenOnlyWithTheGraphItWasNotedUnder) {
  GraphCloneMappings m;
  m.note_capture_node(1, 100);
  m.note_capture_node(2, 100);
  m.forget_graph(2);
  EXPECT_EQ(m.stats().wanted, 1u);
  m.forget_graph(1);
  EXPECT_EQ(m.stats().wanted, 0u);
}

TEST(GraphCloneMappings, AnExecsMappingsGoAtItsDrop) {
  GraphCloneMappings m;
  instantiate(m, 1, 1, {{1, 10}, {2, 20}});
  instantiate(m, 2, 2, {{3, 30}});
  EXPECT_EQ(m.stats().stored, 3u);
  m.drop(1);
  EXPECT_EQ(m.stats().stored, 1u);
  m.drop(1);  // twice: nothing
  m.drop(5);  // never stored: nothing
  EXPECT_EQ(m.stats().stored, 1u);
  m.begin_refire();
  EXPECT_EQ(m.refire_some(10), 1u) << "exec 2's mapping only";
  EXPECT_EQ(m.refire_some(10), 0u);
}

// Chunks end inside an exec's mappings and the next one goes on from there: nothing twice,
// nothing left out.
TEST(GraphCloneMappings, ReFiringResumesInsideAnExec) {
  GraphCloneMappings m;
  instantiate(m, 1, 1, {{1, 10}, {2, 20}, {3, 30}});
  instantiate(m, 2, 2, {{4, 40}, {5, 50}});
  m.begin_refire();
  EXPECT_EQ(m.refire_some(2), 2u);
  EXPECT_EQ(m.refire_some(2), 2u);  // the third of exec 1, the first of exec 2
  EXPECT_EQ(m.refire_some(2), 1u);
  EXPECT_EQ(m.refire_some(2), 0u);
  EXPECT_EQ(m.refire_some(2), 0u) << "done until the next consumer";
}

TEST(GraphCloneMappings, ClearForgetsStoredAndWanted) {
  GraphCloneMappings m;
  m.note_capture_node(1, 100);
  instantiate(m, 1, 2, {{100, 200}});
  m.clear();
  EXPECT_EQ(m.stats().stored, 0u);
  EXPECT_EQ(m.stats().wanted, 0u);
  instantiate(m, 2, 2, {{100, 201}});
  EXPECT_EQ(fired(m), 1u) << "node 100 is no longer wanted";
  EXPECT_EQ(m.stats().clones, 2u) << "the totals stay";
}

using testing_sites::site_count;

// Past kMaxClones (2^20) live mappings a clone is not stored (never re-fired), counted and said;
// it is still fired live if wanted.
TEST(GraphCloneMappings, BeyondTheCapAcloneIsNotStoredCountedAndSaid) {
  GraphCloneMappings m;
  m.note_capture_node(1, 100);
  const uint64_t before = site_count("graph node clones not stored (cap)");
  testing::internal::CaptureStderr();
  EXPECT_TRUE(m.on_clone({100, 200, 2}, (1u << 20) - 1));
  EXPECT_FALSE(m.on_clone({100, 201, 2}, 1u << 20));
  EXPECT_FALSE(m.on_clone({100, 202, 2}, 1u << 20));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(m.stats().not_stored, 2u);
  EXPECT_EQ(fired(m), 3u);
  EXPECT_EQ(site_count("graph node clones not stored (cap)"), before + 2);
  testing_sites::expect_said_once(err, "graph node clones of live graph execs", before);
  EXPECT_LE(std::count(err.begin(), err.end(), '\n'), 1) << "said once: " << err;
}

// kMaxWantedNodes (65,536) wanted nodes: all forgotten (counted), the store starts over.
TEST(GraphCloneMappings, AtTheWantedCapTheWantedNodesAreForgottenAndCounted) {
  GraphCloneMappings m;
  testing::internal::CaptureStderr();
  for (uint64_t n = 1; n <= (1u << 16); ++n) m.note_capture_node(1, n);
  EXPECT_EQ(m.stats().wanted, 1u << 16);
  EXPECT_EQ(m.stats().wanted_forgotten_at_cap, 0u);
  m.note_capture_node(2, 1u << 20);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(m.stats().wanted_forgotten_at_cap, 1u << 16);
  EXPECT_EQ(m.stats().wanted, 1u);
  instantiate(m, 1, 3, {{1, 10}, {1u << 20, 11}});
  EXPECT_EQ(fired(m), 1u) << "only the node noted after the cap";
}

}  // namespace
}  // namespace parcagpu
