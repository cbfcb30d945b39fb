// Unit tests of GPU time by stack (no BPF): tools/trace/profile.h, tools/trace/flamegraph.h, the tables
// of tools/trace/report.h.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>

#include "flamegraph.h"
#include "launch_sites.h"
#include "processes.h"
#include "profile.h"
#include "report.h"
#include "test_frames.h"
#include "test_output.h"

namespace parcagpu::trace {
namespace {

using test_frames::fr;

struct Fixture {
  StackTable stacks;
  NameTable names;
  GpuProfile p;
  uint32_t train, eval, add, mul;
  Fixture() {
    // innermost first, as symbolized
    train = stacks.intern({fr("model::step(int)", "/src/model.cc", 40), fr("train_loop()", "/src/main.cc", 10),
                           fr("main", "/src/main.cc", 3)});
    eval = stacks.intern({fr("model::eval()", "/src/model.cc", 90, true), fr("main", "/src/main.cc", 5)});
    add = names.id("_Z5k_addPfi");
    mul = names.id("_Z5k_mulPfi");
    for (int i = 0; i < 3; ++i) p.add(train, add, 1000);
    p.add(train, mul, 500);
    p.add(eval, mul, 2000);
    p.add(StackTable::kNone, add, 100);
  }
};

TEST(ProfileTest, RowsByGpuTime) {
  Fixture x;
  EXPECT_EQ(x.p.total_ns(), 5600u);
  EXPECT_EQ(x.p.total_kernels(), 6u);
  EXPECT_EQ(x.p.stacks(), 3u);
  const auto rows = x.p.rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].stack_id, x.train);
  EXPECT_EQ(rows[0].gpu_ns, 3500u);
  EXPECT_EQ(rows[0].kernels, 4u);
  ASSERT_EQ(rows[0].by_kernel.size(), 2u);
  EXPECT_EQ(rows[0].by_kernel[0].kernel, x.add);
  EXPECT_EQ(rows[0].by_kernel[0].gpu_ns, 3000u);
  EXPECT_EQ(rows[1].stack_id, x.eval);
  EXPECT_EQ(rows[2].stack_id, StackTable::kNone);
  const auto top = summarize_stacks(x.p, x.stacks, x.names, 2);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].frames.front(), "model::step (model.cc:40)");
  EXPECT_EQ(top[0].by_kernel[0].kernel_demangled, "k_add(float*, int)");
  EXPECT_EQ(top[1].frames.front(), "model::eval (model.cc:90) [inlined]");
  EXPECT_EQ(summarize_stacks(x.p, x.stacks, x.names, 10)[2].frames,
            std::vector<std::string>{"[no stack]"});
}

TEST(ProfileTest, FoldedStacksRootFirst) {
  Fixture x;
  const std::string folded = folded_text(folded_stacks(x.p, x.stacks, x.names));
  EXPECT_EQ(folded,
            "main (main.cc:3);train_loop (main.cc:10);model::step (model.cc:40);[gpu] k_add 3000\n"
            "main (main.cc:3);train_loop (main.cc:10);model::step (model.cc:40);[gpu] k_mul 500\n"
            "main (main.cc:5);model::eval (model.cc:90) [inlined];[gpu] k_mul 2000\n"
            "[no stack];[gpu] k_add 100\n");
  // Every line: frames separated by ';', a space, an integer (flamegraph.pl's format).
  const std::regex line("^[^ ;][^;]*(;[^;]+)* [0-9]+$");
  size_t start = 0;
  while (start < folded.size()) {
    const size_t nl = folded.find('\n', start);
    EXPECT_TRUE(std::regex_match(folded.substr(start, nl - start), line)) << folded.substr(start, nl - start);
    start = nl + 1;
  }
}

// Two launch sites of one function are two stacks in the text report: in the folded stacks and
// the flame graph too (issue 29), by line, or without one by offset. Never one key twice.
TEST(ProfileTest, TwoLaunchSitesOfOneFunctionStayApart) {
  const test_frames::TwoLaunchSites x;
  ASSERT_EQ(std::set<uint32_t>(x.sites.begin(), x.sites.end()).size(), 4u);
  const std::vector<StackSummary> rows = summarize_stacks(x.profile, x.stacks, x.names, 10);
  ASSERT_EQ(rows.size(), 4u);
  // The text report names them as the folded stacks do (issue 44: two stacks through one stripped
  // function read alike before): by line, or without one by offset.
  std::set<std::string> innermost;
  for (const StackSummary &r : rows) innermost.insert(r.frames.front());
  EXPECT_EQ(innermost, (std::set<std::string>{"launch (a.cc:10)", "launch (a.cc:12)", "worker+0x1a (app)",
                                              "worker+0x2f (app)"}));
  const std::string table = test_output::printed(
      [&](FILE *f) { print_stack_table(f, "GPU time by launch stack", rows, 530, 4, 4); });
  EXPECT_NE(table.find("stack     worker+0x1a (app)\n"), std::string::npos) << table;
  EXPECT_NE(table.find("stack     worker+0x2f (app)\n"), std::string::npos) << table;
  const std::vector<FoldedStack> folded = folded_stacks(x.profile, x.stacks, x.names);
  EXPECT_EQ(folded_text(folded),
            "main (main.cc:3);launch (a.cc:10);[gpu] k_add 300\n"
            "main (main.cc:3);launch (a.cc:12);[gpu] k_add 200\n"
            "main (main.cc:4);worker+0x1a (app);[gpu] k_add 20\n"
            "main (main.cc:4);worker+0x2f (app);[gpu] k_add 10\n");
  // The flame graph: one main per line, the two launch sites side by side above it.
  const std::string svg = flamegraph_svg(folded, {});
  const std::regex frame_re("data-name=\"([^\"]*)\" data-kind=\"[a-z]+\" data-value=\"([0-9]+)\" "
                            "data-depth=\"([0-9]+)\"");
  std::map<std::string, uint64_t> value;
  int add_leaves = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), frame_re); it != std::sregex_iterator(); ++it) {
    if ((*it)[1] == "[gpu] k_add") {
      ++add_leaves;  // one above each launch site
      continue;
    }
    EXPECT_TRUE(value.emplace((*it)[1].str() + "@" + (*it)[3].str(), std::stoull((*it)[2])).second) << (*it)[0];
  }
  EXPECT_EQ(add_leaves, 4);
  EXPECT_EQ(value.at("main (main.cc:3)@1"), 500u);
  EXPECT_EQ(value.at("launch (a.cc:10)@2"), 300u);
  EXPECT_EQ(value.at("launch (a.cc:12)@2"), 200u);
  EXPECT_EQ(value.at("worker+0x1a (app)@2"), 20u);
  EXPECT_EQ(value.at("worker+0x2f (app)@2"), 10u);
}

// Stacks that still print alike (a ';' replaced, two stacks of one text) are one line.
TEST(ProfileTest, FoldedTextNeverRepeatsAKey) {
  std::vector<FoldedStack> s(3);
  s[0].frames = {{"a;b"}, {"[gpu] k", FlameFrame::Kind::Gpu}};
  s[0].value = 5;
  s[1].frames = {{"c"}, {"[gpu] k", FlameFrame::Kind::Gpu}};
  s[1].value = 7;
  s[2].frames = {{"a:b"}, {"[gpu] k", FlameFrame::Kind::Gpu}};
  s[2].value = 1;
  EXPECT_EQ(folded_text(s), "a:b;[gpu] k 6\nc;[gpu] k 7\n");
}

TEST(FlameGraphTest, WidthIsGpuTime) {
  Fixture x;
  FlameGraphOptions o;
  o.width = 1020;  // 1000 px of graph between the 10 px margins
  const std::string svg = flamegraph_svg(folded_stacks(x.p, x.stacks, x.names), o);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("data-total-ns=\"5600\""), std::string::npos);
  // One <g> per node of the merged tree: all, [no stack], main at its two lines, train_loop,
  // model::eval, model::step, and the kernels under them: 4 GPU leaves.
  const std::regex frame_re("<g class=\"frame\" data-name=\"([^\"]*)\" data-kind=\"([a-z]+)\" "
                            "data-value=\"([0-9]+)\" data-depth=\"([0-9]+)\"><title>[^<]*</title>"
                            "<rect x=\"([0-9.]+)\" y=\"([0-9]+)\" width=\"([0-9.]+)\"");
  std::map<std::string, std::tuple<std::string, uint64_t, int, double, int, double>> frames;
  int gpu = 0;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), frame_re); it != std::sregex_iterator(); ++it) {
    const auto &m = *it;
    const std::string key = m[1].str() + "@" + m[4].str();
    frames[key] = {m[2], std::stoull(m[3]), std::stoi(m[4]), std::stod(m[5]), std::stoi(m[6]), std::stod(m[7])};
    gpu += m[2] == "gpu";
  }
  EXPECT_EQ(frames.size(), 11u) << svg;
  EXPECT_EQ(gpu, 4);
  for (const auto &[k, f] : frames) {
    const auto &[kind, value, depth, xpos, y, w] = f;
    EXPECT_NEAR(w, value * 1000.0 / 5600.0, 0.01) << k;  // width = GPU time
    EXPECT_GE(xpos, 10.0);
    EXPECT_LE(xpos + w, 1010.01);
  }
  // The root spans everything, at the bottom; a child sits one row above its parent.
  const auto &root = frames.at("all@0");
  EXPECT_EQ(std::get<1>(root), 5600u);
  EXPECT_NEAR(std::get<5>(root), 1000.0, 0.01);
  const auto &main = frames.at("main (main.cc:3)@1");
  EXPECT_EQ(std::get<1>(main), 3500u);
  EXPECT_EQ(std::get<1>(frames.at("main (main.cc:5)@1")), 2000u);
  EXPECT_EQ(std::get<4>(main), std::get<4>(root) - o.frame_height);
  EXPECT_NE(svg.find("<title>[gpu] k_add (3.000 us, 53.57%)</title>"), std::string::npos);
  // Names are escaped.
  GpuProfile p;
  StackTable st;
  NameTable names;
  p.add(st.intern({fr("ns::f<a&b>(int)")}), names.id("k\"<>"), 10);
  const std::string esc = flamegraph_svg(folded_stacks(p, st, names), o);
  EXPECT_NE(esc.find("data-name=\"ns::f&lt;a&amp;b&gt;+0x0 (app)\""), std::string::npos) << esc;
  EXPECT_NE(esc.find("[gpu] k&quot;&lt;&gt;"), std::string::npos);
  EXPECT_NE(flamegraph_svg({}, o).find("no GPU time recorded"), std::string::npos);
}

TEST(ReportTest, StackTableText) {
  Fixture x;
  const std::string out = test_output::printed([&](FILE *f) {
    print_stack_table(f, "GPU time by launch stack", summarize_stacks(x.p, x.stacks, x.names, 2),
                      x.p.total_ns(), x.p.total_kernels(), x.p.stacks());
  });
  EXPECT_NE(out.find("GPU time by launch stack: 5.600 us of GPU time in 6 kernels, 3 stacks, top 2 shown"),
            std::string::npos) << out;
  EXPECT_NE(out.find("#1      3.500 us   62.5%        4 kernels"), std::string::npos) << out;
  EXPECT_NE(out.find("kernels       3.000 us        3  k_add(float*, int)"), std::string::npos) << out;
  EXPECT_NE(out.find("stack     model::step (model.cc:40)"), std::string::npos) << out;
  EXPECT_NE(out.find("          train_loop (main.cc:10)"), std::string::npos) << out;
}

TEST(ProcessesTest, RankFromTheEnvironmentBlock) {
  using namespace std::string_literals;
  const std::string env = "PATH=/bin\0MASTER_RANK=9\0RANK=3\0LOCAL_RANK=1\0WORLD_SIZE=8\0"s;
  EXPECT_EQ(environ_integer(env, "RANK"), 3);  // not MASTER_RANK's
  EXPECT_EQ(environ_integer(env, "LOCAL_RANK"), 1);
  EXPECT_EQ(environ_integer(env, "NODE_RANK"), std::nullopt);
  EXPECT_EQ(environ_integer("RANK=x1\0"s, "RANK"), std::nullopt);
  EXPECT_EQ(environ_integer("RANK=\0"s, "RANK"), std::nullopt);
  EXPECT_EQ(environ_integer("RANK=12"s, "RANK"), 12);  // the last variable, no NUL after it
  EXPECT_EQ(environ_integer("", "RANK"), std::nullopt);  // unreadable /proc/PID/environ
}

TEST(ProcessesTest, APidSeenAgainAfterItsProcessIsGoneIsAnotherProcess) {
  ProcessTable t;
  t.read = [](uint32_t) { return ProcessInfo{0, "app", 2, std::nullopt}; };
  const uint32_t a = t.id(50);
  EXPECT_EQ(t.id(50), a);
  EXPECT_EQ(t.info(a).pid, 50u);
  EXPECT_EQ(t.info(a).rank, 2);
  t.forget(50);
  EXPECT_NE(t.id(50), a);
  EXPECT_EQ(t.size(), 2u);
}

// Issue 29 item 3: GPU time by rank, each process's own kernels, ranked processes by rank.
TEST(ProcessesTest, GpuTimeByRank) {
  Fixture x;
  ProcessTable t;
  t.read = [](uint32_t pid) {
    ProcessInfo p;
    p.comm = "train";
    if (pid != 30) p.rank = pid == 10 ? 1 : 0;
    return p;
  };
  GpuProfile p;
  p.add(x.train, x.add, 1000, {t.id(10), 1});  // rank 1
  p.add(x.train, x.add, 1000, {t.id(10), 1});
  p.add(x.eval, x.mul, 500, {t.id(20), 0});  // rank 0
  p.add(x.train, x.mul, 300, {t.id(30), 0});  // no rank
  p.add(x.train, x.mul, 7);                   // no process: not in the table
  const std::vector<ProcessSummary> rows = summarize_processes(p, t, x.names, 10);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].pid, 20u);
  EXPECT_EQ(rows[0].rank, 0);
  EXPECT_EQ(rows[0].gpu_ns, 500u);
  EXPECT_EQ(rows[1].pid, 10u);
  EXPECT_EQ(rows[1].gpu_ns, 2000u);
  EXPECT_EQ(rows[1].kernels, 2u);
  ASSERT_EQ(rows[1].devices.size(), 1u);
  EXPECT_EQ(rows[1].devices[0].device, 1u);
  EXPECT_EQ(rows[1].by_kernel[0].kernel_demangled, "k_add(float*, int)");
  EXPECT_EQ(rows[2].pid, 30u);
  EXPECT_FALSE(rows[2].rank);
  // The stack table still adds the processes up.
  EXPECT_EQ(summarize_stacks(p, x.stacks, x.names, 10)[0].gpu_ns, 1000u + 1000u + 300u + 7u);

  const std::string out = test_output::printed([&](FILE *f) { print_process_table(f, rows); });
  EXPECT_NE(out.find("GPU time by rank: 2.800 us of GPU time in 4 kernels, 3 processes"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\n  rank 1 +pid 10 +train +2\.000 us +71\.4% +2 kernels +device 1 +top k_add)")))
      << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"(\n  rank - +pid 30 )"))) << out;
  const Json j = processes_json(rows);
  EXPECT_EQ(j[0]["rank"], 0);
  EXPECT_EQ(j[2]["rank"], nullptr);
  EXPECT_EQ(j[1]["devices"].dump(), "[{\"device\":1,\"gpu_ns\":2000,\"kernels\":2}]");
}

}  // namespace
}  // namespace parcagpu::trace
