// Issue 27 item 3 on a real GPU without PyTorch: a C++ program that replays one CUDA graph through
// the driver API for SECONDS, as C++ inference runtimes (TensorRT-LLM) replay their decode steps.
// The graph is a small transformer-like decode step captured once: LAYERS layers of
// rmsnorm -> gemv -> silu -> gemv -> residual add over a hidden size of 1024 (5 kernel nodes a
// layer, 4 distinct kernels), warmed up eagerly three times, then replayed with cuGraphLaunch (cbid 514) on one stream, synchronized
// after every replay. scripts/soak-agent-real.sh runs it as SOAK_APP, alone and under the library,
// to compare the process's GPU memory after 15 minutes.
//
//   graph_soak SECONDS [LAYERS]   (default 8 layers: 40 kernels a replay)
// Prints `GRAPH_SOAK {"replays":N,"kernels_per_replay":K}` at the end.
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_PROGRAM "graph_soak"
#include "cuda_check.h"

constexpr int kHidden = 1024;

// One block per row: y = x / rms(x).
__global__ void rmsnorm(const float *x, float *y) {
  __shared__ float partial[256];
  float sum = 0;
  for (int i = threadIdx.x; i < kHidden; i += blockDim.x) sum += x[i] * x[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  const float scale = rsqrtf(partial[0] / kHidden + 1e-6f);
  for (int i = threadIdx.x; i < kHidden; i += blockDim.x) y[i] = x[i] * scale;
}

// y = W x, one warp per output row (W is kHidden x kHidden, 4 MiB).
__global__ void gemv(const float *w, const float *x, float *y) {
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= kHidden) return;
  float sum = 0;
  for (int i = lane; i < kHidden; i += 32) sum += w[row * kHidden + i] * x[i];
  for (int off = 16; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
  if (lane == 0) y[row] = sum;
}

__global__ void silu(float *x) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kHidden) x[i] = x[i] / (1.0f + __expf(-x[i]));
}

__global__ void residual_add(float *h, const float *delta) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kHidden) h[i] = 0.5f * (h[i] + delta[i]);
}

int main(int argc, char **argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10;
  const int layers = argc > 2 ? std::atoi(argv[2]) : 8;
  CHECK(cudaSetDevice(0));
  float *w = nullptr, *h = nullptr, *t1 = nullptr, *t2 = nullptr;
  CHECK(cudaMalloc(&w, sizeof(float) * kHidden * kHidden));
  CHECK(cudaMalloc(&h, sizeof(float) * kHidden));
  CHECK(cudaMalloc(&t1, sizeof(float) * kHidden));
  CHECK(cudaMalloc(&t2, sizeof(float) * kHidden));
  {
    std::vector<float> host(kHidden * kHidden);
    for (size_t i = 0; i < host.size(); ++i) host[i] = ((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    CHECK(cudaMemcpy(w, host.data(), sizeof(float) * host.size(), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(h, host.data(), sizeof(float) * kHidden, cudaMemcpyHostToDevice));
  }
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // One decode step: what is warmed up eagerly, then captured.
  const auto step = [&] {
    const int rows_per_block = 8;  // 256 threads: 8 warps, 8 rows
    for (int l = 0; l < layers; ++l) {
      rmsnorm<<<1, 256, 0, s>>>(h, t1);
      gemv<<<kHidden / rows_per_block, 256, 0, s>>>(w, t1, t2);
      silu<<<kHidden / 256, 256, 0, s>>>(t2);
      gemv<<<kHidden / rows_per_block, 256, 0, s>>>(w, t2, t1);
      residual_add<<<kHidden / 256, 256, 0, s>>>(h, t1);
    }
  };
  // Warm up eagerly before capturing, as runtimes do (module loads, autotuning).
  for (int i = 0; i < 3; ++i) step();
  CHECK(cudaStreamSynchronize(s));
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  step();
  CHECK(cudaStreamEndCapture(s, &g));
  CUgraphExec exec;
  CHECK_DRV(cuGraphInstantiate(&exec, reinterpret_cast<CUgraph>(g), 0));
  const auto stream = reinterpret_cast<CUstream>(s);
  long replays = 0;
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(seconds));
  while (std::chrono::steady_clock::now() < end) {
    CHECK_DRV(cuGraphLaunch(exec, stream));
    CHECK(cudaStreamSynchronize(s));
    ++replays;
  }
  std::printf("GRAPH_SOAK {\"replays\": %ld, \"kernels_per_replay\": %d}\n", replays, 5 * layers);
  CHECK_DRV(cuGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaFree(w));
  CHECK(cudaFree(h));
  CHECK(cudaFree(t1));
  CHECK(cudaFree(t2));
  return 0;
}
