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

#define CK(call)                                                                   \
  do {                                                                             \
    cudaError_t e_ = (call);                                                       \
    if (e_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));             \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)
#define CU(call)                                                                   \
  do {                                                                             \
    CUresult r_ = (call);                                                          \
    if (r_ != CUDA_SUCCESS) {                                                      \
      std::fprintf(stderr, "%s: CUresult %d\n", #call, static_cast<int>(r_));      \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

int main(int argc, char **argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10;
  const double rate = argc > 2 ? std::atof(argv[2]) : 1000;
  CK(cudaSetDevice(0));
  float *x = nullptr;
  CK(cudaMalloc(&x, 256 * sizeof(float)));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUfunction f;
  CK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t *>(&f),
                         reinterpret_cast<const void *>(k_mixed)));
  // A one-kernel graph, captured.
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  k_mixed<<<1, 32, 0, s>>>(x);
  CK(cudaStreamEndCapture(s, &g));
  CK(cudaGraphInstantiate(&exec, g, 0));
  void *args[] = {&x};
  const auto start = std::chrono::steady_clock::now();
  long rounds = 0;
  for (;; ++rounds) {
    const auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(rounds / rate));
    if (std::chrono::duration<double>(due - start).count() >= seconds) break;
    while (std::chrono::steady_clock::now() < due) {
    }
    CK(cudaLaunchKernel(reinterpret_cast<const void *>(k_mixed), dim3(1), dim3(32), args, 0, s));
    CU(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, reinterpret_cast<CUstream>(s), args, nullptr));
    CK(cudaGraphLaunch(exec, s));
    CU(cuGraphLaunch(reinterpret_cast<CUgraphExec>(exec), reinterpret_cast<CUstream>(s)));
    if (rounds % 64 == 0) CK(cudaStreamSynchronize(s));
  }
  CK(cudaStreamSynchronize(s));
  std::printf("MIXED_APIS {\"rounds\": %ld, \"211\": %ld, \"-307\": %ld, \"311\": %ld, "
              "\"-514\": %ld}\n",
              rounds, rounds, rounds, rounds, rounds);
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(g));
  CK(cudaFree(x));
  return 0;
}
