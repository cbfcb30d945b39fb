// The library's version, readable without running it: `strings libparcagpu.so | grep
// '^parcagpu version '` (it does not depend on the gpu_config probe or on a consumer), and in
// the first PARCAGPU_DEBUG line.
#pragma once

namespace parcagpu {
extern const char kVersionString[];  // "parcagpu version X.Y.Z"
const char *version();               // "X.Y.Z"
}  // namespace parcagpu
