/* A CUDA program as distributions build them: -O2 -fomit-frame-pointer (tests/CMakeLists.txt),
 * launching k_add through the mock driver five calls below main (deep_a .. deep_e). The launch
 * stack parcagpu-trace shows must hold the whole chain main;deep_a;...;deep_e, which only DWARF
 * CFI unwinding finds: none of these functions keeps a frame pointer (issue 18).
 *
 *   deep_launch [LAUNCHES]   (default 200; the injection library comes from CUDA_INJECTION64_PATH)
 */
#include <stdio.h>
#include <stdlib.h>

#include "mock_cuda.h"

#define DRIVER_CBID_cuLaunchKernel 307u /* CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel */

/* Kept out of registers, so that every level does work after its call: no tail calls, each
 * function keeps its own frame (without a frame pointer). */
static volatile int depth_sum;

__attribute__((noinline, noclone)) static int deep_e(CUfunction f, int i) {
  CUresult r = mock_cuda_launch(MOCK_CUDA_DOMAIN_DRIVER, DRIVER_CBID_cuLaunchKernel, f, NULL);
  depth_sum += i;
  return r == CUDA_SUCCESS ? 0 : 1;
}
/* One level of the chain: calls the next one down, then does work after the call. */
#define DEEP_LEVEL(name, next)                                                \
  __attribute__((noinline, noclone)) static int name(CUfunction f, int i) { \
    int r = next(f, i + 1);                                                   \
    depth_sum += i;                                                           \
    return r;                                                                 \
  }
DEEP_LEVEL(deep_d, deep_e)
DEEP_LEVEL(deep_c, deep_d)
DEEP_LEVEL(deep_b, deep_c)
DEEP_LEVEL(deep_a, deep_b)

int main(int argc, char **argv) {
  const int launches = argc > 1 ? atoi(argv[1]) : 200;
  if (launches <= 0) {
    fprintf(stderr, "usage: deep_launch [LAUNCHES > 0]\n");
    return 2;
  }
  CUfunction f = mock_cuda_function("k_add");
  int failed = 0;
  for (int i = 0; i < launches; i++) failed += deep_a(f, 0);
  mock_cuda_device_synchronize();
  printf("deep_launch: %d launches, %d failed\n", launches, failed);
  return failed != 0;
}
