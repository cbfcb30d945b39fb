// One kernel launched from two lines of one function (a.cc:10 and :12, under main.cc:3) and from
// two offsets of a function without lines (worker+0x1a and +0x2f, under main.cc:4), for 300, 200,
// 20 and 10 ns: four stacks that every output keeps apart (issue 29). The profile and pprof tests
// share it.
#pragma once

#include <array>
#include <cstdint>

#include "profile.h"
#include "stacks.h"
#include "test_frames.h"

namespace parcagpu::trace::test_frames {

struct TwoLaunchSites {
  StackTable stacks;
  NameTable names;
  GpuProfile profile;
  std::array<uint32_t, 4> sites{};

  TwoLaunchSites() {
    const uint32_t add = names.id("_Z5k_addPfi");
    Frame no_line_a = fr("worker(int)"), no_line_b = fr("worker(int)");
    no_line_a.offset = 0x1a;
    no_line_b.offset = 0x2f;
    sites = {stacks.intern({fr("launch(int)", "/src/a.cc", 10), fr("main", "/src/main.cc", 3)}),
             stacks.intern({fr("launch(int)", "/src/a.cc", 12), fr("main", "/src/main.cc", 3)}),
             stacks.intern({no_line_a, fr("main", "/src/main.cc", 4)}),
             stacks.intern({no_line_b, fr("main", "/src/main.cc", 4)})};
    const uint64_t ns[4] = {300, 200, 20, 10};
    for (size_t i = 0; i < sites.size(); i++) profile.add(sites[i], add, ns[i]);
  }
};

}  // namespace parcagpu::trace::test_frames
