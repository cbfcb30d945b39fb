// CHECK(call) and CHECK_DRV(call) for the GPU programs (tests/gpu/*.cu, tools/bench/launch_overhead.cu):
// a failed CUDA runtime or driver call is said on stderr as "PROGRAM: file:line: call: error" and
// ends the program with CHECK_EXIT_CODE. Define CHECK_PROGRAM (the name, a string literal) and,
// for another code than 2, CHECK_EXIT_CODE before including this.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#ifndef CHECK_PROGRAM
#error "define CHECK_PROGRAM before including cuda_check.h"
#endif
#ifndef CHECK_EXIT_CODE
#define CHECK_EXIT_CODE 2
#endif

#define CHECK_FAILED_(call, what)                                                           \
  do {                                                                                      \
    std::fprintf(stderr, CHECK_PROGRAM ": %s:%d: %s: %s\n", __FILE__, __LINE__, #call, what); \
    std::exit(CHECK_EXIT_CODE);                                                             \
  } while (0)

#define CHECK(call)                                                            \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess) CHECK_FAILED_(call, cudaGetErrorString(err_));    \
  } while (0)

#define CHECK_DRV(call)                                         \
  do {                                                          \
    CUresult err_ = (call);                                     \
    if (err_ != CUDA_SUCCESS) {                                 \
      const char *s_ = nullptr;                                 \
      cuGetErrorString(err_, &s_);                              \
      CHECK_FAILED_(call, s_ ? s_ : "?");                       \
    }                                                           \
  } while (0)
