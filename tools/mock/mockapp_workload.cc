// What parcagpu-mockapp launches: the scenarios (each replays one launch path observed on
// the H100, docs/cupti-facts.md, deterministically) and the timed workload.
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "mockapp.h"
#include "parcagpu/cbid_table.h"

namespace mockapp {

std::atomic<uint64_t> g_mock_errors{0};
ForkReport g_fork_report;
int g_runtime_version = 0;

bool check(CUresult rc, const char *what) {
  if (rc == CUDA_SUCCESS) return true;
  g_mock_errors.fetch_add(1);
  const char *name = nullptr;
  cuGetErrorName(rc, &name);
  std::fprintf(stderr, "parcagpu-mockapp: mock call %s failed: %s (%d)\n", what, name ? name : "?",
               static_cast<int>(rc));
  return false;
}

Kernels::Kernels(const std::vector<std::string> &names) {
  for (const std::string &n : names) user_.push_back(mock_cuda_function(n.c_str()));
}

CUfunction Kernels::next(const char *fallback) {
  if (user_.empty()) return mock_cuda_function(fallback);
  return user_[next_.fetch_add(1, std::memory_order_relaxed) % user_.size()];
}

namespace {

constexpr uint32_t kDrv = MOCK_CUDA_DOMAIN_DRIVER;
constexpr uint32_t kRt = MOCK_CUDA_DOMAIN_RUNTIME;
constexpr int kLaunchesPerScenario = 4;  // as in the H100 program's phases

// The H100 program's kernels.
constexpr const char kAdd[] = "_Z5k_addPfi";
constexpr const char kMul[] = "_Z5k_mulPfi";
constexpr const char kCoop[] = "_Z6k_coopPf";
constexpr const char kPtsz[] = "_Z1kPf";
constexpr const char kCond[] = "_Z6k_condyPi";
constexpr const char kDec[] = "_Z5k_decPi";

void launch_n(Kernels &k, uint32_t domain, uint32_t cbid, const char *kernel, CUstream stream,
              int n = kLaunchesPerScenario) {
  for (int i = 0; i < n; ++i)
    check(mock_cuda_launch(domain, cbid, k.next(kernel), stream), mock_cuda_api_name(domain, cbid));
}

// An explicitly built graph of `n` kernels (add, mul, add, ...).
CUgraph kernel_graph(Kernels &k, int n) {
  CUgraph graph = nullptr;
  check(mock_cuda_graph_create(&graph), "cudaGraphCreate");
  for (int i = 0; i < n; ++i) {
    CUgraphNode node;
    check(mock_cuda_graph_add_kernel_node(graph, k.next(i % 2 ? kMul : kAdd), &node),
          "cudaGraphAddKernelNode");
  }
  return graph;
}

// The same, instantiated.
CUgraphExec kernel_graph_exec(Kernels &k, int n) {
  CUgraph graph = kernel_graph(k, n);
  CUgraphExec exec = nullptr;
  check(mock_cuda_graph_instantiate(&exec, graph), "cudaGraphInstantiate");
  check(mock_cuda_graph_destroy(graph), "cudaGraphDestroy");  // the exec lives on without it
  return exec;
}

void graph_launch_n(uint32_t domain, uint32_t cbid, CUgraphExec exec, CUstream stream,
                    int n = kLaunchesPerScenario) {
  for (int i = 0; i < n; ++i)
    check(mock_cuda_graph_launch(domain, cbid, exec, stream), mock_cuda_api_name(domain, cbid));
}

CUstream new_stream() {
  CUstream s = nullptr;
  check(mock_cuda_stream_create(&s), "cudaStreamCreate");
  return s;
}

// Everything a scenario creates is destroyed again, as a well-behaved program does: the mock
// then holds no memory across scenarios, so --loop can be soaked and LeakSanitizer stays quiet.
void destroy(CUgraphExec exec, CUgraph graph = nullptr, CUstream stream = nullptr) {
  if (exec) check(mock_cuda_graph_exec_destroy(exec), "cudaGraphExecDestroy");
  if (graph) check(mock_cuda_graph_destroy(graph), "cudaGraphDestroy");
  if (stream) check(mock_cuda_stream_destroy(stream), "cudaStreamDestroy");
}

// A graph of three kernels, launched through one API and destroyed again.
void launch_three_kernel_graph(Kernels &k, uint32_t domain, uint32_t cbid, CUstream stream) {
  CUgraphExec exec = kernel_graph_exec(k, 3);
  graph_launch_n(domain, cbid, exec, stream);
  destroy(exec);
}

// Ends the capture on s, instantiates the captured graph, launches it like the cudaGraphLaunch
// phase, and destroys it all.
void replay_capture(CUstream s) {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  check(mock_cuda_stream_end_capture(s, &graph), "cudaStreamEndCapture");
  check(mock_cuda_graph_instantiate(&exec, graph), "cudaGraphInstantiate");
  graph_launch_n(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, exec, s);
  destroy(exec, graph, s);
}

// Capture of three launches (docs/cupti-facts.md, fact 5), then the captured graph
// launched like the cudaGraphLaunch phase.
void scenario_capture(Kernels &k) {
  CUstream s = new_stream();
  check(mock_cuda_stream_begin_capture(s), "cudaStreamBeginCapture");
  const char *captured[] = {kAdd, kMul, kAdd};
  for (const char *kernel : captured)
    check(mock_cuda_launch(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, k.next(kernel), s),
          "cudaLaunchKernel (captured)");
  replay_capture(s);
}

// A WHILE conditional whose two-kernel body runs 5 times (docs/cupti-facts.md, fact 7).
void scenario_conditional(Kernels &k) {
  CUstream s = new_stream();
  CUgraph graph = nullptr, body = nullptr;
  CUgraphNode node;
  CUgraphExec exec = nullptr;
  check(mock_cuda_graph_create(&graph), "cudaGraphCreate");
  check(mock_cuda_graph_add_while_node(graph, 5, &body, &node), "cudaGraphAddNode");
  check(mock_cuda_graph_add_kernel_node(body, k.next(kCond), &node), "cudaGraphAddKernelNode");
  check(mock_cuda_graph_add_kernel_node(body, k.next(kDec), &node), "cudaGraphAddKernelNode");
  check(mock_cuda_graph_instantiate(&exec, graph), "cudaGraphInstantiate");
  // Launched twice back to back, as the GPU reproducer does: the second launch is queued while
  // the first one's body still runs, and both own kernels that arrive with correlation ID 0.
  graph_launch_n(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, exec, s, 2);
  // Destroyed before its kernels' records are flushed, as real programs (and our GPU
  // reproducer) do: the owner of the body kernels must outlive the exec.
  destroy(exec, graph, s);
}

// A captured cudaLaunchHostFunc only (docs/cupti-facts.md, fact 8).
void scenario_hostonly_graph() {
  CUstream s = new_stream();
  check(mock_cuda_stream_begin_capture(s), "cudaStreamBeginCapture");
  check(mock_cuda_launch_host_func(s), "cudaLaunchHostFunc");
  replay_capture(s);
}

bool is_ptsz(const char *api_name) {
  const size_t n = std::strlen(api_name);
  return n > 5 && std::strcmp(api_name + n - 5, "_ptsz") == 0;
}

// One launch through every API cbid of the subscription table that the application's CUDA has
// (--cudart; all without one; of the copies and fills, those the mock driver has), in table order (_ptsz APIs on the per-thread default stream), one
// upload of the graph through each upload cbid, and one instantiation of another graph through
// each instantiate cbid; its resource cbids come from instantiating and destroying the graphs.
void scenario_all_cbids(Kernels &k) {
  CUgraphExec exec = kernel_graph_exec(k, 3);
  for (const parcagpu::SubscribedCallback &cb : parcagpu::kSubscribedCallbacks) {
    const auto domain = static_cast<uint32_t>(cb.domain);
    if (domain != kDrv && domain != kRt) continue;  // resource cbids: instantiate / destroy
    if (!parcagpu::callback_known_to(cb, g_runtime_version / 1000)) continue;  // not in this CUDA
    const CUstream stream = is_ptsz(cb.name) ? CU_STREAM_PER_THREAD : nullptr;
    if (cb.role == parcagpu::CbRole::GraphUpload) {
      check(mock_cuda_graph_upload(exec, stream, domain == kDrv), cb.name);
      continue;
    }
    if (cb.role == parcagpu::CbRole::MemoryLaunch) {
      // A copy through each copy and fill API the mock driver has (mock_cuda_memory).
      if (mock_cuda_memory_api_name(domain, cb.cbid))
        check(mock_cuda_memory(domain, cb.cbid, 4096, 1, stream), cb.name);
      continue;
    }
    if (cb.role == parcagpu::CbRole::GraphInstantiate) {
      CUgraphExec e = nullptr;
      CUgraph g = kernel_graph(k, 2);
      check(mock_cuda_graph_instantiate_through(domain, cb.cbid, &e, g), cb.name);
      check(mock_cuda_graph_exec_destroy(e), "cudaGraphExecDestroy");
      check(mock_cuda_graph_destroy(g), "cudaGraphDestroy");
      continue;
    }
    switch (mock_cuda_launch_kind(domain, cb.cbid)) {
      case MOCK_LAUNCH_EAGER:
        check(mock_cuda_launch(domain, cb.cbid, k.next(kAdd), stream), cb.name);
        break;
      case MOCK_LAUNCH_GRAPH:
        check(mock_cuda_graph_launch(domain, cb.cbid, exec, stream), cb.name);
        break;
      case MOCK_LAUNCH_NONE:
        g_mock_errors.fetch_add(1);
        std::fprintf(stderr, "parcagpu-mockapp: the mock driver cannot launch through %s (%u)\n",
                     cb.name, cb.cbid);
        break;
    }
  }
  check(mock_cuda_graph_exec_destroy(exec), "cudaGraphExecDestroy");
}

// Calls launch() every gap_us for ms milliseconds.
template <typename Launch>
void launch_for(uint64_t ms, uint64_t gap_us, const Launch &launch) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    launch();
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
  }
}

// The step of graph-late and graph-warm: three kernels of the cubin's.
const char *const kStepKernels[] = {"_Z10gemm_tiledPKfS0_Pfiii", "_Z7softmaxPfPKfi",
                                    "_Z10reduce_sumPfPKfi"};

// A graph of the step's kernels instantiated, launched (311) every 0.2 ms for ms, destroyed.
void replay_step_graph(Kernels &k, uint64_t ms) {
  CUgraph graph = nullptr;
  check(mock_cuda_graph_create(&graph), "cudaGraphCreate");
  for (const char *name : kStepKernels) {
    CUgraphNode node;
    check(mock_cuda_graph_add_kernel_node(graph, k.next(name), &node), "cudaGraphAddKernelNode");
  }
  CUgraphExec exec = nullptr;
  check(mock_cuda_graph_instantiate(&exec, graph), "cudaGraphInstantiate");
  launch_for(ms, 200, [&] {
    check(
        mock_cuda_graph_launch(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, exec, nullptr),
        "cudaGraphLaunch");
  });
  destroy(exec, graph);
}

void launch_eager(Kernels &k, const char *name) {
  check(
      mock_cuda_launch(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, k.next(name), nullptr),
      "cudaLaunchKernel");
}

// Kernels first run inside a graph long after the program began, when PC sampling has stopped
// learning its kernels (docs/pc-sampling.md P19, P32): 2.5 s of eager k_add launches a
// millisecond apart, then a graph of three kernels never launched before (gemm_tiled, softmax,
// reduce_sum) instantiated and replayed for 4 s, a launch every 0.2 ms.
void scenario_graph_late(Kernels &k) {
  launch_for(2500, 1000, [&] { launch_eager(k, kAdd); });
  replay_step_graph(k, 4000);
}

// A step warmed up eagerly, then captured and replayed, as PyTorch does (docs/pc-sampling.md P19,
// P36): 300 ms of eager launches of the same three kernels a millisecond apart, then their graph
// replayed for 3.5 s. Whether the replays are sampled depends on where PC sampling was first
// enabled (PARCAGPU_PC_START_QUIET_MS).
void scenario_graph_warm(Kernels &k) {
  launch_for(300, 1000, [&] {
    for (const char *name : kStepKernels) launch_eager(k, name);
  });
  replay_step_graph(k, 3500);
}

// A program that pauses after its first launches (building its model, loading data) for longer
// than PC sampling learns new kernels, then loads a module (a JIT compiler's kernels, or lazy
// loading's next one) and warms up a step whose graph it replays (docs/pc-sampling.md P37):
// 50 ms of k_add launches a millisecond apart, 3 s without a launch, one k_add, the module, 200
// ms more of k_add, 300 ms of the step's kernels eagerly, then their graph replayed for 3 s.
void scenario_graph_after_pause(Kernels &k) {
  launch_for(50, 1000, [&] { launch_eager(k, kAdd); });
  std::this_thread::sleep_for(std::chrono::seconds(3));
  launch_eager(k, kAdd);
  check(mock_cuda_load_module(), "cuModuleLoadData");
  launch_for(200, 1000, [&] { launch_eager(k, kAdd); });
  launch_for(300, 1000, [&] {
    for (const char *name : kStepKernels) launch_eager(k, name);
  });
  replay_step_graph(k, 3000);
}

struct Scenario {
  const char *name;
  void (*run)(Kernels &);
};

const Scenario kScenarios[] = {
    {"eager-runtime",
     [](Kernels &k) {
       launch_n(k, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, kAdd, nullptr);
     }},
    {"eager-driver",
     [](Kernels &k) { launch_n(k, kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, kAdd, nullptr); }},
    {"launch-ex",
     [](Kernels &k) {
       launch_n(k, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, kMul, nullptr);
       launch_n(k, kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, kAdd, nullptr);
     }},
    {"cooperative",
     [](Kernels &k) {
       launch_n(k, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, kCoop, nullptr);
     }},
    {"ptsz",
     [](Kernels &k) {
       launch_n(k, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, kPtsz,
                CU_STREAM_PER_THREAD);
     }},
    {"graph-runtime",
     [](Kernels &k) {
       launch_three_kernel_graph(k, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, nullptr);
     }},
    {"graph-driver",
     [](Kernels &k) {
       launch_three_kernel_graph(k, kDrv, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, nullptr);
     }},
    {"graph-driver-ptsz",
     [](Kernels &k) {
       launch_three_kernel_graph(k, kDrv, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
                                 CU_STREAM_PER_THREAD);
     }},
    {"graph-upload",
     [](Kernels &k) {
       // Uploaded ahead of its launches, as PyTorch and tools/bench/launch_overhead.cu do: once
       // through the runtime (cudaGraphUpload over cuGraphUpload), once through the driver.
       for (int driver_only : {0, 1}) {
         CUgraphExec exec = kernel_graph_exec(k, 3);
         check(mock_cuda_graph_upload(exec, nullptr, driver_only), "cudaGraphUpload");
         graph_launch_n(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, exec, nullptr);
         destroy(exec);
       }
     }},
    {"graph-late", scenario_graph_late},
    {"graph-warm", scenario_graph_warm},
    {"graph-after-pause", scenario_graph_after_pause},
    {"capture", scenario_capture},
    {"conditional", scenario_conditional},
    {"hostonly-graph", [](Kernels &) { scenario_hostonly_graph(); }},
    {"all-cbids", scenario_all_cbids},
    {"attach-detach", scenario_attach_detach},
    {"clone-refire", scenario_clone_refire},
    {"copies", scenario_copies},
    {"nvtx", scenario_nvtx},
};

// ---- Timed workload ----

// The eager launch mix: mostly <<<>>> (211 over 307), some of every other common path.
struct Path {
  uint32_t domain;
  uint32_t cbid;
  bool per_thread_stream;
};
constexpr Path kEagerMix[] = {
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, false},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, false},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, false},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, false},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, false},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, true},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, false},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, false},
};
// Graph launches: half runtime (311 over 514), half driver, split between 514 and 515.
constexpr Path kGraphMix[] = {
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, false},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, false},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, false},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, true},
};
constexpr int kGraphSizes[] = {2, 3, 4, 5};  // kernels per graph

const char *const kDefaultKernels[] = {kAdd, kMul, "_Z10gemm_tiledPKfS0_Pfiii", "_Z7softmaxPfPKfi",
                                       "_Z9reduce_sumPfPKfi"};

struct DeviceResources {
  CUstream stream;
  std::vector<CUgraphExec> execs;
};

// Per simulated device: a stream and one instantiated graph of each of kGraphSizes.
std::vector<DeviceResources> make_devices(const Options &o, Kernels &kernels, int index) {
  std::vector<DeviceResources> devices(o.num_gpus);
  for (int d = 0; d < o.num_gpus; ++d) {
    check(mock_cuda_set_device(d), "cudaSetDevice");
    devices[d].stream = new_stream();
    for (int n : kGraphSizes) {
      CUgraph graph = nullptr;
      CUgraphExec exec = nullptr;
      check(mock_cuda_graph_create(&graph), "cudaGraphCreate");
      for (int i = 0; i < n; ++i) {
        CUgraphNode node;
        check(mock_cuda_graph_add_kernel_node(
                  graph, kernels.next(kDefaultKernels[(index + i) % std::size(kDefaultKernels)]),
                  &node),
              "cudaGraphAddKernelNode");
      }
      check(mock_cuda_graph_instantiate(&exec, graph), "cudaGraphInstantiate");
      check(mock_cuda_graph_destroy(graph), "cudaGraphDestroy");
      devices[d].execs.push_back(exec);
    }
  }
  return devices;
}

// --apis: the launch paths of thread `index`.
std::vector<Path> thread_apis(const Options &o, int index) {
  std::vector<Path> apis;
  for (size_t a = 0; a < o.apis.size(); ++a) {
    if (o.api_per_thread && a != static_cast<size_t>(index) % o.apis.size()) continue;
    for (const parcagpu::SubscribedCallback &cb : parcagpu::kSubscribedCallbacks)
      if (is_kernel_launch_role(cb.role) && o.apis[a] == cb.name)
        apis.push_back({static_cast<uint32_t>(cb.domain), cb.cbid, is_ptsz(cb.name)});
  }
  return apis;
}

// Waits until launch i is due (at start + i / rate; a late one goes out at once, to catch up).
// False when the workload's time is up (after sleeping to its end when not --stress).
bool wait_for_launch(const Options &o, uint64_t i, double rate,
                     std::chrono::steady_clock::time_point start,
                     std::chrono::steady_clock::time_point end) {
  if (o.stress) return !(i % 256 == 0 && std::chrono::steady_clock::now() >= end);
  const auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(rate > 0 ? i / rate : 0));
  if (rate <= 0 || due >= end) {
    std::this_thread::sleep_until(end);
    return false;
  }
  if (std::chrono::steady_clock::now() < due) std::this_thread::sleep_until(due);
  return true;
}

// Launch i through a path: a graph launch of one of the device's graphs, or an eager launch.
void launch_through(const Path &p, uint64_t i, const DeviceResources &res,
                    const std::vector<CUfunction> &eager_kernels) {
  const CUstream stream = p.per_thread_stream ? CU_STREAM_PER_THREAD : res.stream;
  if (mock_cuda_launch_kind(p.domain, p.cbid) == MOCK_LAUNCH_GRAPH)
    check(mock_cuda_graph_launch(p.domain, p.cbid, res.execs[i % res.execs.size()], stream),
          "graph launch");
  else
    check(mock_cuda_launch(p.domain, p.cbid, eager_kernels[i % eager_kernels.size()], stream),
          "launch");
}

// The timed mix: graph launches in the share --graph-rate gives, eager launches in between, each
// from its own line here (two launch sites of one function: tests/integration/test_trace_tool.py).
void launch_thread(const Options &o, Kernels &kernels, int index,
                   std::chrono::steady_clock::time_point start) {
  std::vector<DeviceResources> devices = make_devices(o, kernels, index);
  std::vector<CUfunction> eager_kernels;
  for (const char *name : kDefaultKernels) eager_kernels.push_back(kernels.next(name));
  const double rate = o.launch_rate * o.num_gpus / o.threads;  // this thread's launches/s
  const double graph_share = o.launch_rate > 0 ? o.graph_rate / o.launch_rate : 0;
  const auto end = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(o.duration_s));
  const std::vector<Path> apis = thread_apis(o, index);
  double graph_credit = 0;
  uint64_t eager = 0, graphs = 0;
  for (uint64_t i = 0;; ++i) {
    if (o.launches && i >= o.launches) break;
    if (!wait_for_launch(o, i, rate, start, end)) break;
    const int device = static_cast<int>((index + i / o.device_batch) % o.num_gpus);
    if (o.num_gpus > 1) mock_cuda_set_device(device);
    DeviceResources &res = devices[device];
    if (!apis.empty()) {
      launch_through(apis[i % apis.size()], i, res, eager_kernels);
      continue;
    }
    graph_credit += graph_share;
    if (graph_credit >= 1) {
      graph_credit -= 1;
      const Path &p = kGraphMix[graphs % std::size(kGraphMix)];
      CUgraphExec exec = res.execs[(graphs / std::size(kGraphMix)) % res.execs.size()];
      ++graphs;
      check(mock_cuda_graph_launch(p.domain, p.cbid, exec,
                                   p.per_thread_stream ? CU_STREAM_PER_THREAD : res.stream),
            "graph launch");
    } else {
      const Path &p = kEagerMix[eager % std::size(kEagerMix)];
      CUfunction f = eager_kernels[(eager / std::size(kEagerMix)) % eager_kernels.size()];
      ++eager;
      check(mock_cuda_launch(p.domain, p.cbid, f,
                             p.per_thread_stream ? CU_STREAM_PER_THREAD : res.stream),
            "launch");
    }
  }
  for (int d = 0; d < o.num_gpus; ++d) {
    if (o.num_gpus > 1) mock_cuda_set_device(d);
    for (CUgraphExec exec : devices[d].execs) destroy(exec);
    destroy(nullptr, nullptr, devices[d].stream);
  }
}

// --gpu-bound: a training step's shape. Each step launches the kernels in order, each taking its
// GPU time on the mock GPU's timeline, then (--gpu-graph) one graph of other kernels, and
// synchronizes every --sync-every steps: the thread waits for the GPU most of the time, and the
// launch after the wait follows the idle stretch. With --queue-limit-us launches also block on a
// full queue. Eager kernels go through the eager APIs in turn, graphs through the graph APIs.
struct GpuBoundApis {
  std::vector<Path> eager, graph;
};

GpuBoundApis gpu_bound_apis(const Options &o) {
  GpuBoundApis a;
  for (const std::string &name : o.apis)
    for (const parcagpu::SubscribedCallback &cb : parcagpu::kSubscribedCallbacks)
      if (is_kernel_launch_role(cb.role) && name == cb.name)
        (cb.role == parcagpu::CbRole::GraphLaunch ? a.graph : a.eager)
            .push_back({static_cast<uint32_t>(cb.domain), cb.cbid, is_ptsz(cb.name)});
  if (a.eager.empty())
    a.eager.push_back({kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, false});
  if (a.graph.empty())
    a.graph.push_back({kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, false});
  return a;
}

// Busy CPU work for `ns` (not a sleep: the thread stays on its CPU, as host code between
// launches does).
void cpu_work(uint64_t ns) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
  while (std::chrono::steady_clock::now() < until) {
  }
}

void gpu_bound_thread(const Options &o, const std::vector<CUfunction> *functions,
                      const std::vector<CUfunction> *graph_functions,
                      std::chrono::steady_clock::time_point end, uint64_t *steps) {
  check(mock_cuda_set_device(0), "cudaSetDevice");
  CUstream stream = new_stream();
  const GpuBoundApis apis = gpu_bound_apis(o);
  CUgraphExec exec = nullptr;
  if (o.gpu_graph_warm_up) {
    for (CUfunction f : *graph_functions)
      check(mock_cuda_launch(apis.eager[0].domain, apis.eager[0].cbid, f, stream), "warm-up");
    check(mock_cuda_stream_synchronize(stream), "cudaStreamSynchronize");
  }
  if (!graph_functions->empty()) {
    CUgraph graph = nullptr;
    check(mock_cuda_graph_create(&graph), "cudaGraphCreate");
    for (CUfunction f : *graph_functions) {
      CUgraphNode node;
      check(mock_cuda_graph_add_kernel_node(graph, f, &node), "cudaGraphAddKernelNode");
    }
    check(mock_cuda_graph_instantiate(&exec, graph), "cudaGraphInstantiate");
    check(mock_cuda_graph_destroy(graph), "cudaGraphDestroy");
  }
  // --cpu-before: the CPU work before each eager kernel (by its place in the step) and the graph.
  std::vector<uint64_t> cpu_ns(functions->size(), 0);
  uint64_t graph_cpu_ns = 0;
  for (const auto &[name, ns] : o.cpu_before) {
    if (name == "graph") graph_cpu_ns += ns;
    for (size_t i = 0; i < o.gpu_bound.size(); ++i)
      if (o.gpu_bound[i].first == name) cpu_ns[i] += ns;
  }
  // Every launch on the one stream, whatever its API: the step's kernels run one after another.
  uint64_t step = 0, eager = 0;
  while (std::chrono::steady_clock::now() < end) {
    for (size_t i = 0; i < functions->size(); ++i) {
      if (cpu_ns[i]) cpu_work(cpu_ns[i]);
      const Path &p = apis.eager[eager++ % apis.eager.size()];
      check(mock_cuda_launch(p.domain, p.cbid, (*functions)[i], stream),
            mock_cuda_api_name(p.domain, p.cbid));
    }
    if (exec) {
      if (graph_cpu_ns) cpu_work(graph_cpu_ns);
      const Path &p = apis.graph[step % apis.graph.size()];
      check(mock_cuda_graph_launch(p.domain, p.cbid, exec, stream),
            mock_cuda_api_name(p.domain, p.cbid));
    }
    ++step;
    if (o.sync_every > 0 && step % o.sync_every == 0)
      check(mock_cuda_stream_synchronize(stream), "cudaStreamSynchronize");
  }
  check(mock_cuda_stream_synchronize(stream), "cudaStreamSynchronize");
  destroy(exec, nullptr, stream);
  *steps = step;
}

void run_gpu_bound(const Options &o, Kernels &) {
  std::vector<CUfunction> functions, graph_functions;
  for (const auto &k : o.gpu_bound) {
    functions.push_back(mock_cuda_function(k.first.c_str()));
    mock_cuda_set_kernel_duration(functions.back(), k.second);
  }
  for (const auto &k : o.gpu_graph) {
    graph_functions.push_back(mock_cuda_function(k.first.c_str()));
    mock_cuda_set_kernel_duration(graph_functions.back(), k.second);
  }
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(o.duration_s));
  std::vector<uint64_t> steps(o.threads);
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t)
    threads.emplace_back(gpu_bound_thread, std::cref(o), &functions, &graph_functions, end,
                         &steps[t]);
  for (std::thread &t : threads) t.join();
  uint64_t total = 0;
  for (uint64_t s : steps) total += s;
  // The whole run's GPU time by kernel: every step ran every kernel once (a name in both lists
  // counts both).
  nlohmann::json truth = nlohmann::json::object();
  for (const auto *list : {&o.gpu_bound, &o.gpu_graph})
    for (const auto &[name, ns] : *list) truth[name] = truth.value(name, uint64_t{0}) + total * ns;
  std::printf("MOCKAPP_GPU_TRUTH %s\n", truth.dump().c_str());
  std::fprintf(stderr, "parcagpu-mockapp: --gpu-bound: %llu steps\n",
               static_cast<unsigned long long>(total));
}

}  // namespace

const std::vector<std::string> &scenario_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const Scenario &s : kScenarios) n.push_back(s.name);
    return n;
  }();
  return names;
}

bool run_scenario(const std::string &name, Kernels &kernels) {
  for (const Scenario &s : kScenarios)
    if (name == s.name) {
      s.run(kernels);
      return true;
    }
  return false;
}

void run_timed_workload(const Options &o, Kernels &kernels) {
  if (o.queue_limit_ns) mock_cuda_set_queue_limit(o.queue_limit_ns);
  if (!o.gpu_bound.empty()) return run_gpu_bound(o, kernels);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t)
    threads.emplace_back(launch_thread, std::cref(o), std::ref(kernels), t, start);
  for (std::thread &t : threads) t.join();
}

}  // namespace mockapp
