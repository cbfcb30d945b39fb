// Unit tests of parcagpu-trace's joining and accounting (no BPF): tools/trace/joiner.h, tools/trace/report.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <utility>
#include <string>
#include <vector>

#include "joiner.h"
#include "report.h"

namespace parcagpu::trace {
namespace {

KernelRecord kernel(uint32_t pid, uint32_t corr, const char *name = "k", uint32_t graph_id = 0) {
  KernelRecord k;
  k.pid = pid;
  k.correlation_id = corr;
  k.graph_id = graph_id;
  k.graph_node_id = graph_id ? 100 : 0;
  k.start = 1000;
  k.end = 2000;
  k.name = name;
  return k;
}

Summary summary(const Joiner &j) {
  Summary s;
  j.add_to(&s);
  return s;
}

// (orphan kernels, eager launches without kernels, graph launches without kernels)
using Orphans = std::array<uint64_t, 3>;
Orphans orphans(const Summary &s) {
  return {s.orphan_kernels, s.orphan_correlations_eager, s.orphan_correlations_graph};
}
// (records, matched) of one kernel name
using Counts = std::pair<uint64_t, uint64_t>;
Counts counts(const Summary &s, const std::string &name) {
  const NameCounts &c = s.kernels_by_name.at(name);
  return {c.records, c.matched};
}

TEST(JoinerTest, GraphCbids) {
  // Exactly the GraphLaunch entries of the subscription table, with their domain's sign.
  for (int32_t c : {311, 312, -514, -515}) EXPECT_TRUE(is_graph_cbid(c)) << c;
  for (int32_t c : {211, -307, -311, -312, 514, 515, 0, 13, -652}) EXPECT_FALSE(is_graph_cbid(c)) << c;
}

TEST(JoinerTest, EagerCorrelationThenKernel) {
  Joiner j;
  j.on_correlation(10, 1, 211);
  EXPECT_EQ(j.awaiting_kernels(), 1u);
  Joiner::Match m = j.on_kernel(kernel(10, 1, "vecAdd"));
  EXPECT_TRUE(m.matched);
  EXPECT_EQ(m.signed_cbid, 211);
  EXPECT_EQ(j.awaiting_kernels(), 0u);
  Summary s = summary(j);
  EXPECT_EQ(s.correlations, 1u);
  EXPECT_EQ(s.correlations_by_cbid.at(211), 1u);
  EXPECT_EQ(s.kernel_records, 1u);
  EXPECT_EQ(s.kernels_matched, 1u);
  EXPECT_EQ(s.matched_by_cbid.at(211), 1u);
  EXPECT_EQ(orphans(s), (Orphans{0, 0, 0}));
  EXPECT_EQ(s.graph_launches_with_kernels, 0u);
  EXPECT_EQ(counts(s, "vecAdd"), (Counts{1, 1}));
  EXPECT_EQ(s.events, 2u);
  EXPECT_EQ(s.pids, 1u);
}

TEST(JoinerTest, KernelWaitsForItsCorrelation) {
  Joiner j;
  EXPECT_FALSE(j.on_kernel(kernel(10, 7, "early")).matched);
  EXPECT_EQ(summary(j).orphan_kernels, 1u);  // still waiting
  j.on_correlation(10, 7, -307);
  Summary s = summary(j);
  EXPECT_EQ(s.orphan_kernels, 0u);
  EXPECT_EQ(s.kernels_matched, 1u);
  EXPECT_EQ(s.matched_by_cbid.at(-307), 1u);
  EXPECT_EQ(s.kernels_by_name.at("early").matched, 1u);
  EXPECT_EQ(s.orphan_correlations_eager, 0u);
  EXPECT_EQ(j.awaiting_kernels(), 0u);
}

TEST(JoinerTest, GraphLaunchHasManyKernelsOneCorrelation) {
  Joiner j;
  j.on_kernel(kernel(10, 5, "g0", 3));  // one arrives before the announcement
  j.on_correlation(10, 5, -514);
  for (int i = 1; i < 6; i++) EXPECT_TRUE(j.on_kernel(kernel(10, 5, "g1", 3)).matched);
  j.on_correlation(10, 6, 311);
  for (int i = 0; i < 4; i++) EXPECT_TRUE(j.on_kernel(kernel(10, 6, "g2", 4)).matched);
  Summary s = summary(j);
  EXPECT_EQ(s.correlations, 2u);
  EXPECT_EQ(s.kernel_records, 10u);
  EXPECT_EQ(s.graph_kernel_records, 10u);
  EXPECT_EQ(s.kernels_matched, 10u);
  EXPECT_EQ(s.graph_kernels_matched, 10u);
  EXPECT_EQ(s.graph_launches_with_kernels, 2u);
  EXPECT_EQ(s.matched_by_cbid.at(-514), 6u);
  EXPECT_EQ(s.matched_by_cbid.at(311), 4u);
  EXPECT_EQ(s.orphan_correlations_graph, 0u);
  EXPECT_EQ(s.orphan_kernels, 0u);
}

TEST(JoinerTest, Orphans) {
  Joiner j;
  j.on_correlation(10, 1, 211);   // eager, never a kernel
  j.on_correlation(10, 2, -515);  // graph, never a kernel
  j.on_correlation(10, 3, 312);   // graph, never a kernel
  j.on_kernel(kernel(10, 4, "lost"));
  j.on_kernel(kernel(10, 4, "lost", 9));
  EXPECT_EQ(j.awaiting_kernels(), 3u);
  EXPECT_EQ(j.awaiting_pids(), std::vector<uint32_t>{10});
  Summary s = summary(j);
  EXPECT_EQ(orphans(s), (Orphans{2, 1, 2}));
  EXPECT_EQ(s.kernels_matched, 0u);
  EXPECT_EQ(s.graph_kernel_records, 1u);
  EXPECT_EQ(counts(s, "lost"), (Counts{2, 0}));
  EXPECT_TRUE(s.matched_by_cbid.empty());
}

TEST(JoinerTest, KeyedByPidAndCorrelation) {
  Joiner j;
  j.on_correlation(10, 1, 211);
  EXPECT_FALSE(j.on_kernel(kernel(11, 1)).matched);  // same ID, other process
  Summary s = summary(j);
  EXPECT_EQ(s.orphan_kernels, 1u);
  EXPECT_EQ(s.orphan_correlations_eager, 1u);
  EXPECT_EQ(s.pids, 2u);
}

TEST(JoinerTest, SecondKernelOfAnEagerLaunchStillMatches) {
  Joiner j(Joiner::Limits{1 << 20, 30'000'000'000ull, /*retired_window=*/2});
  j.on_correlation(10, 1, 480);  // e.g. a multi-device cooperative launch
  EXPECT_TRUE(j.on_kernel(kernel(10, 1)).matched);
  EXPECT_TRUE(j.on_kernel(kernel(10, 1)).matched);
  // Beyond the window the launch is forgotten.
  j.on_correlation(10, 2, 211);
  j.on_kernel(kernel(10, 2));
  j.on_correlation(10, 3, 211);
  j.on_kernel(kernel(10, 3));
  EXPECT_FALSE(j.on_kernel(kernel(10, 1)).matched);
  Summary s = summary(j);
  EXPECT_EQ(s.kernels_matched, 4u);
  EXPECT_EQ(s.matched_by_cbid.at(480), 2u);
  EXPECT_EQ(s.orphan_kernels, 1u);
}

TEST(JoinerTest, DuplicateAnnouncementEndsTheFirst) {
  Joiner j;
  j.on_correlation(10, 1, 211);
  j.on_correlation(10, 1, 211);
  j.on_kernel(kernel(10, 1));
  Summary s = summary(j);
  EXPECT_EQ(s.duplicate_correlations, 1u);
  EXPECT_EQ(s.orphan_correlations_eager, 1u);
  EXPECT_EQ(s.kernels_matched, 1u);
  EXPECT_EQ(j.awaiting_kernels(), 0u);
}

TEST(JoinerTest, ClosingSetsAsideKernelsOfUnseenLaunches) {
  Joiner j;
  j.on_correlation(10, 1, -514);
  j.on_correlation(10, 2, 211);
  j.on_kernel(kernel(10, 3, "before"));  // arrived before closing: a real orphan
  j.set_closing();
  EXPECT_TRUE(j.on_kernel(kernel(10, 1, "g", 5)).matched);
  EXPECT_TRUE(j.on_kernel(kernel(10, 2, "e")).matched);
  EXPECT_FALSE(j.on_kernel(kernel(10, 4, "unseen")).matched);
  EXPECT_FALSE(j.on_kernel(kernel(10, 6, "late")).matched);
  j.on_correlation(10, 6, 211);  // its announcement still comes: it matches
  Summary s = summary(j);
  EXPECT_EQ(s.kernel_records, 5u);
  EXPECT_EQ(s.kernels_matched, 3u);
  EXPECT_EQ(s.orphan_kernels, 1u);
  EXPECT_EQ(s.kernels_ignored_at_exit, 1u);
  EXPECT_EQ(s.kernel_records, s.kernels_matched + s.orphan_kernels + s.kernels_ignored_at_exit);
  EXPECT_EQ(s.orphan_correlations_eager + s.orphan_correlations_graph, 0u);
}

TEST(JoinerTest, OtherEventsCount) {
  Joiner j;
  j.on_error(1);
  j.on_gpu_config(2);
  j.on_gpu_config(2);
  j.on_other(3);
  Summary s = summary(j);
  EXPECT_EQ(s.errors, 1u);
  EXPECT_EQ(s.gpu_config, 2u);
  EXPECT_EQ(s.events, 4u);
  EXPECT_EQ(s.pids, 3u);
}

// What the joiner hands on: every match once, with the launch's stack, also when the kernel
// came first.
struct Recorder : MatchSink {
  struct Item {
    Launch launch;
    uint32_t corr, name, tag;
    uint64_t gpu_ns;
  };
  std::vector<Item> items;
  void on_match(const Launch &l, const KernelRecord &k, uint32_t name, uint32_t tag) override {
    items.push_back({l, k.correlation_id, name, tag, k.duration_ns()});
  }
};

TEST(JoinerTest, SinkGetsEveryMatchWithItsLaunchStack) {
  Recorder rec;
  Joiner j(Joiner::Limits{}, &rec);
  j.on_correlation(10, 1, 211, /*stack_id=*/7);
  j.on_kernel(kernel(10, 1, "a"), /*tag=*/0);
  j.on_kernel(kernel(10, 2, "b", 3), /*tag=*/42);  // before its launch
  EXPECT_EQ(rec.items.size(), 1u);
  j.on_correlation(10, 2, 311, /*stack_id=*/8);
  j.on_kernel(kernel(10, 2, "c", 3), 43);
  ASSERT_EQ(rec.items.size(), 3u);
  EXPECT_EQ(rec.items[0].launch.stack_id, 7u);
  EXPECT_EQ(rec.items[1].launch.stack_id, 8u);
  EXPECT_EQ(rec.items[1].tag, 42u);
  EXPECT_EQ(j.names().raw(rec.items[1].name), "b");
  EXPECT_EQ(rec.items[1].gpu_ns, 1000u);
  EXPECT_EQ(rec.items[2].launch.signed_cbid, 311);
  EXPECT_EQ(rec.items[2].tag, 43u);
}

// Issue 8 item 7: launches whose kernels never come and kernels whose launches never come
// (graph launches too) were kept forever: 875 MB after 5 minutes of a stress run. Held now: at
// most max_entries, nothing older than max_age without activity; all of it counted.
TEST(JoinerBoundTest, NeverHoldsMoreThanMaxEntries) {
  Joiner j(Joiner::Limits{1000, 30'000'000'000ull, 16});
  size_t peak = 0;
  const uint32_t n = 100000;
  for (uint32_t i = 0; i < n; ++i) {
    j.on_correlation(10, 2 * i, i % 2 ? 211 : -514);  // no kernel ever comes
    j.on_kernel(kernel(10, 2 * i + 1, "k"));          // no launch ever comes
    peak = std::max(peak, j.entries());
  }
  EXPECT_LE(peak, 1000u);
  Summary s;
  j.add_to(&s);
  EXPECT_LE(s.joiner_peak_entries, 1000u);
  EXPECT_EQ(s.forgotten_correlations_eager + s.forgotten_correlations_graph + s.forgotten_kernels +
                j.entries(),
            2 * n);
  EXPECT_GT(s.forgotten_correlations_eager, 0u);
  EXPECT_GT(s.forgotten_correlations_graph, 0u);
  EXPECT_GT(s.forgotten_kernels, 0u);
  // All of it for the cap (no time passed): the count the tool warns of as it happens.
  EXPECT_EQ(s.forgotten_at_max_pending,
            s.forgotten_correlations_eager + s.forgotten_correlations_graph + s.forgotten_kernels);
  EXPECT_EQ(j.forgotten_at_max_pending(), s.forgotten_at_max_pending);
  // Forgotten ones are orphans: nothing leaves the accounting.
  EXPECT_EQ(s.orphan_correlations_eager + s.orphan_correlations_graph, n);
  EXPECT_EQ(s.orphan_kernels, n);
  EXPECT_EQ(s.kernel_records, s.kernels_matched + s.orphan_kernels + s.kernels_ignored_at_exit);
  EXPECT_EQ(j.awaiting_kernels(), s.orphan_correlations_eager + s.orphan_correlations_graph -
                                      s.forgotten_correlations_eager - s.forgotten_correlations_graph);
}

TEST(JoinerBoundTest, ForgetsByAgeButKeepsWhatIsActive) {
  constexpr uint64_t kSecond = 1'000'000'000ull;
  Joiner j(Joiner::Limits{1 << 20, 10 * kSecond, 1 << 16});
  auto at = [](KernelRecord k, uint64_t t) {
    k.seen_ns = t;
    return k;
  };
  j.on_correlation(10, 1, 211, 0, 1 * kSecond);   // eager, its kernel never comes
  j.on_kernel(at(kernel(10, 2, "lost"), 1 * kSecond));  // its launch never comes
  j.on_correlation(10, 3, 311, 0, 1 * kSecond);   // a graph launch whose kernels keep coming
  for (uint64_t t = 2; t <= 30; t += 3) EXPECT_TRUE(j.on_kernel(at(kernel(10, 3, "g", 5), t * kSecond)).matched);
  Summary s;
  j.add_to(&s);
  EXPECT_EQ(s.forgotten_correlations_eager, 1u);
  EXPECT_EQ(s.forgotten_kernels, 1u);
  EXPECT_EQ(s.forgotten_at_max_pending, 0u);  // by age, not for the cap
  EXPECT_EQ(s.retired_graph_launches, 0u);  // active: kept
  EXPECT_EQ(j.entries(), 1u);
  EXPECT_EQ(j.awaiting_kernels(), 0u);
  // Idle for max_age: the graph launch goes too (counted, not a loss) ...
  j.tick(45 * kSecond);
  EXPECT_EQ(j.entries(), 0u);
  s = summary(j);
  EXPECT_EQ(s.retired_graph_launches, 1u);
  EXPECT_EQ(s.orphan_correlations_eager, 1u);
  EXPECT_EQ(s.orphan_correlations_graph, 0u);
  EXPECT_EQ(s.orphan_kernels, 1u);
  // ... and a straggler of it still matches (the retired window).
  EXPECT_TRUE(j.on_kernel(at(kernel(10, 3, "g", 5), 46 * kSecond)).matched);
  // Nothing is forgotten before max_age / 2.
  j.on_correlation(10, 9, 211, 0, 47 * kSecond);
  j.tick(51 * kSecond);
  EXPECT_EQ(j.entries(), 1u);
  EXPECT_EQ(j.awaiting_kernels(), 1u);
}

TEST(ReportTest, ApiNames) {
  EXPECT_STREQ(api_name(211), "cudaLaunchKernel");
  EXPECT_STREQ(api_name(-307), "cuLaunchKernel");
  EXPECT_STREQ(api_name(-514), "cuGraphLaunch");
  EXPECT_STREQ(api_name(311), "cudaGraphLaunch");
  EXPECT_STREQ(api_name(99999), "unknown");
}

TEST(ReportTest, JsonKeepsUtf8Names) {
  // Kernel names are the program's bytes: UTF-8 stays UTF-8 (the hand-written escaper turned
  // every byte >= 0x80 into \u00XX, so "k_café" came out as "k_cafÃ©").
  Joiner j;
  j.on_correlation(10, 1, 211);
  j.on_kernel(kernel(10, 1, "k_caf\xc3\xa9"));
  // A name cut by the 255-byte limit inside a character: not UTF-8, still valid JSON.
  j.on_correlation(10, 2, 211);
  j.on_kernel(kernel(10, 2, "k_cut\xc3"));
  Summary s;
  j.add_to(&s);
  const std::string line = json_line(summary_json(s));
  EXPECT_NE(line.find("\"k_caf\xc3\xa9\""), std::string::npos) << line;
  EXPECT_EQ(line.find("\\u00c3"), std::string::npos) << line;
  const nlohmann::json parsed = nlohmann::json::parse(line);
  EXPECT_EQ(parsed["kernels_by_name"]["k_caf\xc3\xa9"]["records"], 1);
  EXPECT_EQ(parsed["kernels_by_name"]["k_cut\xef\xbf\xbd"]["matched"], 1);  // U+FFFD
}

TEST(ReportTest, JsonHasTheKeysScriptsUse) {
  Joiner j;
  j.on_correlation(10, 1, -514);
  j.on_kernel(kernel(10, 1, "k\"q", 2));
  j.on_correlation(10, 2, 211);
  Summary s;
  j.add_to(&s);
  s.duration_s = 2;
  s.events_per_s = 1.5;
  const std::string js = json_line(summary_json(s));
  EXPECT_EQ(js.front(), '{');
  EXPECT_EQ(js.back(), '}');
  const nlohmann::ordered_json o = nlohmann::ordered_json::parse(js);
  std::vector<std::string> keys;
  for (const auto &[k, v] : o.items()) keys.push_back(k);
  const std::vector<std::string> first = {
      "correlations", "correlations_by_cbid", "kernel_records", "graph_kernel_records",
      "kernels_matched", "graph_kernels_matched", "orphan_kernels", "orphan_correlations_eager",
      "orphan_correlations_graph", "graph_launches_with_kernels", "ringbuf_drops",
      "read_errors", "errors", "events", "duration_s", "events_per_s", "pids", "gpu_config",
      "kernels_by_name", "matched_by_cbid", "kernel_executed_events"};
  ASSERT_GE(keys.size(), first.size());
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + first.size()), first);
  EXPECT_EQ(o["correlations_by_cbid"].dump(), "{\"-514\":1,\"211\":1}");
  EXPECT_EQ(o["kernels_by_name"].dump(), "{\"k\\\"q\":{\"records\":1,\"matched\":1}}");
  EXPECT_EQ(o["matched_by_cbid"].dump(), "{\"-514\":1}");
  EXPECT_EQ(o["orphan_correlations_eager"], 1);
  EXPECT_EQ(o["duration_s"], 2.0);
}

TEST(ReportTest, CounterTableIsWellFormed) {
  // Every counter is a JSON key, in the table's order, before the tables; the -v lines are
  // numbered 1..N without a gap or a repeat, and each has a label.
  const std::string js = json_line(summary_json(Summary{}));
  const nlohmann::ordered_json o = nlohmann::ordered_json::parse(js);
  auto it = o.items().begin();
  std::vector<int> text;
  for (const CounterInfo &c : kCounters) {
    ASSERT_NE(it, o.items().end());
    EXPECT_EQ(it.key(), c.name);
    ++it;
    EXPECT_TRUE(*c.help) << c.name;
    EXPECT_EQ(c.text > 0, *c.label != 0) << c.name;
    if (c.text > 0) text.push_back(c.text);
  }
  EXPECT_EQ(it.key(), "gpu_time_by_stack");
  std::sort(text.begin(), text.end());
  for (size_t i = 0; i < text.size(); ++i) EXPECT_EQ(text[i], static_cast<int>(i + 1));
}

}  // namespace
}  // namespace parcagpu::trace
