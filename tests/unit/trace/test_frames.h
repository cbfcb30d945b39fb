// Frames for the unit tests of what is made of the stacks (profile, flame graph, pprof, Python
// frames, autograd).
#pragma once

#include <string>
#include <vector>

#include "symbolizer.h"

namespace parcagpu::trace::test_frames {

// A frame of /opt/app ("app"): `function` at file:line, or an inlined call of it.
inline Frame fr(const char *function, const char *file = "", int line = 0, bool inlined = false) {
  Frame f;
  f.function = function;
  f.module = "app";
  f.path = "/opt/app";
  f.file = file;
  f.line = line;
  f.inlined = inlined;
  return f;
}

// What a stack reads as, frame by frame (Frame::name), for comparing whole stacks.
inline std::vector<std::string> names(const std::vector<Frame> &frames) {
  std::vector<std::string> out;
  for (const Frame &f : frames) out.push_back(f.name());
  return out;
}

}  // namespace parcagpu::trace::test_frames
