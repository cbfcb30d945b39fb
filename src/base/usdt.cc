// The one site of each probe (see usdt.h): every probe macro is expanded exactly once, here,
// one function per entry of the probe list (include/parcagpu/probe_list.h).
// STAP_PROBEV: the probe macro for an argument list given as one macro argument.
#define SDT_USE_VARIADIC 1
#include "base/usdt.h"

namespace parcagpu::usdt {

#define PARCAGPU_PROBE_SITE(name, params, args, nargs, sizes) \
  void name params { STAP_PROBEV(parcagpu, name, PARCAGPU_UNPAREN args); }
PARCAGPU_PROBE_LIST(PARCAGPU_PROBE_SITE)
#undef PARCAGPU_PROBE_SITE

}  // namespace parcagpu::usdt
