// Real-GPU reproducer for parcagpu (issue 4): runs every kernel launch path CUDA offers, one
// phase each, each phase with its own kernel (a distinct mangled name), and counts on the GPU how
// many times each kernel actually ran. scripts/graph-repro-real.sh builds it twice, runs it under
// libparcagpu.so with parcagpu-trace attached, and compares the consumer's per-kernel matches with
// the table this program prints.
//
// Build (the script does this):
//   nvcc -O2 -std=c++17 -arch=sm_90 -o graph_repro      graph_repro.cu -lcuda
//   nvcc -O2 -std=c++17 -arch=sm_90 -o graph_repro_ptsz graph_repro.cu -lcuda --default-stream per-thread
// The second build (nvcc defines CUDA_API_PER_THREAD_DEFAULT_STREAM) runs the phases that have a
// _ptsz entry point, with phase and kernel names prefixed by "ptsz_": <<<>>> then fires
// cudaLaunchKernel_ptsz (214) / cuLaunchKernel_ptsz (442), and cuGraphLaunch on
// CU_STREAM_PER_THREAD fires cuGraphLaunch_ptsz (515).
//
// Output: stdout carries only the table (tab-separated, header line first, '#' lines are
// comments); progress and diagnostics go to stderr.
//   phase  class  kernel  kernels_run  launches  api  cbids
// class:   eager | capture | graph | conditional | hostonly   (the script's known-failure list
//          matches a phase by name or by class)
// kernel:  the mangled name as CUPTI reports it (cudaFuncGetName), "-" for a phase without one.
// kernels_run: executions counted on the GPU (atomicAdd in the kernel), not launches: kernels
//          launched during stream capture never run as such, conditional bodies run many times.
// launches: API calls of the phase (graph launches for graph phases, the launches recorded during
//          capture for the capture phase).
// cbids:   the callback ids CUPTI fires for the call (docs/cupti-facts.md, fact 2): rtN = runtime,
//          drvN = driver; the consumer sees drivers negated (-514).
// Exit: 0 all counts as expected, 1 a kernel ran a different number of times than expected,
//       2 a CUDA error.

#include <cuda.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#define REPRO_PTSZ 1
#define PHASE_PREFIX "ptsz_"
#else
#define REPRO_PTSZ 0
#define PHASE_PREFIX ""
#endif

#define CHECK_PROGRAM "graph_repro"
#include "cuda_check.h"

// Every kernel has the same signature, so its mangled name is _Z<len><name>PjPiy:
//   count: this kernel's execution counter; iter: loop counter of the conditional phase;
//   h: the conditional handle (cudaGraphConditionalHandle is unsigned long long).
#define KARGS unsigned int *count, int *iter, unsigned long long h

#define COUNTING_KERNEL(name)                                       \
  __global__ void name(KARGS) {                                     \
    (void)iter;                                                     \
    (void)h;                                                        \
    if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(count, 1u);  \
  }

// One kernel per phase. The ptsz build gets its own names, so that both binaries can report to
// one consumer and its kernels_by_name still tells them apart.
#if REPRO_PTSZ
#define K(x) k_ptsz_##x
#else
#define K(x) k_##x
#endif

COUNTING_KERNEL(K(chevron))
COUNTING_KERNEL(K(launch_kernel))
COUNTING_KERNEL(K(launch_kernel_ex))
COUNTING_KERNEL(K(cooperative))
COUNTING_KERNEL(K(cu_launch_kernel))
COUNTING_KERNEL(K(cu_launch_kernel_ex))
COUNTING_KERNEL(K(graph_launch))
COUNTING_KERNEL(K(cu_graph_launch))
COUNTING_KERNEL(K(explicit_graph))
COUNTING_KERNEL(K(threads))

// Conditional WHILE body: decrement the loop counter, then set the condition (iter > 0).
__global__ void K(conditional_body)(KARGS) {
  (void)h;
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    atomicAdd(count, 1u);
    *iter -= 1;
  }
}
__global__ void K(conditional_cond)(KARGS) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    atomicAdd(count, 1u);
    cudaGraphSetConditional(h, *iter > 0 ? 1u : 0u);
  }
}

namespace {

constexpr unsigned kEager = 8;         // launches per eager phase
constexpr unsigned kReplays = 4;       // graph launches per replay phase
[[maybe_unused]] constexpr unsigned kThreads = 4;      // threads phase: threads ...
[[maybe_unused]] constexpr unsigned kPerThread = 8;    // ... and launches per thread
[[maybe_unused]] constexpr unsigned kCondLaunches = 2; // conditional graph launches
[[maybe_unused]] constexpr int kCondIters = 5;         // WHILE body iterations per launch
[[maybe_unused]] constexpr unsigned kHostLaunches = 3; // host-function-only graph launches
// Nodes of the two captured graphs. Distinct totals per binary (6 legacy, 4 ptsz) and distinct
// launch counts of the conditional (2) and host-only (3) phases let the script tell which phase
// an orphan count comes from.
#if REPRO_PTSZ
constexpr unsigned kCapturedA = 2, kCapturedB = 2;
#else
constexpr unsigned kCapturedA = 3, kCapturedB = 3;
#endif

enum Slot {
  S_CHEVRON,
  S_LAUNCH_KERNEL,
  S_LAUNCH_KERNEL_EX,
  S_COOPERATIVE,
  S_CU_LAUNCH_KERNEL,
  S_CU_LAUNCH_KERNEL_EX,
  S_GRAPH_LAUNCH,
  S_CU_GRAPH_LAUNCH,
  S_EXPLICIT_GRAPH,
  S_COND_BODY,
  S_COND_COND,
  S_THREADS,
  S_NONE,  // rows without a kernel
  NSLOT
};

struct Row {
  std::string phase, cls;
  const void *fn;  // nullptr: no kernel
  const char *plain;
  Slot slot;
  unsigned expected;
  unsigned launches;
  std::string api, cbids;
};

std::vector<Row> g_rows;
unsigned int *d_count = nullptr;  // [NSLOT]
int *d_iter = nullptr;
cudaStream_t g_s = nullptr;        // stream of the launches
cudaStream_t g_capture = nullptr;  // a created stream to capture on
CUstream g_cus = nullptr;          // the same launch stream for the driver API
cudaGraphExec_t g_exec_a = nullptr, g_exec_b = nullptr;
std::atomic<unsigned> g_host_runs{0};

unsigned int *cnt(Slot s) { return d_count + s; }

// A kernel's arguments (its slot's counter, d_iter, handle 0) as the launch APIs that take a
// void *[] want them. `ptrs` points into the object itself, so it is neither copied nor moved.
struct KernelArgs {
  explicit KernelArgs(Slot s) : c(cnt(s)) {}
  KernelArgs(const KernelArgs &) = delete;
  KernelArgs &operator=(const KernelArgs &) = delete;
  unsigned int *c;
  int *it = d_iter;
  unsigned long long h = 0;
  void *ptrs[3] = {&c, &it, &h};
};

const char *ptsz_sfx() { return REPRO_PTSZ ? "_ptsz" : ""; }

void add_row(const char *phase, const char *cls, const void *fn, const char *plain, Slot slot,
             unsigned expected, unsigned launches, const std::string &api,
             const std::string &cbids) {
  g_rows.push_back({std::string(PHASE_PREFIX) + phase, cls, fn, plain, slot, expected, launches,
                    api, cbids});
}

// The name CUPTI's kernel record carries: the mangled name from the binary.
std::string kernel_name(const void *fn, const char *plain) {
  const char *n = nullptr;
  if (cudaFuncGetName(&n, fn) == cudaSuccess && n && *n) return n;
  cudaGetLastError();
  return "_Z" + std::to_string(strlen(plain)) + plain + "PjPiy";
}

void phase_done(const char *phase) {
  CHECK(cudaDeviceSynchronize());
  fprintf(stderr, "graph_repro: phase %s%s done\n", PHASE_PREFIX, phase);
}

#define PLAIN(x) PLAIN2(K(x))
#define PLAIN2(x) PLAIN3(x)
#define PLAIN3(x) #x

void phase_chevron() {
  for (unsigned i = 0; i < kEager; i++) K(chevron)<<<1, 1, 0, g_s>>>(cnt(S_CHEVRON), d_iter, 0);
  CHECK(cudaGetLastError());
  add_row("chevron", "eager", (const void *)K(chevron), PLAIN(chevron), S_CHEVRON, kEager, kEager,
          "<<<>>>", REPRO_PTSZ ? "rt214/drv442" : "rt211/drv307");
  phase_done("chevron");
}

void phase_launch_kernel() {
  KernelArgs args(S_LAUNCH_KERNEL);
  for (unsigned i = 0; i < kEager; i++)
    CHECK(cudaLaunchKernel((const void *)K(launch_kernel), dim3(1), dim3(1), args.ptrs, 0, g_s));
  add_row("launch_kernel", "eager", (const void *)K(launch_kernel), PLAIN(launch_kernel),
          S_LAUNCH_KERNEL, kEager, kEager, std::string("cudaLaunchKernel") + ptsz_sfx(),
          REPRO_PTSZ ? "rt214/drv442" : "rt211/drv307");
  phase_done("launch_kernel");
}

void phase_launch_kernel_ex() {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(1);
  cfg.blockDim = dim3(1);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = g_s;
  for (unsigned i = 0; i < kEager; i++)
    CHECK(cudaLaunchKernelEx(&cfg, K(launch_kernel_ex), cnt(S_LAUNCH_KERNEL_EX), d_iter, 0ull));
  add_row("launch_kernel_ex", "eager", (const void *)K(launch_kernel_ex), PLAIN(launch_kernel_ex),
          S_LAUNCH_KERNEL_EX, kEager, kEager, std::string("cudaLaunchKernelEx") + ptsz_sfx(),
          REPRO_PTSZ ? "rt431/drv653" : "rt430/drv652");
  phase_done("launch_kernel_ex");
}

void phase_cooperative() {
  KernelArgs args(S_COOPERATIVE);
  for (unsigned i = 0; i < kEager; i++)
    CHECK(cudaLaunchCooperativeKernel((const void *)K(cooperative), dim3(1), dim3(32), args.ptrs,
                                      0, g_s));
  add_row("cooperative", "eager", (const void *)K(cooperative), PLAIN(cooperative), S_COOPERATIVE,
          kEager, kEager, std::string("cudaLaunchCooperativeKernel") + ptsz_sfx(),
          REPRO_PTSZ ? "rt270/drv478" : "rt269/drv477");
  phase_done("cooperative");
}

CUfunction driver_function(const void *fn) {
  cudaFunction_t f = nullptr;
  CHECK(cudaGetFuncBySymbol(&f, fn));
  return reinterpret_cast<CUfunction>(f);
}

void phase_cu_launch_kernel() {
  CUfunction f = driver_function((const void *)K(cu_launch_kernel));
  KernelArgs args(S_CU_LAUNCH_KERNEL);
  for (unsigned i = 0; i < kEager; i++)
    CHECK_DRV(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, g_cus, args.ptrs, nullptr));
  add_row("cu_launch_kernel", "eager", (const void *)K(cu_launch_kernel), PLAIN(cu_launch_kernel),
          S_CU_LAUNCH_KERNEL, kEager, kEager, std::string("cuLaunchKernel") + ptsz_sfx(),
          REPRO_PTSZ ? "drv442" : "drv307");
  phase_done("cu_launch_kernel");
}

void phase_cu_launch_kernel_ex() {
  CUfunction f = driver_function((const void *)K(cu_launch_kernel_ex));
  KernelArgs args(S_CU_LAUNCH_KERNEL_EX);
  CUlaunchConfig cfg = {};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = 0;
  cfg.hStream = g_cus;
  cfg.attrs = nullptr;
  cfg.numAttrs = 0;
  for (unsigned i = 0; i < kEager; i++) CHECK_DRV(cuLaunchKernelEx(&cfg, f, args.ptrs, nullptr));
  add_row("cu_launch_kernel_ex", "eager", (const void *)K(cu_launch_kernel_ex),
          PLAIN(cu_launch_kernel_ex), S_CU_LAUNCH_KERNEL_EX, kEager, kEager,
          std::string("cuLaunchKernelEx") + ptsz_sfx(), REPRO_PTSZ ? "drv653" : "drv652");
  phase_done("cu_launch_kernel_ex");
}

// Stream capture: every <<<>>> below fires its launch callbacks with a fresh correlation ID but
// never runs under it (docs/cupti-facts.md, fact 5). The two graphs are replayed by the next
// phases; their kernels belong to those phases' rows.
void phase_capture() {
  cudaGraph_t ga = nullptr, gb = nullptr;
  CHECK(cudaStreamBeginCapture(g_capture, cudaStreamCaptureModeGlobal));
  for (unsigned i = 0; i < kCapturedA; i++)
    K(graph_launch)<<<1, 1, 0, g_capture>>>(cnt(S_GRAPH_LAUNCH), d_iter, 0);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamEndCapture(g_capture, &ga));
  CHECK(cudaStreamBeginCapture(g_capture, cudaStreamCaptureModeGlobal));
  for (unsigned i = 0; i < kCapturedB; i++)
    K(cu_graph_launch)<<<1, 1, 0, g_capture>>>(cnt(S_CU_GRAPH_LAUNCH), d_iter, 0);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamEndCapture(g_capture, &gb));
  CHECK(cudaGraphInstantiate(&g_exec_a, ga, 0));
  CHECK(cudaGraphInstantiate(&g_exec_b, gb, 0));
  CHECK(cudaGraphDestroy(ga));
  CHECK(cudaGraphDestroy(gb));
  add_row("capture", "capture", nullptr, "-", S_NONE, 0, kCapturedA + kCapturedB,
          "streamCapture(<<<>>>)", REPRO_PTSZ ? "rt214/drv442" : "rt211/drv307");
  phase_done("capture");
}

void phase_graph_launch() {
  for (unsigned i = 0; i < kReplays; i++) CHECK(cudaGraphLaunch(g_exec_a, g_s));
  add_row("graph_launch", "graph", (const void *)K(graph_launch), PLAIN(graph_launch),
          S_GRAPH_LAUNCH, kCapturedA * kReplays, kReplays,
          std::string("cudaGraphLaunch") + ptsz_sfx(), "rt311/drv514");  // ptsz: CUPTI still said 311
  phase_done("graph_launch");
}

void phase_cu_graph_launch() {
  // In the ptsz build cuda.h maps cuGraphLaunch to cuGraphLaunch_ptsz (515).
  for (unsigned i = 0; i < kReplays; i++)
    CHECK_DRV(cuGraphLaunch(reinterpret_cast<CUgraphExec>(g_exec_b), g_cus));
  add_row("cu_graph_launch", "graph", (const void *)K(cu_graph_launch), PLAIN(cu_graph_launch),
          S_CU_GRAPH_LAUNCH, kCapturedB * kReplays, kReplays,
          std::string("cuGraphLaunch") + ptsz_sfx(), REPRO_PTSZ ? "drv515" : "drv514");
  phase_done("cu_graph_launch");
}

#if !REPRO_PTSZ  // phases of the legacy-stream build only
cudaKernelNodeParams kernel_node(const void *fn, void **args) {
  cudaKernelNodeParams p = {};
  p.func = const_cast<void *>(fn);
  p.gridDim = dim3(1);
  p.blockDim = dim3(1);
  p.sharedMemBytes = 0;
  p.kernelParams = args;
  p.extra = nullptr;
  return p;
}

void phase_explicit_graph() {
  cudaGraph_t g = nullptr;
  CHECK(cudaGraphCreate(&g, 0));
  KernelArgs args(S_EXPLICIT_GRAPH);
  cudaKernelNodeParams p = kernel_node((const void *)K(explicit_graph), args.ptrs);
  cudaGraphNode_t n1 = nullptr, n2 = nullptr;
  CHECK(cudaGraphAddKernelNode(&n1, g, nullptr, 0, &p));
  CHECK(cudaGraphAddKernelNode(&n2, g, &n1, 1, &p));
  cudaGraphExec_t e = nullptr;
  CHECK(cudaGraphInstantiate(&e, g, 0));
  for (unsigned i = 0; i < kReplays; i++) CHECK(cudaGraphLaunch(e, g_s));
  add_row("explicit_graph", "graph", (const void *)K(explicit_graph), PLAIN(explicit_graph),
          S_EXPLICIT_GRAPH, 2 * kReplays, kReplays, "cudaGraphAddKernelNode+cudaGraphLaunch",
          "rt311/drv514");
  phase_done("explicit_graph");
  CHECK(cudaGraphExecDestroy(e));
  CHECK(cudaGraphDestroy(g));
}

// A graph whose top level is one conditional WHILE node; its body (two kernels) runs kCondIters
// times per launch. docs/cupti-facts.md, fact 7: these kernels arrive with correlation ID 0, the
// body graph's id and another stream.
void phase_conditional() {
  cudaGraph_t g = nullptr;
  CHECK(cudaGraphCreate(&g, 0));
  cudaGraphConditionalHandle handle = 0;
  CHECK(cudaGraphConditionalHandleCreate(&handle, g, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams cp = {};
  cp.type = cudaGraphNodeTypeConditional;
  cp.conditional.handle = handle;
  cp.conditional.type = cudaGraphCondTypeWhile;
  cp.conditional.size = 1;
  cudaGraphNode_t cnode = nullptr;
#if CUDART_VERSION >= 13000
  CHECK(cudaGraphAddNode(&cnode, g, nullptr, nullptr, 0, &cp));
#else
  CHECK(cudaGraphAddNode(&cnode, g, nullptr, 0, &cp));
#endif
  cudaGraph_t body = cp.conditional.phGraph_out[0];

  unsigned int *cb = cnt(S_COND_BODY), *cc = cnt(S_COND_COND);
  int *it = d_iter;
  unsigned long long h = handle;
  void *args_b[] = {&cb, &it, &h};
  void *args_c[] = {&cc, &it, &h};
  cudaKernelNodeParams pb = kernel_node((const void *)K(conditional_body), args_b);
  cudaKernelNodeParams pc = kernel_node((const void *)K(conditional_cond), args_c);
  cudaGraphNode_t nb = nullptr, nc = nullptr;
  CHECK(cudaGraphAddKernelNode(&nb, body, nullptr, 0, &pb));
  CHECK(cudaGraphAddKernelNode(&nc, body, &nb, 1, &pc));

  cudaGraphExec_t e = nullptr;
  CHECK(cudaGraphInstantiate(&e, g, 0));
  static const int iters = kCondIters;
  for (unsigned i = 0; i < kCondLaunches; i++) {
    CHECK(cudaMemcpyAsync(d_iter, &iters, sizeof iters, cudaMemcpyHostToDevice, g_s));
    CHECK(cudaGraphLaunch(e, g_s));
  }
  const unsigned runs = kCondLaunches * kCondIters;
  add_row("conditional", "conditional", (const void *)K(conditional_body),
          PLAIN(conditional_body), S_COND_BODY, runs, kCondLaunches,
          "cudaGraphLaunch(WHILE-node)", "rt311/drv514");
  add_row("conditional", "conditional", (const void *)K(conditional_cond),
          PLAIN(conditional_cond), S_COND_COND, runs, kCondLaunches,
          "cudaGraphLaunch(WHILE-node)", "rt311/drv514");
  phase_done("conditional");
  CHECK(cudaGraphExecDestroy(e));
  CHECK(cudaGraphDestroy(g));
}

void CUDART_CB host_fn(void *) { g_host_runs.fetch_add(1); }

// A graph holding only a host function (captured cudaLaunchHostFunc): its launches fire 311/514
// and no kernel record ever comes (docs/cupti-facts.md, fact 8).
void phase_hostonly() {
  cudaGraph_t g = nullptr;
  CHECK(cudaStreamBeginCapture(g_capture, cudaStreamCaptureModeGlobal));
  CHECK(cudaLaunchHostFunc(g_capture, host_fn, nullptr));
  CHECK(cudaStreamEndCapture(g_capture, &g));
  cudaGraphExec_t e = nullptr;
  CHECK(cudaGraphInstantiate(&e, g, 0));
  for (unsigned i = 0; i < kHostLaunches; i++) CHECK(cudaGraphLaunch(e, g_s));
  add_row("hostonly", "hostonly", nullptr, "-", S_NONE, 0, kHostLaunches,
          "cudaGraphLaunch(host-fn-only)", "rt311/drv514");
  phase_done("hostonly");
  if (g_host_runs.load() != kHostLaunches)
    fprintf(stderr, "graph_repro: hostonly: host function ran %u times, expected %u\n",
            g_host_runs.load(), kHostLaunches);
  CHECK(cudaGraphExecDestroy(e));
  CHECK(cudaGraphDestroy(g));
}

// Four threads, each on its own stream: correlation IDs interleave (docs/cupti-facts.md, fact 9).
void phase_threads() {
  std::vector<std::thread> ts;
  std::atomic<int> failed{0};
  for (unsigned t = 0; t < kThreads; t++) {
    ts.emplace_back([&failed] {
      cudaStream_t s = nullptr;
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        failed++;
        return;
      }
      for (unsigned i = 0; i < kPerThread; i++)
        K(threads)<<<1, 1, 0, s>>>(cnt(S_THREADS), d_iter, 0);
      if (cudaGetLastError() != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess) failed++;
      cudaStreamDestroy(s);
    });
  }
  for (auto &t : ts) t.join();
  if (failed.load()) {
    fprintf(stderr, "graph_repro: threads: %d threads failed\n", failed.load());
    exit(2);
  }
  add_row("threads", "eager", (const void *)K(threads), PLAIN(threads), S_THREADS,
          kThreads * kPerThread, kThreads * kPerThread, "<<<>>>(4-threads)",
          REPRO_PTSZ ? "rt214/drv442" : "rt211/drv307");
  phase_done("threads");
}
#endif  // !REPRO_PTSZ

}  // namespace

int main() {
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(nullptr));  // create the primary context
  cudaDeviceProp prop = {};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  fprintf(stderr, "graph_repro%s: pid %d, device %s (sm_%d%d), runtime %d, driver %d\n",
          REPRO_PTSZ ? " (per-thread default stream)" : "", (int)getpid(), prop.name, prop.major,
          prop.minor, rt, drv);
  if (!prop.cooperativeLaunch) {
    fprintf(stderr, "graph_repro: device lacks cooperative launch\n");
    return 2;
  }

  CHECK(cudaMalloc(&d_count, NSLOT * sizeof(unsigned int)));
  CHECK(cudaMemset(d_count, 0, NSLOT * sizeof(unsigned int)));
  CHECK(cudaMalloc(&d_iter, sizeof(int)));
  CHECK(cudaMemset(d_iter, 0, sizeof(int)));
  CHECK(cudaStreamCreateWithFlags(&g_capture, cudaStreamNonBlocking));
#if REPRO_PTSZ
  g_s = cudaStreamPerThread;
  g_cus = CU_STREAM_PER_THREAD;
#else
  CHECK(cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking));
  g_cus = reinterpret_cast<CUstream>(g_s);
#endif
  CHECK(cudaDeviceSynchronize());

  phase_chevron();
  phase_launch_kernel();
  phase_launch_kernel_ex();
  phase_cooperative();
  phase_cu_launch_kernel();
  phase_cu_launch_kernel_ex();
  phase_capture();
  phase_graph_launch();
  phase_cu_graph_launch();
#if !REPRO_PTSZ
  phase_explicit_graph();
  phase_conditional();
  phase_hostonly();
  phase_threads();
#endif

  unsigned int h_count[NSLOT] = {};
  CHECK(cudaMemcpy(h_count, d_count, sizeof h_count, cudaMemcpyDeviceToHost));

  int bad = 0;
  if (g_host_runs.load() != (REPRO_PTSZ ? 0u : kHostLaunches)) bad++;
  printf("# graph_repro%s pid=%d device=%s\n", REPRO_PTSZ ? "_ptsz" : "", (int)getpid(),
         prop.name);
  printf("phase\tclass\tkernel\tkernels_run\tlaunches\tapi\tcbids\n");
  for (const Row &r : g_rows) {
    const unsigned run = r.slot == S_NONE ? 0 : h_count[r.slot];
    const std::string name = r.fn ? kernel_name(r.fn, r.plain) : "-";
    if (run != r.expected) {
      fprintf(stderr, "graph_repro: %s: %s ran %u times, expected %u\n", r.phase.c_str(),
              name.c_str(), run, r.expected);
      bad++;
    }
    printf("%s\t%s\t%s\t%u\t%u\t%s\t%s\n", r.phase.c_str(), r.cls.c_str(), name.c_str(), run,
           r.launches, r.api.c_str(), r.cbids.c_str());
  }
  printf("# end status=%s\n", bad ? "count-mismatch" : "ok");
  fflush(stdout);

  CHECK(cudaStreamDestroy(g_capture));
#if !REPRO_PTSZ
  CHECK(cudaStreamDestroy(g_s));
#endif
  CHECK(cudaGraphExecDestroy(g_exec_a));
  CHECK(cudaGraphExecDestroy(g_exec_b));
  CHECK(cudaFree(d_count));
  CHECK(cudaFree(d_iter));
  return bad ? 1 : 0;
}
