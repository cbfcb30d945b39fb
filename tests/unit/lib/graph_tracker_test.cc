// GraphTracker (graph_tracker.h) on a fake CUPTI table whose handles are their own IDs: what an
// instantiation tells (kernel nodes, conditional nodes, node types from the driver), the facts a
// launch reads, first launches, execs reused, retired and forgotten at their caps, and the owners
// of conditional bodies' kernels. Re-firing stored graph_node_clone mappings for a late consumer:
// bounded chunks, nothing twice, nothing stored after the attach (those were fired live), nothing
// of a destroyed exec. And the tracker's stores bounded by what is live (issue 30): destroyed
// execs and graphs forgotten.
#include "trackers/graph_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/log.h"
#include "error_sites.h"

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
  EXPECT_EQ(g.clones().refire_some(1024), 0u) << "nothing to re-fire before a consumer attached";
  g.clones().begin_refire();
  std::vector<size_t> chunks;
  for (size_t n; (n = g.clones().refire_some(1024)) > 0;) chunks.push_back(n);
  EXPECT_EQ(chunks, (std::vector<size_t>{1024, 1024, 1024, 1024, 904}));
}

TEST(GraphRefire, OnlyWhatWasStoredBeforeTheAttach) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  instantiate(g, 1, 100);
  g.clones().begin_refire();
  EXPECT_EQ(g.clones().refire_some(60), 60u);
  instantiate(g, 2, 50);  // fired live to the new consumer already
  EXPECT_EQ(g.clones().refire_some(60), 40u);
  EXPECT_EQ(g.clones().refire_some(60), 0u);
  EXPECT_EQ(g.clones().stats().stored, 150u);
  // Another consumer: everything stored again, from the start.
  g.clones().begin_refire();
  size_t total = 0;
  for (size_t n; (n = g.clones().refire_some(64)) > 0;) total += n;
  EXPECT_EQ(total, 150u);
}

TEST(GraphRefire, NothingOfAnExecDestroyedMeanwhile) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  instantiate(g, 1, 100);
  instantiate(g, 2, 100);
  instantiate(g, 3, 100);
  g.clones().begin_refire();
  EXPECT_EQ(g.clones().refire_some(50), 50u);  // half of exec 1
  exec_event(g, 1, false);
  exec_event(g, 2, false);
  size_t total = 0;
  for (size_t n; (n = g.clones().refire_some(64)) > 0;) total += n;
  EXPECT_EQ(total, 100u) << "exec 3's mappings only";
  EXPECT_EQ(g.clones().stats().stored, 100u);
}

// Issue 30: only the clones of an announced capture (and their clones) are fired live; every
// clone is stored for re-firing as before.
TEST(GraphClones, FiredLiveOnlyOnTheWayToAnAnnouncedCapture) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  clone_node(g, 1, 2, 100);  // nothing announced behind node 1
  EXPECT_EQ(g.stats().clones_not_fired, 1u);
  g.clones().note_capture_node(50, 1);
  clone_node(g, 1, 3, 100);  // fired
  clone_node(g, 3, 4, 100);  // a clone of that clone (a cloned graph instantiated): fired
  clone_node(g, 2, 5, 100);  // still nothing behind node 2
  exec_event(g, 100, true);
  EXPECT_EQ(g.stats().clones_not_fired, 2u);
  EXPECT_EQ(g.stats().clones, 4u);
  EXPECT_EQ(g.clones().stats().stored, 4u);
  EXPECT_EQ(g.clones().stats().wanted, 3u);  // 1, 3, 4
}

// Issue 30: a soak's mock app grew by 650 MB a minute, ~20 MB of it this tracker's clone store
// (capped at 2^20, never trimmed). What a destroyed exec or graph held goes with it.
TEST(GraphStores, BoundedByWhatIsLive) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  for (uintptr_t i = 1; i <= 20000; ++i) {
    const uintptr_t captured = 1000000 + i;  // the captured graph, its node captured << 8
    g.clones().note_capture_node(static_cast<uint32_t>(captured), captured << 8);
    for (int k = 0; k < 3; ++k) clone_node(g, k == 0 ? captured << 8 : 7, i << 20 | k, i);
    exec_event(g, i, true);
    EXPECT_EQ(g.clones().stats().stored, 3u);
    EXPECT_EQ(g.clones().stats().wanted, 2u);  // the captured node and its clone
    exec_event(g, i, false);
    destroy_graph(g, captured);
  }
  EXPECT_EQ(g.clones().stats().stored, 0u);
  EXPECT_EQ(g.clones().stats().wanted, 0u);
  EXPECT_EQ(g.execs_stored(), 0u);
  EXPECT_EQ(g.stats().clones, 60000u);
  EXPECT_EQ(g.stats().clones_not_stored + g.stats().wanted_forgotten_at_cap +
                g.stats().execs_forgotten_at_cap,
            0u);
  // Live ones stay: a graph kept alive keeps its wanted node, a live exec its mappings.
  g.clones().note_capture_node(5, 5 << 8);
  instantiate(g, 9, 2, 5 << 8);
  EXPECT_EQ(g.clones().stats().stored, 2u);
  EXPECT_EQ(g.clones().stats().wanted, 2u);  // 5 << 8 and its one clone
}

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

// A conditional exec `exec` (handle and graph ID) whose WHILE body is graph exec + 1.
void instantiate_conditional(GraphTracker &g, uintptr_t exec) {
  CUpti_GraphData cond{};
  cond.graph = reinterpret_cast<CUgraph>(exec);
  cond.nodeType = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  g.on_node_cloned(&cond);
  CUpti_GraphData body{};
  body.graph = reinterpret_cast<CUgraph>(exec + 1);
  g.on_node_created(&body);
  exec_event(g, exec, true);
}

// Issue 42: at the default rates four threads instantiated, launched and destroyed conditional
// graphs by the hundred thousand between two flushes; the destroyed ones were kept among the
// last 1,024 only, so an announced launch's exec was gone when its body kernels came. Kept now
// while an announced launch of it awaits kernels, whatever else is destroyed meanwhile.
TEST(GraphConditional, AnAnnouncedLaunchsExecOutlivesChurn) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  instantiate_conditional(g, 10);
  g.on_conditional_launch(reinterpret_cast<const void *>(uintptr_t{10}), 500, 100);
  exec_event(g, 10, false);
  for (uintptr_t e = 20; e < 20 + 2 * 100000; e += 2) {  // never announced
    instantiate_conditional(g, e);
    exec_event(g, e, false);
  }
  EXPECT_EQ(g.execs_stored(), 1u) << "the unannounced ones go at their destroy";
  auto alive = [](uint32_t c) { return c == 500; };
  bool unknown = true;
  EXPECT_EQ(g.conditional_owner(11, 110, 120, alive, &unknown), 500u);
  EXPECT_FALSE(unknown);
  // A body kernel of a never-announced exec: no exec known, and none can have been an announced
  // launch's (not a loss).
  EXPECT_EQ(g.conditional_owner(21, 110, 120, alive, &unknown), 0u);
  EXPECT_TRUE(unknown);
  EXPECT_FALSE(g.owners_may_be_unknown());
  EXPECT_EQ(g.stats().conditional_owners_forgotten, 0u);
  // Let go once its launch is no longer tracked.
  g.prune_retired(alive);
  EXPECT_EQ(g.execs_stored(), 1u);
  g.prune_retired([](uint32_t) { return false; });
  EXPECT_EQ(g.execs_stored(), 0u);
}

// A body kernel that started before the announced launch was issued is an earlier launch's (one
// not announced): before, it was handed to the oldest launch in flight ("clocks disagree").
TEST(GraphConditional, AKernelStartedBeforeTheLaunchIsNotItsKernel) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  instantiate_conditional(g, 30);
  g.on_conditional_launch(reinterpret_cast<const void *>(uintptr_t{30}), 600, 1000);
  auto alive = [](uint32_t) { return true; };
  EXPECT_EQ(g.conditional_owner(31, 900, 950, alive), 0u);
  EXPECT_EQ(g.conditional_owner(31, 1010, 1020, alive), 600u);
  EXPECT_EQ(g.stats().conditional_unannounced, 1u);
  EXPECT_EQ(g.stats().conditional_records, 1u);
}

// Graph IDs that failed at instantiation: a record of an unknown graph may then be an announced
// launch's, and is said lost.
CUptiResult CUPTIAPI graph_id_fails(CUgraph, uint32_t *) { return CUPTI_ERROR_UNKNOWN; }

TEST(GraphConditional, OwnersMayBeUnknownOnceGraphIdsFailed) {
  CuptiApi cupti = cupti_with_ids();
  GraphTracker ok(cupti, nullptr);
  instantiate_conditional(ok, 40);
  EXPECT_FALSE(ok.owners_may_be_unknown());
  cupti.cuptiGetGraphId = &graph_id_fails;
  GraphTracker failing(cupti, nullptr);
  instantiate_conditional(failing, 40);
  EXPECT_TRUE(failing.owners_may_be_unknown());
}

// Issue 42: the launch after an announced one ran while kernel activity was held on for it; its
// body kernels (correlation ID 0 like the announced one's) went to the announced launch. Noted
// as recorded, it keeps them.
TEST(GraphConditional, ARecordedUnannouncedLaunchKeepsItsKernels) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  EXPECT_FALSE(g.conditional_execs_live());
  instantiate_conditional(g, 50);
  EXPECT_TRUE(g.conditional_execs_live());
  const void *exec = reinterpret_cast<const void *>(uintptr_t{50});
  g.on_conditional_launch(exec, 700, 1000);
  EXPECT_TRUE(g.on_conditional_recorded(exec, 701, 2000, true));
  auto alive = [](uint32_t c) { return c == 700; };
  EXPECT_EQ(g.conditional_owner(51, 1100, 1200, alive), 700u);
  EXPECT_EQ(g.conditional_owner(51, 1300, 1400, alive), 700u);
  EXPECT_EQ(g.conditional_owner(51, 2100, 2200, alive), 0u) << "the unannounced launch's";
  EXPECT_EQ(g.conditional_owner(51, 2300, 2400, alive), 0u);
  EXPECT_EQ(g.stats().conditional_records, 2u);
  EXPECT_EQ(g.stats().conditional_unannounced, 2u);
  // Not for an exec without conditional nodes.
  instantiate(g, 60, 1);
  EXPECT_FALSE(
      g.on_conditional_recorded(reinterpret_cast<const void *>(uintptr_t{60}), 702, 3000, true));
  exec_event(g, 50, false);
  EXPECT_FALSE(g.conditional_execs_live());
}

// One whose kernels may not have been recorded (activity switched during its call) does not take
// the kernels of the announced launch after it as a queued launch's.
TEST(GraphConditional, AMaybeUnrecordedLaunchDoesNotTakeTheNextOnesKernels) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  instantiate_conditional(g, 70);
  const void *exec = reinterpret_cast<const void *>(uintptr_t{70});
  EXPECT_TRUE(g.on_conditional_recorded(exec, 800, 1000, true));
  g.on_conditional_maybe_unrecorded(exec, 800);
  g.on_conditional_launch(exec, 801, 1100);
  auto alive = [](uint32_t c) { return c == 801; };
  EXPECT_EQ(g.conditional_owner(71, 1200, 1300, alive), 801u);
  EXPECT_EQ(g.conditional_owner(71, 1400, 1500, alive), 801u);
}

const void *exec_handle(uintptr_t exec) { return reinterpret_cast<const void *>(exec); }

// A node of `type` cloned into exec graph `graph` (no node IDs).
void clone_typed(GraphTracker &g, uintptr_t graph, CUgraphNodeType type, uintptr_t node = 0x77) {
  CUpti_GraphData gd{};
  gd.graph = reinterpret_cast<CUgraph>(graph);
  gd.node = reinterpret_cast<CUgraphNode>(node);
  gd.nodeType = type;
  g.on_node_cloned(&gd);
}

// The kernels a launch of an exec runs are its kernel nodes: other nodes are not counted. An exec
// of host functions only is counted when launched (not announced: no kernel could match it).
TEST(GraphLaunchFacts, KernelNodesAndHostOnlyExecs) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  for (int i = 0; i < 3; ++i) clone_typed(g, 1, CU_GRAPH_NODE_TYPE_KERNEL);
  clone_typed(g, 1, CU_GRAPH_NODE_TYPE_HOST);
  exec_event(g, 1, true);
  clone_typed(g, 2, CU_GRAPH_NODE_TYPE_HOST);
  exec_event(g, 2, true);
  const GraphTracker::ExecFacts f = g.on_launch(exec_handle(1));
  EXPECT_TRUE(f.known);
  EXPECT_EQ(f.kernel_nodes, 3u);
  EXPECT_FALSE(f.has_conditional);
  EXPECT_EQ(g.stats().hostonly_launches, 0u);
  const GraphTracker::ExecFacts host = g.on_launch(exec_handle(2));
  EXPECT_TRUE(host.known);
  EXPECT_EQ(host.kernel_nodes, 0u);
  EXPECT_EQ(g.stats().hostonly_launches, 1u);
  EXPECT_EQ(g.stats().execs, 2u);
  EXPECT_FALSE(g.owners_may_be_unknown());
}

// An announced launch of an exec not known here: its conditional bodies' owners cannot be known.
TEST(GraphLaunchFacts, AnUnknownExecIsToldAndMakesOwnersUnknown) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  const GraphTracker::ExecFacts f = g.on_launch(exec_handle(5));
  EXPECT_FALSE(f.known);
  EXPECT_TRUE(g.owners_may_be_unknown());
}

// The first launch (or upload) of a live exec is its first once; a launch the tracker saw counts.
TEST(GraphLaunchFacts, AnExecsFirstLaunchIsTakenOnce) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  instantiate(g, 1, 1);
  instantiate(g, 2, 1);
  EXPECT_TRUE(g.take_first_launch(exec_handle(1)));
  EXPECT_FALSE(g.take_first_launch(exec_handle(1)));
  g.on_launch(exec_handle(2));
  EXPECT_FALSE(g.take_first_launch(exec_handle(2))) << "announced: launched already";
  EXPECT_FALSE(g.take_first_launch(exec_handle(3))) << "not known";
  exec_event(g, 1, false);
  instantiate(g, 1, 1);  // a new exec under the old handle
  EXPECT_TRUE(g.take_first_launch(exec_handle(1)));
}

// A handle reused without a destroy: the exec live under it is retired, its mappings go.
TEST(GraphLaunchFacts, AHandleReusedWithoutADestroyRetiresTheOldExec) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  instantiate(g, 1, 5);
  instantiate(g, 1, 2);
  EXPECT_EQ(g.execs_stored(), 1u);
  EXPECT_EQ(g.clones().stats().stored, 2u);
  EXPECT_EQ(g.on_launch(exec_handle(1)).kernel_nodes, 2u);
}

// CUPTI 13 reports a cloned node as a kernel whatever it is: the driver's node type wins.
CUresult CUDAAPI node_is_host(CUgraphNode, CUgraphNodeType *type) {
  *type = CU_GRAPH_NODE_TYPE_HOST;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI node_type_fails(CUgraphNode, CUgraphNodeType *) { return CUDA_ERROR_UNKNOWN; }

using testing_sites::site_count;

TEST(GraphNodeTypes, TheDriversTypeWinsAndItsFailureIsSaidOnceAndCounted) {
  const CuptiApi cupti = cupti_with_ids();
  CudaApi cuda;
  cuda.cuGraphNodeGetType = &node_is_host;
  GraphTracker g(cupti, &cuda);
  clone_typed(g, 1, CU_GRAPH_NODE_TYPE_KERNEL);
  exec_event(g, 1, true);
  EXPECT_EQ(g.on_launch(exec_handle(1)).kernel_nodes, 0u);
  EXPECT_EQ(g.stats().hostonly_launches, 1u);

  cuda.cuGraphNodeGetType = &node_type_fails;
  const uint64_t before = site_count("cuGraphNodeGetType failed");
  testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) clone_typed(g, 2, CU_GRAPH_NODE_TYPE_KERNEL);
  exec_event(g, 2, true);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(g.on_launch(exec_handle(2)).kernel_nodes, 3u) << "CUPTI's type, as said";
  EXPECT_EQ(site_count("cuGraphNodeGetType failed"), before + 3);
  EXPECT_LE(std::count(err.begin(), err.end(), '\n'), 1) << err;
  testing_sites::expect_said_once(err, "cuGraphNodeGetType failed (CUresult", before);
}

// 65,536 live execs (kMaxExecs): the next instantiation forgets them all, counted; launches of the
// forgotten ones are of unknown execs.
TEST(GraphStores, AtTheExecCapEveryExecIsForgottenAndCounted) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  testing::internal::CaptureStderr();
  for (uintptr_t e = 1; e <= (1u << 16); ++e) exec_event(g, e, true);
  EXPECT_EQ(g.execs_stored(), 1u << 16);
  EXPECT_FALSE(g.owners_may_be_unknown());
  exec_event(g, (1u << 16) + 1, true);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(g.stats().execs_forgotten_at_cap, 1u << 16);
  EXPECT_EQ(g.execs_stored(), 1u);
  EXPECT_TRUE(g.owners_may_be_unknown());
  EXPECT_FALSE(g.on_launch(exec_handle(1)).known);
  EXPECT_TRUE(g.on_launch(exec_handle((1u << 16) + 1)).known);
}

// Destroyed conditional execs kept for their announced launches' kernels: past 16,384
// (kMaxRetiredExecs) the oldest is forgotten, counted, and its body kernels have no owner.
TEST(GraphStores, PastTheRetiredCapTheOldestConditionalExecIsForgottenAndCounted) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  testing::internal::CaptureStderr();
  constexpr uintptr_t kExecs = 16384 + 2;
  for (uintptr_t i = 0; i < kExecs; ++i) {
    const uintptr_t e = 10 + 2 * i;  // body graph e + 1
    instantiate_conditional(g, e);
    g.on_conditional_launch(exec_handle(e), static_cast<uint32_t>(1000 + i), 100);
    exec_event(g, e, false);
  }
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(g.stats().conditional_owners_forgotten, 2u);
  EXPECT_EQ(g.execs_stored(), 16384u);
  EXPECT_TRUE(g.owners_may_be_unknown());
  auto alive = [](uint32_t) { return true; };
  bool unknown = false;
  EXPECT_EQ(g.conditional_owner(11, 110, 120, alive, &unknown), 0u) << "the oldest: forgotten";
  EXPECT_TRUE(unknown);
  EXPECT_EQ(g.conditional_owner(15, 110, 120, alive), 1002u) << "the third: kept";
}

// Two announced launches of one conditional exec in flight: a kernel that started after the
// second was issued, while the first had no kernel end yet, is the first's (in order); one
// after the first ended is the second's, a guess counted as ambiguous while the first's end is
// after the second's launch. A kernel of a graph no exec is known for has no owner, counted.
TEST(GraphConditional, QueuedLaunchesTakeKernelsInOrderAndGuessesAreCounted) {
  const CuptiApi cupti = cupti_with_ids();
  GraphTracker g(cupti, nullptr);
  instantiate_conditional(g, 90);
  g.on_conditional_launch(exec_handle(90), 1, 100);
  g.on_conditional_launch(exec_handle(90), 2, 200);
  auto alive = [](uint32_t) { return true; };
  EXPECT_EQ(g.conditional_owner(91, 210, 300, alive), 1u) << "the first had no kernel yet";
  EXPECT_EQ(g.stats().conditional_ambiguous, 0u);
  EXPECT_EQ(g.conditional_owner(91, 310, 320, alive), 2u);
  EXPECT_EQ(g.stats().conditional_ambiguous, 1u) << "the first ended after the second's launch";
  EXPECT_EQ(g.stats().conditional_records, 2u);
  EXPECT_EQ(g.stats().conditional_orphans, 0u);
  EXPECT_EQ(g.conditional_owner(500, 310, 320, alive), 0u);
  EXPECT_EQ(g.stats().conditional_orphans, 1u);
  // Launches no longer tracked go: none in flight, no owner.
  EXPECT_EQ(g.conditional_owner(91, 400, 410, [](uint32_t) { return false; }), 0u);
  EXPECT_EQ(g.stats().conditional_orphans, 2u);
}

}  // namespace
}  // namespace parcagpu
