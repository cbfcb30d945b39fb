// Issue 27 on a real GPU: eager kernels and a graph of other kernels, equal GPU time on each
// side. Each step launches eager_a and eager_b (cudaLaunchKernel, then cuLaunchKernel) and one
// graph of graph_a, graph_b and graph_c (cudaGraphLaunch, cuGraphLaunch, cuGraphLaunch_ptsz in
// turn), then synchronizes; each kernel spins its own number of GPU cycles, the eager pair as
// long as the graph's three (1:2 and 1:2:3), so half the GPU time is eager: twice as many eager
// launches as graph ones, a graph launch weighing twice an eager one. Prints
// `MIXED_GPU {"steps":N,"211":..,"-307":..,"311":..,"-514":..,"-515":..}` at the end.
//
//   mixed_gpu_time SECONDS [UNIT_CYCLES]   (default 20000 cycles: ~10 us at ~2 GHz)
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#define SPIN_KERNEL(name)                                     \
  __global__ void name(long long cycles, int *sink) {         \
    const long long start = clock64();                        \
    while (clock64() - start < cycles) {                      \
    }                                                         \
    if (sink && threadIdx.x == 0) atomicAdd(sink, 1);         \
  }
SPIN_KERNEL(eager_a)
SPIN_KERNEL(eager_b)
SPIN_KERNEL(graph_a)
SPIN_KERNEL(graph_b)
SPIN_KERNEL(graph_c)

#define CHECK_PROGRAM "mixed_gpu_time"
#include "cuda_check.h"

int main(int argc, char **argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10;
  const long long unit = argc > 2 ? std::atoll(argv[2]) : 20000;
  CHECK(cudaSetDevice(0));
  int *sink = nullptr;
  CHECK(cudaMalloc(&sink, sizeof(int)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUfunction eager_b_fn;
  CHECK(cudaGetFuncBySymbol(reinterpret_cast<cudaFunction_t *>(&eager_b_fn),
                            reinterpret_cast<const void *>(eager_b)));
  // The graph: graph_a, graph_b, graph_c one after another, captured.
  const long long ga = unit, gb = 2 * unit, gc = 3 * unit;  // 6 units
  const long long ea = 2 * unit, eb = 4 * unit;             // 6 units
  cudaGraph_t g;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  graph_a<<<1, 32, 0, s>>>(ga, sink);
  graph_b<<<1, 32, 0, s>>>(gb, sink);
  graph_c<<<1, 32, 0, s>>>(gc, sink);
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  // cuGraphLaunch_ptsz: the per-thread-default-stream entry point of cuGraphLaunch.
  using GraphLaunch = CUresult (*)(CUgraphExec, CUstream);
  GraphLaunch launch_ptsz = nullptr;
  CUdriverProcAddressQueryResult found;
  CHECK_DRV(cuGetProcAddress("cuGraphLaunch", reinterpret_cast<void **>(&launch_ptsz), CUDA_VERSION,
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &found));
  long long ea_arg = ea, eb_arg = eb;
  void *a_args[] = {&ea_arg, &sink};
  void *b_args[] = {&eb_arg, &sink};
  // Warm up (module loads, the graph's upload) before the timed loop.
  for (int i = 0; i < 20; ++i) {
    CHECK(cudaLaunchKernel(reinterpret_cast<const void *>(eager_a), dim3(1), dim3(32), a_args, 0, s));
    CHECK(cudaGraphLaunch(exec, s));
  }
  CHECK(cudaStreamSynchronize(s));
  long steps = 0, graph[3] = {0, 0, 0};
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(seconds));
  while (std::chrono::steady_clock::now() < end) {
    CHECK(cudaLaunchKernel(reinterpret_cast<const void *>(eager_a), dim3(1), dim3(32), a_args, 0, s));
    CHECK_DRV(cuLaunchKernel(eager_b_fn, 1, 1, 1, 32, 1, 1, 0, reinterpret_cast<CUstream>(s), b_args,
                             nullptr));
    switch (steps % 3) {
      case 0: CHECK(cudaGraphLaunch(exec, s)); break;
      case 1: CHECK_DRV(cuGraphLaunch(reinterpret_cast<CUgraphExec>(exec), reinterpret_cast<CUstream>(s))); break;
      default: CHECK_DRV(launch_ptsz(reinterpret_cast<CUgraphExec>(exec), reinterpret_cast<CUstream>(s)));
    }
    graph[steps % 3]++;
    ++steps;
    CHECK(cudaStreamSynchronize(s));
  }
  std::printf("MIXED_GPU {\"steps\": %ld, \"211\": %ld, \"-307\": %ld, \"311\": %ld, \"-514\": %ld, "
              "\"-515\": %ld}\n",
              steps, steps, steps, graph[0], graph[1], graph[2]);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaFree(sink));
  return 0;
}
