#include "base/version.h"

#include "parcagpu_version.h"

namespace parcagpu {
// `used`: kept in .rodata even though nothing but version() reads it.
__attribute__((used)) const char kVersionString[] = "parcagpu version " PARCAGPU_VERSION;
const char *version() { return kVersionString + sizeof("parcagpu version ") - 1; }
}  // namespace parcagpu
