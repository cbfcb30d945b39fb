// Frames for the unit tests of what is made of the stacks (profile, flame graph, pprof).
#pragma once

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

}  // namespace parcagpu::trace::test_frames
