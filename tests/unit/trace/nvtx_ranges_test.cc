// Unit tests of parcagpu-trace's NVTX ranges (tools/trace/nvtx_ranges.h): each thread's open
// ranges, their bounds, and the frames they put at the root of a launch's stack, alone and through
// the tracer's events (synthetic ones: no BPF).
#include "nvtx_ranges.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "parcagpu/abi.h"
#include "report.h"
#include "test_frames.h"
#include "test_output.h"
#include "tracer.h"

namespace parcagpu::trace {
namespace {

using test_frames::fr;
using test_frames::names;
using Ranges = std::vector<std::string_view>;
constexpr uint16_t kPush = PARCAGPU_NVTX_KIND_RANGE_PUSH, kPop = PARCAGPU_NVTX_KIND_RANGE_POP,
                   kStart = PARCAGPU_NVTX_KIND_RANGE_START, kEnd = PARCAGPU_NVTX_KIND_RANGE_END,
                   kMark = PARCAGPU_NVTX_KIND_MARK;

Counters counters(const NvtxRanges &r) {
  Counters c;
  r.add_to(&c);
  return c;
}

TEST(NvtxRangesTest, PushPopNestPerThread) {
  NvtxRanges r;
  r.on_record(1, 10, kPush, 0, "step");
  r.on_record(1, 10, kPush, 0, "forward");
  r.on_record(1, 11, kPush, 0, "loader");  // another thread: a stack of its own
  EXPECT_EQ(r.open_ranges(1, 10), (Ranges{"step", "forward"}));
  EXPECT_EQ(r.open_ranges(1, 11), (Ranges{"loader"}));
  EXPECT_EQ(r.open_ranges(2, 10), Ranges{});  // same tid, another process
  r.on_record(1, 10, kPop, 0, "");
  r.on_record(1, 10, kPush, 0, "backward");
  EXPECT_EQ(r.open_ranges(1, 10), (Ranges{"step", "backward"}));
  r.on_record(1, 10, kPop, 0, "");
  r.on_record(1, 10, kPop, 0, "");
  EXPECT_EQ(r.open_ranges(1, 10), Ranges{});
  EXPECT_EQ(r.threads(), 1u);  // a thread with nothing open holds nothing
  r.on_record(1, 10, kPop, 0, "");
  r.on_record(1, 10, kMark, 0, "checkpoint");
  const Counters c = counters(r);
  EXPECT_EQ(c.nvtx_records, 9u);
  EXPECT_EQ(c.nvtx_unmatched_pops, 1u);
  EXPECT_EQ(c.nvtx_marks, 1u);
  EXPECT_EQ(r.open_ranges(1, 10), Ranges{});  // a mark is no range
}

TEST(NvtxRangesTest, StartEndByRangeIdFromAnyThreadInOpeningOrder) {
  NvtxRanges r;
  r.on_record(1, 10, kPush, 0, "outer");
  r.on_record(1, 10, kStart, 7, "epoch");
  r.on_record(1, 10, kPush, 0, "inner");
  EXPECT_EQ(r.open_ranges(1, 10), (Ranges{"outer", "epoch", "inner"}));
  EXPECT_EQ(r.open_ranges(1, 11), Ranges{});  // shown on the thread that started it only
  r.on_record(1, 11, kEnd, 7, "");            // ended by another thread
  EXPECT_EQ(r.open_ranges(1, 10), (Ranges{"outer", "inner"}));
  r.on_record(1, 11, kEnd, 7, "");  // twice: not open any more
  r.on_record(2, 10, kEnd, 8, "");  // never started
  EXPECT_EQ(counters(r).nvtx_unmatched_ends, 2u);
}

TEST(NvtxRangesTest, DepthStartsAndThreadsAreCapped) {
  NvtxRanges r(NvtxRanges::Limits{2, 1, 2, 16});
  for (const char *m : {"a", "b", "c", "d"}) r.on_record(1, 10, kPush, 0, m);
  EXPECT_EQ(r.open_ranges(1, 10), (Ranges{"a", "b"}));
  r.on_record(1, 10, kPop, 0, "");  // d's pop
  r.on_record(1, 10, kPop, 0, "");  // c's pop: b stays open
  EXPECT_EQ(r.open_ranges(1, 10), (Ranges{"a", "b"}));
  r.on_record(1, 10, kPop, 0, "");
  EXPECT_EQ(r.open_ranges(1, 10), (Ranges{"a"}));
  r.on_record(1, 10, kStart, 1, "s1");
  r.on_record(1, 10, kStart, 2, "s2");  // over the cap of one
  EXPECT_EQ(r.open_ranges(1, 10), (Ranges{"a", "s1"}));
  r.on_record(1, 11, kPush, 0, "t11");
  r.on_record(1, 12, kPush, 0, "t12");  // a third thread: over the cap of two
  EXPECT_EQ(r.open_ranges(1, 12), Ranges{});
  EXPECT_EQ(r.threads(), 2u);
  const Counters c = counters(r);
  EXPECT_EQ(c.nvtx_depth_overflows, 2u);
  EXPECT_EQ(c.nvtx_starts_over_cap, 1u);
  EXPECT_EQ(c.nvtx_threads_over_cap, 1u);
  EXPECT_EQ(c.nvtx_unmatched_pops, 0u);
}

TEST(NvtxRangesTest, ThreadExitAndProcessGoneFreeWhatIsOpen) {
  NvtxRanges r;
  r.on_record(1, 10, kPush, 0, "never popped");
  r.on_record(1, 10, kStart, 3, "never ended");
  r.on_record(1, 11, kPush, 0, "other");
  r.on_record(2, 20, kPush, 0, "p2");
  r.thread_exit(1, 10);
  EXPECT_EQ(r.open_ranges(1, 10), Ranges{});
  EXPECT_EQ(r.threads(), 2u);
  r.on_record(1, 11, kEnd, 3, "");  // its start went with the thread
  r.forget_process(1);
  EXPECT_EQ(r.threads(), 1u);
  EXPECT_EQ(r.open_ranges(2, 20), (Ranges{"p2"}));
  const Counters c = counters(r);
  EXPECT_EQ(c.nvtx_ranges_left_open, 3u);
  EXPECT_EQ(c.nvtx_unmatched_ends, 1u);
}

TEST(NvtxRangesTest, LaunchStackPutsRangesAtTheRoot) {
  NvtxRanges r;
  StackTable t;
  const uint32_t site = t.intern({fr("launch_site"), fr("main")});
  EXPECT_EQ(r.launch_stack(1, 10, site, &t), site);  // no ranges: the stack as it is
  r.on_record(1, 10, kPush, 0, "step");
  r.on_record(1, 10, kPush, 0, "forward");
  const uint32_t in_ranges = r.launch_stack(1, 10, site, &t);
  EXPECT_NE(in_ranges, site);
  EXPECT_EQ(names(t.frames(in_ranges)),
            (std::vector<std::string>{"launch_site", "main", "[nvtx] forward", "[nvtx] step"}));
  EXPECT_EQ(r.launch_stack(1, 10, site, &t), in_ranges);  // the same state: the same stack
  r.on_record(1, 10, kPop, 0, "");
  r.on_record(1, 10, kPush, 0, "");  // no message
  EXPECT_EQ(names(t.frames(r.launch_stack(1, 10, StackTable::kNone, &t))),
            (std::vector<std::string>{"[no stack]", "[nvtx] (no message)", "[nvtx] step"}));
  EXPECT_EQ(counters(r).nvtx_launches_in_ranges, 3u);
}

TEST(NvtxRangesTest, TextTableShowsTheRangesOfACutStack) {
  StackSummary row;
  row.gpu_ns = row.kernels = 1;
  for (int i = 0; i < 20; ++i) row.frames.push_back("f" + std::to_string(i));
  row.frames.push_back("[nvtx] forward");
  row.frames.push_back("[nvtx] step");
  const std::string text =
      test_output::printed([&](FILE *f) { print_stack_table(f, "T", {row}, 1, 1, 1); });
  EXPECT_NE(text.find("f11\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("f12\n"), std::string::npos) << text;
  EXPECT_NE(
      text.find(
          "... 8 outer frames\n                 [nvtx] forward\n                 [nvtx] step\n"),
      std::string::npos)
      << text;
}

// The tracer's side: synthetic ring-buffer events, as the BPF program sends them.
struct TracerFeed {
  Options opt;
  std::unique_ptr<Tracer> tracer;
  uint32_t pid = static_cast<uint32_t>(getpid()), tid = pid;
  explicit TracerFeed(bool stacks_off = true) {
    opt.stacks = !stacks_off;
    opt.linger_s = 0;
    tracer = std::make_unique<Tracer>(opt);
  }
  static pt_header &header(pt_header &h) { return h; }
  template <class E>
  static pt_header &header(E &e) {
    return e.h;
  }
  template <class E>
  E event(uint32_t type) {
    E e{};
    pt_header &h = header(e);
    h.type = type;
    h.pid = pid;
    h.tid = tid;
    h.ts_ns = 1'000'000;
    return e;
  }
  void nvtx(uint16_t kind, const char *message, uint64_t range_id = 0) {
    auto e = event<pt_nvtx_event>(PT_EV_NVTX);
    e.kind = kind;
    e.range_id = range_id;
    std::snprintf(e.message, sizeof e.message, "%s", message);
    tracer->on_event(&e, sizeof e);
  }
  void launch(uint32_t corr, const char *kernel, uint64_t ns) {
    auto c = event<pt_correlation_event>(PT_EV_CORRELATION);
    c.correlation_id = corr;
    c.signed_cbid = 211;
    tracer->on_event(&c, sizeof c);
    auto k = event<pt_kernel_event>(PT_EV_KERNEL);
    k.correlation_id = corr;
    k.kind = PARCAGPU_KIND_CONCURRENT_KERNEL;
    k.start = 100'000 * corr;  // one after the other on the stream: none overlaps
    k.end = k.start + ns;
    std::snprintf(k.name, sizeof k.name, "%s", kernel);
    tracer->on_event(&k, sizeof k);
  }
  std::string folded() {
    char path[] = "/tmp/nvtx_ranges_test_XXXXXX";
    const int fd = mkstemp(path);
    close(fd);
    opt.folded_path = path;
    uint64_t stats[PT_STAT_MAX] = {};
    EXPECT_TRUE(tracer->report(tracer->summarize(stats, 1.0, {})));
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    unlink(path);
    return text.str();
  }
};

std::set<std::string> lines(const std::string &text) {
  std::set<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.insert(line);
  return out;
}

TEST(NvtxRangesTest, TracerFoldsLaunchesUnderTheirThreadsRanges) {
  TracerFeed f;
  f.launch(1, "before", 1000);  // no range open yet
  f.nvtx(kPush, "step");
  f.nvtx(kPush, "forward");
  f.launch(2, "fwd_kernel", 3000);
  f.nvtx(kMark, "half way");
  f.nvtx(kPop, "");
  f.nvtx(kPush, "backward");
  f.launch(3, "bwd_kernel", 6000);
  f.nvtx(kPop, "");
  f.nvtx(kPop, "");
  f.launch(4, "after", 500);
  const std::set<std::string> folded = lines(f.folded());
  EXPECT_EQ(folded,
            (std::set<std::string>{"[no stack];[gpu] before 1000",
                                   "[nvtx] step;[nvtx] forward;[no stack];[gpu] fwd_kernel 3000",
                                   "[nvtx] step;[nvtx] backward;[no stack];[gpu] bwd_kernel 6000",
                                   "[no stack];[gpu] after 500"}));
  uint64_t stats[PT_STAT_MAX] = {};
  const Summary s = f.tracer->summarize(stats, 1.0, {});
  EXPECT_EQ(s.nvtx_records, 7u);
  EXPECT_EQ(s.nvtx_marks, 1u);
  EXPECT_EQ(s.nvtx_launches_in_ranges, 2u);
}

TEST(NvtxRangesTest, TracerFreesAThreadsRangesAtItsExit) {
  TracerFeed f;
  f.nvtx(kPush, "left open");
  auto exit = f.event<pt_header>(PT_EV_NVTX_THREAD_EXIT);
  f.tracer->on_event(&exit, sizeof exit);
  f.launch(1, "k", 100);  // the tid again: a new thread, no ranges
  EXPECT_EQ(f.folded().find("[nvtx]"), std::string::npos);
  uint64_t stats[PT_STAT_MAX] = {};
  EXPECT_EQ(f.tracer->summarize(stats, 1.0, {}).nvtx_ranges_left_open, 1u);
}

}  // namespace
}  // namespace parcagpu::trace
