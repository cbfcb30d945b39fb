// A GPU program of known character for PC sampling on a real GPU (scripts/pc-sampling-real.sh):
// every iteration launches a memory-bound kernel, a compute-bound kernel, and a CUDA graph whose
// first kernel is barrier-bound (block reductions through shared memory), then waits for them,
// like a training step. Stall reasons should differ as their character says: long_scoreboard
// (waiting on global memory) for stream_scale, math_pipe_throttle / wait (dependent arithmetic)
// for fma_chain, barrier for block_reduce.
//
// The graph's second kernel, graph_only, is never launched outside the graph: on the H100 with
// CUDA 13, kernels first loaded through graph instantiation gave no PC records, only
// non-user-kernel samples (docs/pc-sampling.md). block_reduce is launched once eagerly before
// the graph is captured, graph_only is not, so the run shows both.
//
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -lineinfo -o pc_workload pc_workload.cu
// Run:   pc_workload [ITERATIONS]   (default 3000)
// Prints one line: PC_WORKLOAD {"iterations":N,"elapsed_s":S,"us_per_iteration":U,...}
// Exit: 0, or 2 on a CUDA error.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#define CHECK_PROGRAM "pc_workload"
#include "cuda_check.h"

// Memory-bound: streams 2 x 256 MiB through a scale-and-add.
__global__ void stream_scale(const float4 *__restrict__ in, float4 *__restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float4 v = in[i];  // the load every warp waits for
    v.x = v.x * 1.5f + 1.0f;
    v.y = v.y * 1.5f + 1.0f;
    v.z = v.z * 1.5f + 1.0f;
    v.w = v.w * 1.5f + 1.0f;
    out[i] = v;
  }
}

// Compute-bound: long chains of dependent multiply-adds and sines in registers.
__global__ void fma_chain(float *out, int iters) {
  float a = threadIdx.x * 1e-3f, b = blockIdx.x * 2e-3f, c = 1.0f;
  for (int i = 0; i < iters; ++i) {
    a = fmaf(a, 1.000001f, b);
    b = fmaf(b, 0.999999f, c);
    c = __sinf(a) * 0.5f + c * 0.5f;
  }
  if (a + b + c == 12345.0f) out[threadIdx.x] = a + b + c;  // never true: keeps the work
}

// Barrier-bound: a tree reduction in shared memory, a __syncthreads per step, many times.
__global__ void block_reduce(const float *__restrict__ in, float *out, int rounds) {
  __shared__ float s[1024];
  float acc = 0.0f;
  for (int r = 0; r < rounds; ++r) {
    s[threadIdx.x] = in[(blockIdx.x * blockDim.x + threadIdx.x + r) & 0xFFFFF];
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
      if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
      __syncthreads();
    }
    acc += s[0];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

// The graph's second kernel, only ever launched by the graph.
__global__ void graph_only(float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = out[i] * 0.5f + 1.0f;
}

int main(int argc, char **argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 3000;
  const size_t n4 = (256ull << 20) / sizeof(float4);
  float4 *in = nullptr, *out = nullptr;
  float *f = nullptr, *red_in = nullptr, *red_out = nullptr;
  CHECK(cudaMalloc(&in, n4 * sizeof(float4)));
  CHECK(cudaMalloc(&out, n4 * sizeof(float4)));
  CHECK(cudaMalloc(&f, 1 << 20));
  CHECK(cudaMalloc(&red_in, (1 << 20) * sizeof(float)));
  CHECK(cudaMalloc(&red_out, 4096 * sizeof(float)));
  CHECK(cudaMemset(in, 0, n4 * sizeof(float4)));
  CHECK(cudaMemset(red_in, 0, (1 << 20) * sizeof(float)));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  // block_reduce runs eagerly once before it is captured; graph_only never does.
  block_reduce<<<sms * 2, 1024, 0, s>>>(red_in, red_out, 8);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  block_reduce<<<sms * 2, 1024, 0, s>>>(red_in, red_out, 64);
  graph_only<<<(1 << 20) / 256, 256, 0, s>>>(f, 1 << 18);
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));

  auto step = [&] {
    stream_scale<<<sms * 8, 256, 0, s>>>(in, out, n4);
    fma_chain<<<sms * 4, 256, 0, s>>>(f, 6000);
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
  };
  for (int i = 0; i < 20; ++i) step();  // warm-up: clocks, lazy loading
  CHECK(cudaGetLastError());

  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) step();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(cudaGetLastError());
  std::printf("PC_WORKLOAD {\"iterations\":%d,\"elapsed_s\":%.6f,\"us_per_iteration\":%.3f,"
              "\"launches_per_iteration\":3,\"kernels_per_iteration\":4,\"sms\":%d}\n",
              iterations, elapsed, elapsed * 1e6 / iterations, sms);
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  return 0;
}
