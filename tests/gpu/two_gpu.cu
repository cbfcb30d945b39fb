// Several GPUs in one process (issue 19): for each device, eager launches through the runtime
// (<<<>>>, cudaLaunchKernel) and the driver (cuLaunchKernel), and two captured graphs replayed
// through cudaGraphLaunch and cuGraphLaunch, for SECONDS seconds; every kernel counts its
// executions on the GPU (atomicAdd), and at the end one line per device says how many times each
// kernel ran there. scripts/multi-gpu-real.sh runs it under libparcagpu.so with agent-consumer
// and parcagpu-trace attached and compares what they saw per device with these lines.
//
// Build (the script does this):
//   nvcc -O2 -std=c++17 -arch=sm_90 -lineinfo -o two_gpu tests/gpu/two_gpu.cu -lcuda
// Run:
//   two_gpu SECONDS [--threads] [--devices=N]
//   default: one host thread drives every device in turn (cudaSetDevice before each device's
//   launches: the library sees launches of several contexts from one thread); --threads: one
//   host thread per device. --devices=N: the first N devices (default all, at most 8).
//
// Kernels. Every kernel is a template on the device index D, so each device's kernels have their
// own mangled names: a consumer that puts a kernel on the wrong device, or a PC sample under
// another device's kernel, shows as a name that device never ran. Per purpose (demangled, D = the
// device; all take (unsigned *count, float *sink, long long cycles)):
//   mg_eager_chevron<D>      <<<>>>                        (runtime cbid 211 / driver 307)   ~10 us
//   mg_eager_launch<D>       cudaLaunchKernel              (211 / 307)                       ~30 us
//   mg_eager_cu_launch<D>    cuLaunchKernel                (driver 307)                      ~150 us
//   mg_graph_a<D>, mg_graph_b<D>, mg_graph_c<D>
//                            graph 1, captured (3 nodes, a chain), replayed by cudaGraphLaunch
//                            (311 / 514)                                 ~5, ~15, ~40 us
//   mg_cugraph_a<D>, mg_cugraph_b<D>
//                            graph 2, captured (2 nodes), replayed by cuGraphLaunch (514)
//                                                                        ~4, ~20 us
// (durations: a clock64() spin on every SM, at ~1.7-2 GHz). One iteration on a device launches
// each eager kernel once and each graph once: 8 kernels. The mangled names printed are the ones
// CUPTI's kernel records carry (cudaFuncGetName).
//
// Output (stdout; progress and errors on stderr):
//   # two_gpu pid=P mode=single|threads devices=N seconds=S
//   DEVICE<TAB>device=D<TAB>pid=P<TAB>gpu=NAME<TAB>iterations=I<TAB>launches=L<TAB>
//       graph_launches=G<TAB>kernels=K<TAB>k:MANGLED=COUNT ... (one field per kernel)
//     launches: API calls that launch (3 eager + 2 graph launches per iteration); kernels: the
//     sum of the GPU counters of that device
//   END<TAB>status=ok|count-mismatch
// Exit: 0 all counts as expected, 1 a counter differs from launches x nodes, 2 a CUDA error.

#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CHECK_PROGRAM "two_gpu"
#include "cuda_check.h"

// Spin for `cycles` SM clocks doing FMAs (something for PC sampling to see), then count one
// execution of this kernel. The sink write never happens in practice; it keeps the loop.
__device__ __forceinline__ void spin_and_count(unsigned *count, float *sink, long long cycles) {
  const long long t0 = clock64();
  float a = 0.5f + threadIdx.x * 1e-3f;
  const float b = 1.0000001f;
  while (clock64() - t0 < cycles) {
#pragma unroll
    for (int i = 0; i < 16; i++) a = fmaf(a, b, 1e-7f);
  }
  if (a == -1.0f) *sink = a;
  if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(count, 1u);
}

#define MG_KERNEL(name)                                                        \
  template <int D>                                                             \
  __global__ void name(unsigned *count, float *sink, long long cycles) {       \
    spin_and_count(count, sink, cycles);                                       \
  }

MG_KERNEL(mg_eager_chevron)
MG_KERNEL(mg_eager_launch)
MG_KERNEL(mg_eager_cu_launch)
MG_KERNEL(mg_graph_a)
MG_KERNEL(mg_graph_b)
MG_KERNEL(mg_graph_c)
MG_KERNEL(mg_cugraph_a)
MG_KERNEL(mg_cugraph_b)

namespace {

constexpr int kMaxDevices = 8;
constexpr unsigned kBatch = 16;  // iterations per device between synchronizations

enum Slot { S_CHEVRON, S_LAUNCH, S_CU_LAUNCH, S_GA, S_GB, S_GC, S_CGA, S_CGB, NSLOT };

const char *const kPlain[NSLOT] = {"mg_eager_chevron", "mg_eager_launch", "mg_eager_cu_launch",
                                   "mg_graph_a",       "mg_graph_b",      "mg_graph_c",
                                   "mg_cugraph_a",     "mg_cugraph_b"};
// SM cycles each kernel spins (about 1.7-2 GHz on an H100).
const long long kCycles[NSLOT] = {20000, 60000, 300000, 10000, 30000, 80000, 8000, 40000};

struct Dev {
  int device = 0;
  std::string gpu;
  int blocks = 1;
  cudaStream_t s = nullptr;
  CUstream cus = nullptr;
  unsigned *count = nullptr;  // [NSLOT] on the device
  float *sink = nullptr;
  const void *fn[NSLOT] = {};
  CUfunction cu_launch = nullptr;  // mg_eager_cu_launch<D> in this device's context
  cudaGraphExec_t exec1 = nullptr, exec2 = nullptr;
  unsigned long long iterations = 0, launches = 0, graph_launches = 0;
  void (*iterate)(Dev &) = nullptr;
};

template <int D>
void iterate(Dev &d) {
  const dim3 grid(d.blocks), block(128);
  mg_eager_chevron<D><<<grid, block, 0, d.s>>>(d.count + S_CHEVRON, d.sink, kCycles[S_CHEVRON]);
  CHECK(cudaGetLastError());

  unsigned *c = d.count + S_LAUNCH;
  float *sink = d.sink;
  long long cyc = kCycles[S_LAUNCH];
  void *args[] = {&c, &sink, &cyc};
  CHECK(cudaLaunchKernel(d.fn[S_LAUNCH], grid, block, args, 0, d.s));

  unsigned *c2 = d.count + S_CU_LAUNCH;
  long long cyc2 = kCycles[S_CU_LAUNCH];
  void *args2[] = {&c2, &sink, &cyc2};
  CHECK_DRV(cuLaunchKernel(d.cu_launch, d.blocks, 1, 1, 128, 1, 1, 0, d.cus, args2, nullptr));

  CHECK(cudaGraphLaunch(d.exec1, d.s));
  CHECK_DRV(cuGraphLaunch(reinterpret_cast<CUgraphExec>(d.exec2), d.cus));
  d.iterations++;
  d.launches += 5;
  d.graph_launches += 2;
}

// The mangled name CUPTI's kernel record carries.
std::string kernel_name(const void *fn, const char *plain, int device) {
  const char *n = nullptr;
  if (cudaFuncGetName(&n, fn) == cudaSuccess && n && *n) return n;
  cudaGetLastError();
  // _Z<len><name>ILi<D>EEvPjPfx: void name<D>(unsigned*, float*, long long)
  return "_Z" + std::to_string(strlen(plain)) + plain + "ILi" + std::to_string(device) +
         "EEvPjPfx";
}

template <int D>
void setup(Dev &d) {
  CHECK(cudaSetDevice(d.device));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, d.device));
  d.gpu = prop.name;
  d.blocks = prop.multiProcessorCount;
  d.fn[S_CHEVRON] = (const void *)mg_eager_chevron<D>;
  d.fn[S_LAUNCH] = (const void *)mg_eager_launch<D>;
  d.fn[S_CU_LAUNCH] = (const void *)mg_eager_cu_launch<D>;
  d.fn[S_GA] = (const void *)mg_graph_a<D>;
  d.fn[S_GB] = (const void *)mg_graph_b<D>;
  d.fn[S_GC] = (const void *)mg_graph_c<D>;
  d.fn[S_CGA] = (const void *)mg_cugraph_a<D>;
  d.fn[S_CGB] = (const void *)mg_cugraph_b<D>;
  CHECK(cudaMalloc(&d.count, NSLOT * sizeof(unsigned)));
  CHECK(cudaMemset(d.count, 0, NSLOT * sizeof(unsigned)));
  CHECK(cudaMalloc(&d.sink, sizeof(float)));
  CHECK(cudaStreamCreateWithFlags(&d.s, cudaStreamNonBlocking));
  d.cus = reinterpret_cast<CUstream>(d.s);
  cudaFunction_t f = nullptr;
  CHECK(cudaGetFuncBySymbol(&f, d.fn[S_CU_LAUNCH]));
  d.cu_launch = reinterpret_cast<CUfunction>(f);

  // Graph 1 (cudaGraphLaunch): a -> b -> c. Graph 2 (cuGraphLaunch): a -> b. Captured on the
  // launch stream itself (kernels launched during capture never run as such).
  const dim3 grid(d.blocks), block(128);
  cudaGraph_t g1 = nullptr, g2 = nullptr;
  CHECK(cudaStreamBeginCapture(d.s, cudaStreamCaptureModeThreadLocal));
  mg_graph_a<D><<<grid, block, 0, d.s>>>(d.count + S_GA, d.sink, kCycles[S_GA]);
  mg_graph_b<D><<<grid, block, 0, d.s>>>(d.count + S_GB, d.sink, kCycles[S_GB]);
  mg_graph_c<D><<<grid, block, 0, d.s>>>(d.count + S_GC, d.sink, kCycles[S_GC]);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamEndCapture(d.s, &g1));
  CHECK(cudaStreamBeginCapture(d.s, cudaStreamCaptureModeThreadLocal));
  mg_cugraph_a<D><<<grid, block, 0, d.s>>>(d.count + S_CGA, d.sink, kCycles[S_CGA]);
  mg_cugraph_b<D><<<grid, block, 0, d.s>>>(d.count + S_CGB, d.sink, kCycles[S_CGB]);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamEndCapture(d.s, &g2));
  CHECK(cudaGraphInstantiate(&d.exec1, g1, 0));
  CHECK(cudaGraphInstantiate(&d.exec2, g2, 0));
  CHECK(cudaGraphDestroy(g1));
  CHECK(cudaGraphDestroy(g2));
  CHECK(cudaStreamSynchronize(d.s));
  d.iterate = iterate<D>;
}

using SetupFn = void (*)(Dev &);
const SetupFn kSetup[kMaxDevices] = {setup<0>, setup<1>, setup<2>, setup<3>,
                                     setup<4>, setup<5>, setup<6>, setup<7>};

using Clock = std::chrono::steady_clock;

// One thread, every device in turn: kBatch iterations on each device (cudaSetDevice before
// each), then wait for all of them.
void run_single(std::vector<Dev> &devs, Clock::time_point end) {
  while (Clock::now() < end) {
    for (Dev &d : devs) {
      CHECK(cudaSetDevice(d.device));
      for (unsigned i = 0; i < kBatch; i++) d.iterate(d);
    }
    for (Dev &d : devs) {
      CHECK(cudaSetDevice(d.device));
      CHECK(cudaStreamSynchronize(d.s));
    }
  }
}

void run_thread(Dev &d, Clock::time_point end) {
  CHECK(cudaSetDevice(d.device));
  while (Clock::now() < end) {
    for (unsigned i = 0; i < kBatch; i++) d.iterate(d);
    CHECK(cudaStreamSynchronize(d.s));
  }
}

int usage() {
  fprintf(stderr, "usage: two_gpu SECONDS [--threads] [--devices=N]\n");
  return 2;
}

}  // namespace

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  char *endp = nullptr;
  const double seconds = strtod(argv[1], &endp);
  if (!endp || *endp || seconds < 0) return usage();
  bool threads = false;
  int want = kMaxDevices;
  for (int i = 2; i < argc; i++) {
    if (!strcmp(argv[i], "--threads"))
      threads = true;
    else if (!strncmp(argv[i], "--devices=", 10))
      want = atoi(argv[i] + 10);
    else
      return usage();
  }
  CHECK_DRV(cuInit(0));
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  if (want < n) n = want;
  if (n > kMaxDevices) n = kMaxDevices;
  if (n < 1) {
    fprintf(stderr, "two_gpu: no device\n");
    return 2;
  }
  if (n < 2) fprintf(stderr, "two_gpu: warning: only %d device\n", n);

  std::vector<Dev> devs(n);
  for (int d = 0; d < n; d++) {
    devs[d].device = d;
    kSetup[d](devs[d]);
    fprintf(stderr, "two_gpu: device %d (%s, %d SMs) ready\n", d, devs[d].gpu.c_str(),
            devs[d].blocks);
  }

  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::microseconds((long long)(seconds * 1e6));
  if (threads) {
    std::vector<std::thread> ts;
    for (Dev &d : devs) ts.emplace_back(run_thread, std::ref(d), end);
    for (std::thread &t : ts) t.join();
  } else {
    run_single(devs, end);
  }
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();

  printf("# two_gpu pid=%d mode=%s devices=%d seconds=%.3f\n", (int)getpid(),
         threads ? "threads" : "single", n, took);
  int bad = 0;
  for (Dev &d : devs) {
    CHECK(cudaSetDevice(d.device));
    CHECK(cudaDeviceSynchronize());
    unsigned h[NSLOT] = {};
    CHECK(cudaMemcpy(h, d.count, sizeof h, cudaMemcpyDeviceToHost));
    unsigned long long total = 0;
    std::string fields;
    for (int k = 0; k < NSLOT; k++) {
      total += h[k];
      // Each kernel runs once per iteration (eager: one launch; graphs: one node each). The
      // 32-bit counters would wrap after 4G executions: far beyond any run here.
      if (h[k] != (unsigned)d.iterations) {
        fprintf(stderr, "two_gpu: device %d: %s ran %u times, expected %llu\n", d.device,
                kPlain[k], h[k], d.iterations);
        bad++;
      }
      fields += "\tk:" + kernel_name(d.fn[k], kPlain[k], d.device) + "=" + std::to_string(h[k]);
    }
    printf("DEVICE\tdevice=%d\tpid=%d\tgpu=%s\titerations=%llu\tlaunches=%llu\t"
           "graph_launches=%llu\tkernels=%llu%s\n",
           d.device, (int)getpid(), d.gpu.c_str(), d.iterations, d.launches, d.graph_launches,
           total, fields.c_str());
  }
  printf("END\tstatus=%s\n", bad ? "count-mismatch" : "ok");
  fflush(stdout);
  for (Dev &d : devs) {
    CHECK(cudaSetDevice(d.device));
    CHECK(cudaGraphExecDestroy(d.exec1));
    CHECK(cudaGraphExecDestroy(d.exec2));
    CHECK(cudaStreamDestroy(d.s));
    CHECK(cudaFree(d.count));
    CHECK(cudaFree(d.sink));
  }
  return bad ? 1 : 0;
}
