/* USDT probes of provider "parcagpu", generated from the one list (include/parcagpu/probe_list.h):
 * the build runs this file through the C preprocessor into build/generated/probes.d, which dtrace
 * reads. The argument types are the production consumer's contract (include/parcagpu/abi.h,
 * docs/probe-abi.md): their sizes and signedness end up in the .note.stapsdt argument specs. */
#include "parcagpu/probe_list.h"
#define PARCAGPU_D_PROBE(name, params, args, nargs, sizes) probe name params;
provider parcagpu {
  PARCAGPU_PROBE_LIST(PARCAGPU_D_PROBE)
};
