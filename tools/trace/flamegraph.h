// A flame graph written by the tool itself (--svg): GPU time as width, the launch stack below
// the kernel that the launch ran. Same picture as Brendan Gregg's flamegraph.pl draws from
// the --folded output, as a self-contained SVG (no script): root at the bottom, children
// sorted by name, each frame a <g> with a <title> tooltip ("name (1.23 ms, 45.6%)"), and
// data-* attributes that tests read (data-name, data-kind, data-value in ns, data-depth).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parcagpu::trace {

struct FlameFrame {
  enum class Kind { Cpu, Inlined, Gpu, Pseudo };
  std::string name;
  Kind kind = Kind::Cpu;
};

// One stack with its value: frames root first, the GPU kernel last.
struct FoldedStack {
  std::vector<FlameFrame> frames;
  uint64_t value = 0;  // GPU ns
};

// "a;b;[gpu] k 1234" lines, as flamegraph.pl / inferno / speedscope read them.
std::string folded_text(const std::vector<FoldedStack> &stacks);

struct FlameGraphOptions {
  std::string title = "GPU time by launch stack";
  std::string subtitle;
  int width = 1200;
  int frame_height = 16;
  double min_width_px = 0.1;  // narrower frames are left out (their time stays in the parent)
};

std::string flamegraph_svg(const std::vector<FoldedStack> &stacks, const FlameGraphOptions &o);

const char *kind_name(FlameFrame::Kind k);

}  // namespace parcagpu::trace
