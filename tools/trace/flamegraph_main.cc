// parcagpu-flamegraph: a folded file (parcagpu-trace --folded, flamegraph.pl's input) drawn as
// the SVG flame graph parcagpu-trace --svg draws, for profiles taken on another machine (the GPU
// machines' runs keep their folded files: branch measurements-raw, docs/measurements/).
//
//   parcagpu-flamegraph [--title TEXT] FOLDED > gpu.svg
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "flamegraph.h"

using parcagpu::trace::FlameFrame;
using parcagpu::trace::FoldedStack;

namespace {

// The kind parcagpu-trace gave a frame, from its name: the kernel ("[gpu] k"), an inlined
// function ("f (x.cc:12) [inlined]"), a frame the tool adds ("[backward] MmBackward0",
// "[stack cut short]", "[no stack]"), else code.
FlameFrame::Kind kind_of(const std::string &name) {
  if (name.rfind("[gpu] ", 0) == 0) return FlameFrame::Kind::Gpu;
  if (name.size() > 10 && name.compare(name.size() - 10, 10, " [inlined]") == 0) return FlameFrame::Kind::Inlined;
  if (!name.empty() && name[0] == '[') return FlameFrame::Kind::Pseudo;
  return FlameFrame::Kind::Cpu;
}

bool parse_line(const std::string &line, FoldedStack *out) {
  const size_t space = line.rfind(' ');
  if (space == std::string::npos || space + 1 >= line.size()) return false;
  char *end = nullptr;
  const unsigned long long value = std::strtoull(line.c_str() + space + 1, &end, 10);
  if (*end != '\0') return false;
  out->value = value;
  out->frames.clear();
  size_t from = 0;
  while (from <= space) {
    size_t semi = line.find(';', from);
    if (semi == std::string::npos || semi > space) semi = space;
    std::string name = line.substr(from, semi - from);
    out->frames.push_back({name, kind_of(name)});
    from = semi + 1;
  }
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  parcagpu::trace::FlameGraphOptions o;
  const char *path = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--title") == 0 && i + 1 < argc) {
      o.title = argv[++i];
    } else if (argv[i][0] != '-' && !path) {
      path = argv[i];
    } else {
      std::fprintf(stderr, "usage: parcagpu-flamegraph [--title TEXT] FOLDED > out.svg\n");
      return 2;
    }
  }
  if (!path) {
    std::fprintf(stderr, "usage: parcagpu-flamegraph [--title TEXT] FOLDED > out.svg\n");
    return 2;
  }
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "parcagpu-flamegraph: cannot read %s\n", path);
    return 2;
  }
  std::vector<FoldedStack> stacks;
  std::string line;
  size_t n = 0, bad = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    FoldedStack s;
    if (parse_line(line, &s)) {
      stacks.push_back(std::move(s));
    } else if (++bad == 1) {
      std::fprintf(stderr, "parcagpu-flamegraph: %s:%zu: not \"frame;frame;... VALUE\": left out\n", path, n);
    }
  }
  if (bad > 1) std::fprintf(stderr, "parcagpu-flamegraph: %zu lines left out\n", bad);
  std::cout << flamegraph_svg(stacks, o);
  return bad == 0 ? 0 : 1;
}
