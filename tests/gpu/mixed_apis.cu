// Issue 16: the four launch APIs in equal numbers, one round after another, paced by a spin (not
// a sleep: a timer wake-up would line rounds up with the library's watcher). Per round:
// cudaLaunchKernel (211 over 307), cuLaunchKernel (307), cudaGraphLaunch (311 over 514) and
// cuGraphLaunch (514) of the same exec. Prints `MIXED_APIS {"rounds":N,...}` at the end.
//
//   mixed_apis SECONDS ROUNDS_PER_SECOND
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

__global__ void k_mixed(float *x) {
  if (x) x[threadIdx.x] += 1.0f;
}

#define CHECK_PROGRAM "mixed_apis"
#define CHECK_EXIT_CODE 1
#include "cuda_check.h"

int main(int argc, char **argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10;
  const double rate = argc > 2 ? std::atof(argv[2]) : 1000;
  CHECK(cudaSetDevice(0));
  float *x = nullptr;
  CHECK(cudaMalloc(&x, 256 * sizeof(float)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUfunction f;
  CHECK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t *>(&f),
                         reinterpret_cast<const void *>(k_mixed)));
  // A one-kernel graph, captured.
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  k_mixed<<<1, 32, 0, s>>>(x);
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  void *args[] = {&x};
  const auto start = std::chrono::steady_clock::now();
  long rounds = 0;
  for (;; ++rounds) {
    const auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(rounds / rate));
    if (std::chrono::duration<double>(due - start).count() >= seconds) break;
    while (std::chrono::steady_clock::now() < due) {
    }
    CHECK(cudaLaunchKernel(reinterpret_cast<const void *>(k_mixed), dim3(1), dim3(32), args, 0, s));
    CHECK_DRV(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, reinterpret_cast<CUstream>(s), args, nullptr));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK_DRV(cuGraphLaunch(reinterpret_cast<CUgraphExec>(exec), reinterpret_cast<CUstream>(s)));
    if (rounds % 64 == 0) CHECK(cudaStreamSynchronize(s));
  }
  CHECK(cudaStreamSynchronize(s));
  std::printf("MIXED_APIS {\"rounds\": %ld, \"211\": %ld, \"-307\": %ld, \"311\": %ld, "
              "\"-514\": %ld}\n",
              rounds, rounds, rounds, rounds, rounds);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaFree(x));
  return 0;
}
