// Kernels first run inside a graph, late (docs/pc-sampling.md P19, P32; issue 28 item 3): SECONDS
// of eager launches of one kernel, then a graph of NODES kernels of their own (never launched
// before) captured, instantiated and replayed for SECONDS, a replay every ~0.5 ms. Prints one
// line: the replay call's median CPU ns and the replay's median GPU ns (CUDA events over 200
// replays, 10 times), measured after the first second of replays.
//
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -o graph_first graph_first.cu -lcuda
// Run:   graph_first [SECONDS [NODES]]   (default 4 32)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#define CHECK_PROGRAM "graph_first"
#include "cuda_check.h"

__device__ void chain(float *out, int iters, float seed) {
  float a = threadIdx.x * 0.001f + seed, b = blockIdx.x * 0.002f;
  for (int i = 0; i < iters; ++i) a = fmaf(a, 1.000001f, b);
  if (a == 12345.0f) out[threadIdx.x] = a;
}
template <int K>
__global__ void late_work(float *out, int iters) { chain(out, iters, K); }
__global__ void early_work(float *out, int iters) { chain(out, iters, 0); }

using Clock = std::chrono::steady_clock;

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int main(int argc, char **argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 4;
  const int nodes = argc > 2 ? atoi(argv[2]) : 32;
  float *d = nullptr;
  CHECK(cudaMalloc(&d, 1024 * sizeof(float)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const auto until = [](double sec) { return Clock::now() + std::chrono::duration<double>(sec); };
  for (auto end = until(seconds); Clock::now() < end;) {
    early_work<<<132, 128, 0, s>>>(d, 2000);
    CHECK(cudaStreamSynchronize(s));
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < nodes; ++i) {
    switch (i % 4) {  // four kernels of their own, short (a few microseconds)
      case 0: late_work<1><<<132, 128, 0, s>>>(d, 200); break;
      case 1: late_work<2><<<132, 128, 0, s>>>(d, 200); break;
      case 2: late_work<3><<<132, 128, 0, s>>>(d, 200); break;
      default: late_work<4><<<132, 128, 0, s>>>(d, 200); break;
    }
  }
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<double> cpu, gpu;
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  const auto measure_from = until(1);
  for (auto end = until(seconds); Clock::now() < end;) {
    const auto t0 = Clock::now();
    CHECK(cudaGraphLaunch(exec, s));
    const auto t1 = Clock::now();
    CHECK(cudaStreamSynchronize(s));
    if (t0 > measure_from) cpu.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  for (int r = 0; r < 10; ++r) {
    CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < 200; ++i) CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    gpu.push_back(ms * 1e6 / 200);
  }
  printf("GRAPH_FIRST nodes=%d launch_ns=%.0f gpu_ns_per_replay=%.0f replays=%zu\n", nodes,
         median(cpu), median(gpu), cpu.size());
  return 0;
}
