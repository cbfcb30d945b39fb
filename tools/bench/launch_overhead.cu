// Launch overhead of an empty kernel, in nanoseconds per launch (issue 4's benchmark).
//
//   launch_overhead --mode eager|graph [-n N] [--warmup W] [--fake-consumer PROBES]
//
// eager: N launches of an empty kernel with <<<1,1,0,stream>>>.
// graph: N cudaGraphLaunch of a captured graph of 4 empty kernels (one launch = 4 kernels).
// Both on one created non-blocking stream. After W warm-up launches (default N/10, at least 1000)
// and a synchronize, the timed part is the host launch loop plus the final synchronize; the result
// is that time divided by N. scripts/bench-gpu-overhead.sh runs it with and without the library
// and the consumer, interleaved.
//
// --fake-consumer PROBES ("all" or "cuda_correlation,kernel_executed,..."): once CUDA is up, raise
// those USDT semaphores of the library named by CUDA_INJECTION64_PATH, as an attaching eBPF
// consumer would (tools/common/sdt_semaphores.h), and give the library 0.5 s to notice: the library's
// attached cost without the uprobe traps of a real consumer.
//
// Prints one machine-readable line on stdout:
//   LAUNCH_OVERHEAD mode=eager n=300000 warmup=30000 kernels_per_launch=1 total_ns=1234567890 ns_per_launch=4115.2
// Exit 0, or 2 on a CUDA error or bad arguments.
//
// Build: nvcc -O2 -std=c++17 -arch=sm_90 -o launch_overhead launch_overhead.cu

#include <cuda_runtime.h>

#include <chrono>
#include <string>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../common/sdt_semaphores.h"
#define CHECK_PROGRAM "launch_overhead"
#include "../../tests/gpu/cuda_check.h"


__global__ void empty_kernel() {}

namespace {

constexpr int kGraphKernels = 4;

void usage() {
  fprintf(stderr,
          "usage: launch_overhead --mode eager|graph [-n N] [--warmup W] [--fake-consumer P]\n");
  exit(2);
}

long parse_count(const char *s) {
  char *end = nullptr;
  long v = strtol(s, &end, 10);
  if (!s[0] || *end || v < 0) usage();
  return v;
}

// --fake-consumer: raises the library's semaphores of `probes` and gives the library 0.5 s to
// notice. False (said) when none was raised.
bool raise_semaphores(const char *probes) {
  const char *lib = getenv("CUDA_INJECTION64_PATH");
  std::string err;
  const auto sems = sdtsem::find(lib ? lib : "", "parcagpu", &err);
  const int raised = sems.empty() ? 0 : sdtsem::raise(sems, probes, +1);
  if (raised == 0) {
    fprintf(stderr, "launch_overhead: --fake-consumer %s: nothing raised (%s)\n", probes,
            err.c_str());
    return false;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  return true;
}

// A captured graph of kGraphKernels empty kernels, instantiated and uploaded on s.
cudaGraphExec_t captured_graph(cudaStream_t s) {
  cudaGraphExec_t exec = nullptr;
  cudaGraph_t g = nullptr;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int k = 0; k < kGraphKernels; k++) empty_kernel<<<1, 1, 0, s>>>();
  CHECK(cudaGetLastError());
  CHECK(cudaStreamEndCapture(s, &g));
  CHECK(cudaGraphInstantiate(&exec, g, 0));
  CHECK(cudaGraphDestroy(g));
  CHECK(cudaGraphUpload(exec, s));
  return exec;
}

}  // namespace

int main(int argc, char **argv) {
  const char *mode = "eager";
  long n = 300000, warmup = -1;
  const char *fake_consumer = nullptr;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--mode") && i + 1 < argc) mode = argv[++i];
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) n = parse_count(argv[++i]);
    else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = parse_count(argv[++i]);
    else if (!strcmp(argv[i], "--fake-consumer") && i + 1 < argc) fake_consumer = argv[++i];
    else usage();
  }
  const bool graph = !strcmp(mode, "graph");
  if (!graph && strcmp(mode, "eager")) usage();
  if (n <= 0) usage();
  if (warmup < 0) warmup = n / 10 < 1000 ? 1000 : n / 10;

  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));
  if (fake_consumer && !raise_semaphores(fake_consumer)) return 2;
  cudaStream_t s = nullptr;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

  cudaGraphExec_t exec = graph ? captured_graph(s) : nullptr;

  long failed = 0;  // launches that returned an error (checked once, after the loops)
  auto launch = [&]() {
    if (graph) {
      failed += cudaGraphLaunch(exec, s) != cudaSuccess;
    } else {
      empty_kernel<<<1, 1, 0, s>>>();
    }
  };

  for (long i = 0; i < warmup; i++) launch();
  CHECK(cudaStreamSynchronize(s));
  CHECK(cudaGetLastError());

  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; i++) launch();
  CHECK(cudaStreamSynchronize(s));
  const auto t1 = std::chrono::steady_clock::now();
  CHECK(cudaGetLastError());

  if (failed) {
    fprintf(stderr, "launch_overhead: %ld graph launches failed\n", failed);
    return 2;
  }
  const long long total = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
  printf("LAUNCH_OVERHEAD mode=%s n=%ld warmup=%ld kernels_per_launch=%d total_ns=%lld "
         "ns_per_launch=%.1f\n",
         mode, n, warmup, graph ? kGraphKernels : 1, total, (double)total / (double)n);
  fflush(stdout);

  if (exec) CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaStreamDestroy(s));
  return 0;
}
