// GraphExecs (graph_execs.h): the execs by serial, the live handles, the graph IDs that lead to an
// exec, retired execs kept apart from live ones, and the lock-free count of live conditional
// execs.
#include "trackers/graph_execs.h"

#include <gtest/gtest.h>

namespace parcagpu {
namespace {

const void *handle(uintptr_t h) { return reinterpret_cast<const void *>(h); }

GraphExec exec_of(std::vector<uint32_t> graph_ids, bool conditional = false, uint32_t kernels = 1) {
  GraphExec e;
  e.graph_ids = std::move(graph_ids);
  e.has_conditional = conditional;
  e.kernel_nodes = kernels;
  return e;
}

TEST(GraphExecs, AnExecIsFoundByHandleSerialAndEveryGraphOfIt) {
  GraphExecs execs;
  const uint64_t a = execs.add(handle(0x10), exec_of({5, 6}, false, 3));
  const uint64_t b = execs.add(handle(0x20), exec_of({7}));
  EXPECT_NE(a, 0u);
  EXPECT_GT(b, a) << "serials only grow";
  EXPECT_EQ(execs.live_serial(handle(0x10)), a);
  EXPECT_EQ(execs.live_serial(handle(0x30)), 0u);
  ASSERT_NE(execs.live(handle(0x10)), nullptr);
  EXPECT_EQ(execs.live(handle(0x10))->kernel_nodes, 3u);
  EXPECT_EQ(execs.find(b), execs.live(handle(0x20)));
  EXPECT_EQ(execs.by_graph(6), execs.find(a));
  EXPECT_EQ(execs.by_graph(7), execs.find(b));
  EXPECT_EQ(execs.by_graph(8), nullptr);
  EXPECT_EQ(execs.live_count(), 2u);
  EXPECT_EQ(execs.stored(), 2u);
}

// Destroyed: no longer live under its handle, still found by serial and graph (its kernels'
// records come later) until forgotten.
TEST(GraphExecs, ADestroyedExecOutlivesItsHandleUntilForgotten) {
  GraphExecs execs;
  const uint64_t a = execs.add(handle(0x10), exec_of({5}));
  execs.unlive(handle(0x10));
  EXPECT_EQ(execs.live(handle(0x10)), nullptr);
  EXPECT_EQ(execs.live_count(), 0u);
  EXPECT_NE(execs.find(a), nullptr);
  EXPECT_EQ(execs.by_graph(5), execs.find(a));
  EXPECT_EQ(execs.stored(), 1u);
  execs.forget(a);
  EXPECT_EQ(execs.find(a), nullptr);
  EXPECT_EQ(execs.by_graph(5), nullptr);
  EXPECT_EQ(execs.stored(), 0u);
  execs.forget(a);  // twice: nothing
  EXPECT_EQ(execs.stored(), 0u);
}

// A graph ID taken over by a later exec (IDs of a re-instantiated graph): forgetting the older
// exec leaves the newer one's.
TEST(GraphExecs, ForgettingAnExecLeavesAGraphIdALaterExecTookOver) {
  GraphExecs execs;
  const uint64_t old_serial = execs.add(handle(0x10), exec_of({5, 9}));
  execs.unlive(handle(0x10));
  const uint64_t new_serial = execs.add(handle(0x10), exec_of({5}));
  EXPECT_EQ(execs.live_serial(handle(0x10)), new_serial);
  execs.forget(old_serial);
  EXPECT_EQ(execs.by_graph(5), execs.find(new_serial));
  EXPECT_EQ(execs.by_graph(9), nullptr);
}

TEST(GraphExecs, LiveConditionalExecsAreCountedUntilRetired) {
  GraphExecs execs;
  EXPECT_FALSE(execs.conditional_live());
  const uint64_t plain = execs.add(handle(1), exec_of({1}));
  EXPECT_FALSE(execs.conditional_live());
  const uint64_t c1 = execs.add(handle(2), exec_of({2}, true));
  const uint64_t c2 = execs.add(handle(3), exec_of({3}, true));
  EXPECT_TRUE(execs.conditional_live());
  execs.retiring(*execs.find(plain));
  execs.retiring(*execs.find(c1));
  EXPECT_TRUE(execs.conditional_live()) << "one conditional exec is still live";
  execs.retiring(*execs.find(c2));
  EXPECT_FALSE(execs.conditional_live());
}

TEST(GraphExecs, ClearForgetsEverything) {
  GraphExecs execs;
  const uint64_t a = execs.add(handle(1), exec_of({1}, true));
  execs.retired().push_back(a);
  execs.clear();
  EXPECT_EQ(execs.stored(), 0u);
  EXPECT_EQ(execs.live_count(), 0u);
  EXPECT_TRUE(execs.retired().empty());
  EXPECT_EQ(execs.by_graph(1), nullptr);
  EXPECT_FALSE(execs.conditional_live());
  EXPECT_GT(execs.add(handle(1), exec_of({1})), a) << "serials are never reused";
}

TEST(GraphExec, OwnsAnAnnouncedLaunchWhileOneIsOpen) {
  GraphExec e;
  EXPECT_FALSE(e.owns_announced());
  GraphExec::OpenLaunch unannounced{1, 10};
  unannounced.unannounced = true;
  e.open_launches.push_back(unannounced);
  EXPECT_FALSE(e.owns_announced());
  e.open_launches.push_back({2, 20});
  EXPECT_TRUE(e.owns_announced());
}

}  // namespace
}  // namespace parcagpu
