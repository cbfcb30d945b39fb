// Unit tests of parcagpu-trace's joining and accounting (no BPF): trace/joiner.h, trace/report.h.
#include <gtest/gtest.h>

#include <string>

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
  j.fill(&s);
  return s;
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
  EXPECT_EQ(s.orphan_kernels, 0u);
  EXPECT_EQ(s.orphan_correlations_eager, 0u);
  EXPECT_EQ(s.orphan_correlations_graph, 0u);
  EXPECT_EQ(s.graph_launches_with_kernels, 0u);
  EXPECT_EQ(s.kernels_by_name.at("vecAdd").records, 1u);
  EXPECT_EQ(s.kernels_by_name.at("vecAdd").matched, 1u);
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
  EXPECT_EQ(s.orphan_correlations_eager, 1u);
  EXPECT_EQ(s.orphan_correlations_graph, 2u);
  EXPECT_EQ(s.orphan_kernels, 2u);
  EXPECT_EQ(s.kernels_matched, 0u);
  EXPECT_EQ(s.graph_kernel_records, 1u);
  EXPECT_EQ(s.kernels_by_name.at("lost").records, 2u);
  EXPECT_EQ(s.kernels_by_name.at("lost").matched, 0u);
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
  Joiner j(/*retired_window=*/2);
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

TEST(ReportTest, ApiNames) {
  EXPECT_STREQ(api_name(211), "cudaLaunchKernel");
  EXPECT_STREQ(api_name(-307), "cuLaunchKernel");
  EXPECT_STREQ(api_name(-514), "cuGraphLaunch");
  EXPECT_STREQ(api_name(311), "cudaGraphLaunch");
  EXPECT_STREQ(api_name(99999), "unknown");
}

TEST(ReportTest, JsonEscape) {
  EXPECT_EQ(json_escape("a\"b\\c"), "a\\\"b\\\\c");
  EXPECT_EQ(json_escape("x\ny\t"), "x\\ny\\t");
  EXPECT_EQ(json_escape(std::string("\x01\xc3", 2)), "\\u0001\\u00c3");
}

TEST(ReportTest, JsonHasTheKeysScriptsUse) {
  Joiner j;
  j.on_correlation(10, 1, -514);
  j.on_kernel(kernel(10, 1, "k\"q", 2));
  j.on_correlation(10, 2, 211);
  Summary s;
  j.fill(&s);
  s.duration_s = 2;
  s.events_per_s = 1.5;
  const std::string js = summary_json(s);
  EXPECT_EQ(js.front(), '{');
  EXPECT_EQ(js.back(), '}');
  for (const char *key :
       {"correlations", "correlations_by_cbid", "kernel_records", "graph_kernel_records",
        "kernels_matched", "graph_kernels_matched", "orphan_kernels", "orphan_correlations_eager",
        "orphan_correlations_graph", "graph_launches_with_kernels", "ringbuf_drops",
        "read_errors", "errors", "events", "duration_s", "events_per_s", "pids", "gpu_config",
        "kernels_by_name", "matched_by_cbid", "kernel_executed_events"})
    EXPECT_NE(js.find(std::string("\"") + key + "\": "), std::string::npos) << key;
  EXPECT_NE(js.find("\"correlations_by_cbid\": {\"-514\": 1, \"211\": 1}"), std::string::npos) << js;
  EXPECT_NE(js.find("\"kernels_by_name\": {\"k\\\"q\": {\"records\": 1, \"matched\": 1}}"),
            std::string::npos) << js;
  EXPECT_NE(js.find("\"matched_by_cbid\": {\"-514\": 1}"), std::string::npos) << js;
  EXPECT_NE(js.find("\"orphan_correlations_eager\": 1"), std::string::npos) << js;
  EXPECT_NE(js.find("\"duration_s\": 2.000"), std::string::npos) << js;
}

}  // namespace
}  // namespace parcagpu::trace
