// Unit tests of --pprof (tools/trace/pprof.h): a profile built from known stacks, gzip-compressed,
// read back with the classes protoc generated from tools/trace/proto/profile.proto.
#include <gtest/gtest.h>
#include <zlib.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "pprof.h"
#include "profile.pb.h"
#include "launch_sites.h"
#include "test_frames.h"

namespace parcagpu::trace {
namespace {

namespace pb = perftools::profiles;

using test_frames::fr;

std::string gunzip(const std::string &gz) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);  // gzip only: a zlib stream would fail here
  std::string out(1 << 20, '\0');
  z.next_in = reinterpret_cast<Bytef *>(const_cast<char *>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());
  z.next_out = reinterpret_cast<Bytef *>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  inflateEnd(&z);
  return out;
}

struct Decoded {
  pb::Profile p;
  const std::string &s(int64_t i) const { return p.string_table(static_cast<int>(i)); }
  const pb::Location &location(uint64_t id) const {
    for (const pb::Location &l : p.location())
      if (l.id() == id) return l;
    ADD_FAILURE() << "no location " << id;
    return p.location(0);
  }
  const pb::Function &function(uint64_t id) const {
    for (const pb::Function &f : p.function())
      if (f.id() == id) return f;
    ADD_FAILURE() << "no function " << id;
    return p.function(0);
  }
  std::string label(const pb::Sample &smp, const std::string &key) const {
    for (const pb::Label &l : smp.label())
      if (s(l.key()) == key) return s(l.str());
    return "";
  }
  // "function file:line" per line of each location, leaf first.
  std::vector<std::string> stack(const pb::Sample &smp) const {
    std::vector<std::string> out;
    for (uint64_t id : smp.location_id())
      for (const pb::Line &line : location(id).line()) {
        const pb::Function &f = function(line.function_id());
        out.push_back(s(f.name()) + (s(f.filename()).empty() ? "" : " " + s(f.filename()) + ":" +
                                                                       std::to_string(line.line())));
      }
    return out;
  }
};

TEST(PprofTest, RoundTripThroughGzipAndTheGeneratedClasses) {
  StackTable stacks;
  NameTable names;
  GpuProfile gp;
  // innermost first; model::eval is inlined into main's code at main.cc:5
  const uint32_t train = stacks.intern({fr("model::step(int)", "/src/model.cc", 40),
                                        fr("train_loop()", "/src/main.cc", 10), fr("main", "/src/main.cc", 3)});
  const uint32_t eval = stacks.intern({fr("model::eval()", "/src/model.cc", 90, true), fr("main", "/src/main.cc", 5)});
  const uint32_t add = names.id("_Z5k_addPfi"), mul = names.id("_Z5k_mulPfi");
  for (int i = 0; i < 3; ++i) gp.add(train, add, 1000);
  gp.add(train, mul, 500);
  gp.add(eval, mul, 2000);
  gp.add(StackTable::kNone, add, 100);

  std::string gz;
  ASSERT_TRUE(gzip_compress(pprof_profile(gp, stacks, names, ProcessTable{}, {1700000000000000000, 3000000000}), &gz));
  ASSERT_GE(gz.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);  // gzip magic, as pprof expects on disk
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  Decoded d;
  ASSERT_TRUE(d.p.ParseFromString(gunzip(gz)));

  ASSERT_GE(d.p.string_table_size(), 1);
  EXPECT_EQ(d.p.string_table(0), "");
  ASSERT_EQ(d.p.sample_type_size(), 2);
  EXPECT_EQ(d.s(d.p.sample_type(0).type()), "kernels");
  EXPECT_EQ(d.s(d.p.sample_type(0).unit()), "count");
  EXPECT_EQ(d.s(d.p.sample_type(1).type()), "gpu");
  EXPECT_EQ(d.s(d.p.sample_type(1).unit()), "nanoseconds");
  EXPECT_EQ(d.s(d.p.default_sample_type()), "gpu");
  EXPECT_EQ(d.p.time_nanos(), 1700000000000000000);
  EXPECT_EQ(d.p.duration_nanos(), 3000000000);

  // One sample per (stack, kernel), values [kernels, GPU ns], the kernel demangled in a label.
  ASSERT_EQ(d.p.sample_size(), 4);
  int64_t total_ns = 0, total_kernels = 0;
  bool saw_train_add = false, saw_eval = false, saw_none = false;
  for (const pb::Sample &smp : d.p.sample()) {
    ASSERT_EQ(smp.value_size(), 2);
    total_kernels += smp.value(0);
    total_ns += smp.value(1);
    const std::string kernel = d.label(smp, "kernel");
    const std::vector<std::string> st = d.stack(smp);
    if (kernel == "k_add(float*, int)" && smp.value(1) == 3000) {
      saw_train_add = true;
      EXPECT_EQ(smp.value(0), 3);
      EXPECT_EQ(st, (std::vector<std::string>{"model::step /src/model.cc:40", "train_loop /src/main.cc:10",
                                              "main /src/main.cc:3"}));
    } else if (kernel == "k_mul(float*, int)" && smp.value(1) == 2000) {
      saw_eval = true;
      // The inlined call and its holder are one location with two lines, innermost first.
      ASSERT_EQ(smp.location_id_size(), 1);
      EXPECT_EQ(st, (std::vector<std::string>{"model::eval /src/model.cc:90", "main /src/main.cc:5"}));
    } else if (smp.value(1) == 100) {
      saw_none = true;
      EXPECT_EQ(st, (std::vector<std::string>{StackTable::pseudo_name(StackTable::kNone)}));
    }
  }
  EXPECT_TRUE(saw_train_add);
  EXPECT_TRUE(saw_eval);
  EXPECT_TRUE(saw_none);
  EXPECT_EQ(total_ns, 5600);
  EXPECT_EQ(total_kernels, 6);
  // The train stack's locations are shared by its two kernels' samples.
  EXPECT_EQ(d.p.location_size(), 3 + 1 + 1);
  ASSERT_EQ(d.p.mapping_size(), 1);  // /opt/app; the pseudo stack has none
  EXPECT_EQ(d.s(d.p.mapping(0).filename()), "/opt/app");
  EXPECT_TRUE(d.p.mapping(0).has_functions());
  EXPECT_TRUE(d.p.mapping(0).has_line_numbers());
  EXPECT_TRUE(d.p.mapping(0).has_inline_frames());
  for (const pb::Function &f : d.p.function()) EXPECT_NE(f.id(), 0u);
  for (const pb::Location &l : d.p.location()) EXPECT_NE(l.id(), 0u);
}

// Two launch sites of one function (issue 29): two locations, told apart by their lines, or
// without debug lines by their offsets, as the stack table and the text report tell them apart.
TEST(PprofTest, TwoLaunchSitesOfOneFunctionAreTwoLocations) {
  const test_frames::TwoLaunchSites x;
  Decoded d;
  ASSERT_TRUE(d.p.ParseFromString(pprof_profile(x.profile, x.stacks, x.names, ProcessTable{}, {})));
  ASSERT_EQ(d.p.sample_size(), 4);
  std::set<uint64_t> leaves;
  std::set<std::vector<uint64_t>> stacks_seen;
  for (const pb::Sample &smp : d.p.sample()) {
    leaves.insert(smp.location_id(0));
    stacks_seen.insert({smp.location_id().begin(), smp.location_id().end()});
  }
  EXPECT_EQ(leaves.size(), 4u);
  EXPECT_EQ(stacks_seen.size(), 4u);
  // launch at its two lines, worker twice (one function, no line), main at its two lines.
  EXPECT_EQ(d.p.location_size(), 6);
  EXPECT_EQ(d.p.function_size(), 3);
}

// Issue 29 item 3: the ranks of one job in one profile. One launch site in two processes is one
// stack, but two samples, each with its process's labels.
TEST(PprofTest, SamplesCarryTheirProcessAndRank) {
  StackTable stacks;
  NameTable names;
  GpuProfile gp;
  ProcessTable processes;
  processes.read = [](uint32_t pid) {
    ProcessInfo p;
    p.comm = "train";
    if (pid == 100) p.rank = 0;
    if (pid == 101) {
      p.rank = 1;
      p.local_rank = 1;
    }
    return p;  // pid 102: no rank in its environment
  };
  const uint32_t site = stacks.intern({fr("launch(int)", "/src/a.cc", 10), fr("main", "/src/main.cc", 3)});
  const uint32_t add = names.id("_Z5k_addPfi");
  gp.add(site, add, 300, {processes.id(100), 0});
  gp.add(site, add, 700, {processes.id(101), 1});
  gp.add(site, add, 50, {processes.id(102), 0});
  gp.add(site, add, 5);  // no process known: kernel and device labels only
  Decoded d;
  ASSERT_TRUE(d.p.ParseFromString(pprof_profile(gp, stacks, names, processes, {})));
  ASSERT_EQ(d.p.sample_size(), 4);
  std::map<int64_t, std::map<std::string, int64_t>> by_ns;  // GPU ns -> numeric labels
  for (const pb::Sample &smp : d.p.sample()) {
    EXPECT_EQ(d.label(smp, "kernel"), "k_add(float*, int)");
    auto &labels = by_ns[smp.value(1)];
    for (const pb::Label &l : smp.label())
      if (l.str() == 0) labels[d.s(l.key())] = l.num();
    if (smp.value(1) != 5) {
      EXPECT_EQ(d.label(smp, "comm"), "train");
    }
  }
  using Labels = std::map<std::string, int64_t>;
  EXPECT_EQ(by_ns[300], (Labels{{"device", 0}, {"pid", 100}, {"rank", 0}}));
  EXPECT_EQ(by_ns[700], (Labels{{"device", 1}, {"pid", 101}, {"rank", 1}, {"local_rank", 1}}));
  EXPECT_EQ(by_ns[50], (Labels{{"device", 0}, {"pid", 102}}));
  EXPECT_EQ(by_ns[5], (Labels{{"device", 0}}));
  EXPECT_EQ(d.p.location_size(), 2);  // the one stack's locations, shared
}

// Issue 43 item 3: with --pc the PC samples go in as sample types of their own (pc_samples,
// pc_gpu), one location per source line of the kernel (or per PC offset without a line),
// labelled with the stall reason, the kernel, the device and the process as the GPU time is.
TEST(PprofTest, PcSamplesAreTheirOwnSampleTypeByStallReasonAndLine) {
  StackTable stacks;
  NameTable names;
  GpuProfile gp;
  ProcessTable processes;
  processes.read = [](uint32_t) {
    ProcessInfo p;
    p.comm = "train";
    p.rank = 3;
    return p;
  };
  const uint32_t site = stacks.intern({fr("launch(int)", "/src/a.cc", 10)});
  gp.add(site, names.id("_Z5k_addPfi"), 300, {processes.id(100), 0});
  std::vector<PprofPcSample> pc;
  auto add = [&](int line, uint64_t off, const char *stall, uint64_t n) {
    PprofPcSample x;
    x.pid = 100;
    x.device = 0;
    x.kernel = "k_add(float*, int)";
    x.module = "cubin 0x2a";
    if (line) x.file = "/src/k.cu", x.line = line;
    x.pc_offset = off;
    x.stall = stall;
    x.samples = n;
    x.gpu_ns = n * 66;
    pc.push_back(x);
  };
  add(12, 0x40, "long_scoreboard", 7);
  add(12, 0x50, "barrier", 2);  // another PC of the same line: the same location
  add(0, 0x90, "barrier", 1);   // no line: its own location, by offset
  PprofInfo info;
  info.pc_samples = &pc;
  Decoded d;
  ASSERT_TRUE(d.p.ParseFromString(pprof_profile(gp, stacks, names, processes, info)));
  std::vector<std::string> types;
  for (const pb::ValueType &t : d.p.sample_type()) types.push_back(d.s(t.type()) + "/" + d.s(t.unit()));
  EXPECT_EQ(types, (std::vector<std::string>{"kernels/count", "gpu/nanoseconds", "pc_samples/count",
                                             "pc_gpu/nanoseconds"}));
  EXPECT_EQ(d.s(d.p.default_sample_type()), "gpu");
  ASSERT_EQ(d.p.sample_size(), 4);
  EXPECT_EQ(std::vector<int64_t>(d.p.sample(0).value().begin(), d.p.sample(0).value().end()),
            (std::vector<int64_t>{1, 300, 0, 0}));
  std::set<uint64_t> pc_locations;
  for (int i = 1; i < 4; ++i) {
    const pb::Sample &smp = d.p.sample(i);
    EXPECT_EQ(smp.value(0), 0);
    EXPECT_EQ(smp.value(1), 0);
    EXPECT_EQ(smp.value(3), smp.value(2) * 66);
    EXPECT_EQ(d.label(smp, "kernel"), "k_add(float*, int)");
    EXPECT_EQ(d.label(smp, "comm"), "train");
    std::map<std::string, int64_t> nums;
    for (const pb::Label &l : smp.label())
      if (l.str() == 0) nums[d.s(l.key())] = l.num();
    EXPECT_EQ(nums, (std::map<std::string, int64_t>{{"device", 0}, {"pid", 100}, {"rank", 3}}));
    ASSERT_EQ(smp.location_id_size(), 1);
    pc_locations.insert(smp.location_id(0));
  }
  EXPECT_EQ(d.label(d.p.sample(1), "stall_reason"), "long_scoreboard");
  EXPECT_EQ(d.label(d.p.sample(3), "stall_reason"), "barrier");
  EXPECT_EQ(d.stack(d.p.sample(1)), (std::vector<std::string>{"k_add /src/k.cu:12"}));
  EXPECT_EQ(d.p.sample(1).location_id(0), d.p.sample(2).location_id(0)) << "one line, one location";
  EXPECT_EQ(pc_locations.size(), 2u);
  const pb::Function &no_line =
      d.function(d.location(d.p.sample(3).location_id(0)).line(0).function_id());
  EXPECT_EQ(d.s(no_line.system_name()), "k_add(float*, int)");
}

TEST(PprofTest, EmptyProfileIsValid) {
  StackTable stacks;
  NameTable names;
  GpuProfile gp;
  std::string gz;
  ASSERT_TRUE(gzip_compress(pprof_profile(gp, stacks, names, ProcessTable{}, {}), &gz));
  pb::Profile p;
  ASSERT_TRUE(p.ParseFromString(gunzip(gz)));
  EXPECT_EQ(p.sample_size(), 0);
  EXPECT_EQ(p.sample_type_size(), 2);
}

}  // namespace
}  // namespace parcagpu::trace
