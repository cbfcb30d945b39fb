/* The five calls between deep_launch's main and the mock driver, in a shared library built as
 * distributions build libraries (-O2 -fomit-frame-pointer): no frame keeps a frame pointer, and
 * each frame holds a large local buffer, so the launch stack is as deep as a GEMM library's
 * (cuBLASLt's frames took more than 8 KiB on the H100: issue 29). Only DWARF CFI unwinding of a
 * stack copy that reaches the thread's first frame finds main (or start_thread) below them. */
#include <stddef.h>

#include "deep_frames.h"

#define DRIVER_CBID_cuLaunchKernel 307u /* CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel */

/* Kept out of registers, so that every level does work after its call: no tail calls. */
static volatile int depth_sum;

/* Written through a volatile pointer so the compiler keeps the whole buffer in the frame. */
static void fill(volatile char *buf, size_t n, int i) {
  for (size_t k = 0; k < n; k += 512) buf[k] = (char)(i + k);
}

__attribute__((noinline, noclone)) static int deep_e(CUfunction f, int i) {
  CUresult r = mock_cuda_launch(MOCK_CUDA_DOMAIN_DRIVER, DRIVER_CBID_cuLaunchKernel, f, NULL);
  depth_sum += i;
  return r == CUDA_SUCCESS ? 0 : 1;
}
/* One level of the chain: a DEEP_FRAME_BYTES frame, a call to the next level, work after it. */
#define DEEP_LEVEL(name, next)                                                \
  __attribute__((noinline, noclone)) static int name(CUfunction f, int i) { \
    volatile char pad[DEEP_FRAME_BYTES];                                      \
    fill(pad, sizeof(pad), i);                                                \
    int r = next(f, i + 1);                                                   \
    depth_sum += i + pad[i & 511];                                            \
    return r;                                                                 \
  }
DEEP_LEVEL(deep_d, deep_e)
DEEP_LEVEL(deep_c, deep_d)
DEEP_LEVEL(deep_b, deep_c)

/* deep_a is the library's entry point: exported, so not static, still without a frame pointer. */
__attribute__((noinline)) int deep_a(CUfunction f, int i) {
  volatile char pad[DEEP_FRAME_BYTES];
  fill(pad, sizeof(pad), i);
  int r = deep_b(f, i + 1);
  depth_sum += i + pad[i & 511];
  return r;
}
