// GraphKernelFilter on a fake CUPTI table and a real graph tracker: a conditional body's kernel
// (correlation ID 0) handed to the announced launch that owns its graph, or counted as a loss only
// where an announced launch may have owned it; a graph kernel whose end CUPTI made up held back.
#include "activity/graph_kernel_filter.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "activity/activity_switch.h"
#include "fake_activity_cupti.h"
#include "trackers/correlation_tracker.h"
#include "trackers/graph_tracker.h"

namespace parcagpu {
namespace {

using namespace fake_activity;

template <typename Handle>
Handle handle(uintptr_t value) {
  return reinterpret_cast<Handle>(value);
}

class GraphKernelFilterTest : public ActivityFixture {
 protected:
  // A kernel record of graph `graph_id` with correlation ID `correlation_id`.
  KernelRecord record(uint32_t correlation_id, uint32_t graph_id, uint64_t start, uint64_t end) {
    records_.emplace_back();
    add_kernel(&records_.back(), correlation_id, start, end, graph_id);
    KernelRecord k{};
    walk_kernel_records(api_, records_.back().data(), kSlot, [&](KernelRecord &r) { k = r; });
    return k;
  }

  CorrelationTracker tracker_{1024, 30'000'000'000ull};
  GraphTracker graphs_{api_, nullptr};
  ActivitySwitch switch_{api_, ActivityMode::WhileConsumer, nullptr};
  GraphKernelFilter filter_{api_, tracker_, graphs_, switch_};
  std::vector<std::vector<uint8_t>> records_;
};

// An exec (handle 77) with a conditional node whose body is graph 78, launched and announced as
// correlation ID 11 at 150 on CUPTI's clock.
TEST_F(GraphKernelFilterTest, AConditionalBodysKernelGoesToTheAnnouncedLaunchOwningItsGraph) {
  CUpti_GraphData conditional{}, body{}, exec{};
  conditional.graph = handle<CUgraph>(77);
  conditional.nodeType = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  body.graph = handle<CUgraph>(78);
  exec.graphExec = handle<CUgraphExec>(77);
  graphs_.on_node_cloned(&conditional);
  graphs_.on_node_created(&body);
  graphs_.on_exec_created(&exec);
  ASSERT_TRUE(tracker_.insert(11, LaunchKind::Graph, 1));
  graphs_.on_conditional_launch(handle<const void *>(77), 11, 150);
  EXPECT_EQ(filter_.conditional_body_owner(record(0, 78, 170, 180)), 11u);
  // A kernel of a graph no exec is known for, none of whose launches can have been announced.
  EXPECT_EQ(filter_.conditional_body_owner(record(0, 90, 170, 180)), 0u);
  EXPECT_EQ(filter_.stats().conditional_unannounced, 1u);
  EXPECT_EQ(filter_.stats().conditional_unattributed, 0u) << "not a loss";
}

// An announced launch of an exec not known here: a conditional body kernel of an unknown graph
// may have been its, so it is a loss, said once and counted.
TEST_F(GraphKernelFilterTest, AnUnknownGraphsBodyKernelIsALossWhereOwnersMayBeUnknown) {
  graphs_.on_launch(handle<const void *>(5));
  ASSERT_TRUE(graphs_.owners_may_be_unknown());
  const Said said = said_while("conditional body kernel records of no known graph exec", [&] {
    EXPECT_EQ(filter_.conditional_body_owner(record(0, 90, 170, 180)), 0u);
    EXPECT_EQ(filter_.conditional_body_owner(record(0, 91, 170, 180)), 0u);
  });
  EXPECT_EQ(filter_.stats().conditional_unattributed, 2u);
  EXPECT_EQ(said.counted, 2u);
  EXPECT_EQ(said.times("carries correlation ID 0"), said.expected_times()) << said.text;
  // An eager kernel is no conditional body.
  EXPECT_EQ(filter_.conditional_body_owner(record(0, 0, 170, 180)), 0u);
  EXPECT_EQ(filter_.stats().conditional_unattributed, 2u);
}

// Kernel activity went off at 500 on CUPTI's clock: a graph kernel running across it got its end
// from the next enable (made up); an eager one, or one that ran after, is delivered.
TEST_F(GraphKernelFilterTest, AGraphKernelRunningWhileActivityWentOffHasAMadeUpEnd) {
  ASSERT_TRUE(switch_.arm(true));
  fake_.timestamp = 500;
  ASSERT_TRUE(switch_.arm(false));
  const Said said = said_while(
      "graph kernel records with an end CUPTI wrote after kernel activity went off", [&] {
        EXPECT_TRUE(filter_.made_up_end(record(3, 40, 400, 900)));
        EXPECT_TRUE(filter_.made_up_end(record(4, 41, 450, 800)));
        EXPECT_FALSE(filter_.made_up_end(record(5, 0, 400, 900))) << "eager";
        EXPECT_FALSE(filter_.made_up_end(record(6, 40, 600, 900))) << "after the switch-off";
      });
  EXPECT_EQ(filter_.stats().made_up_ends, 2u);
  EXPECT_EQ(said.counted, 2u);
  EXPECT_EQ(said.times("its GPU time is unknown"), said.expected_times()) << said.text;
}

}  // namespace
}  // namespace parcagpu
