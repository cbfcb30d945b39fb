// parcagpu-mockapp: a fake CUDA application on the mock driver (see mockapp.cc for the options).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "mock_cuda.h"

namespace mockapp {

struct Options {
  std::string library;  // what CUDA_INJECTION64_PATH / LD_PRELOAD name; "none": nothing
  bool preload = false;
  bool no_inject = false;
  bool no_mock_path = false;
  std::string cudart;  // a CUDA runtime to load before cuInit (--cudart, $MOCKAPP_CUDART)
  int threads = 1;
  double launch_rate = 1000;  // per simulated GPU, launches/s
  double graph_rate = 100;    // of which graph launches/s
  int num_gpus = 1;
  int device_batch = 1;  // consecutive launches of a thread on one device, then the next device
  int procs = 1;
  double duration_s = 2;
  bool stress = false;
  uint64_t launches = 0;  // --launches: stop after this many per thread (0: run for the duration)
  std::vector<std::string> kernel_names;  // from --kernel-names; empty: the defaults
  int status_interval_ms = 0;
  std::vector<std::string> scenarios;
  bool loop = false;      // repeat the scenarios until --duration has passed (soak runs)
  int fork_children = 0;  // children forked while the workload runs; each calls exit() at once
  std::string exit_how = "exit";  // how the process ends: exit, quick_exit, _exit
  std::string fake_consumer;      // --fake-consumer: probes whose semaphores the app raises itself
  // --apis: the timed workload launches through these APIs only (names of the cbid table), each
  // thread cycling through them, or with --api-per-thread thread t through apis[t % n] alone.
  std::vector<std::string> apis;
  bool api_per_thread = false;
  // --gpu-bound: a loop of steps, each launching these kernels (name, GPU time in ns) through
  // cudaLaunchKernel, then a cudaStreamSynchronize every sync_every steps (0: never).
  std::vector<std::pair<std::string, uint64_t>> gpu_bound;
  // --gpu-graph: each step also launches one graph of these kernels (name, GPU time in ns). With
  // --apis the eager kernels go through its eager APIs and the graphs through its graph APIs, in
  // turn (an inference server's eager prefill and graph decode, a training step's eager
  // forward/backward and captured optimizer).
  std::vector<std::pair<std::string, uint64_t>> gpu_graph;
  bool gpu_graph_warm_up = false;  // --gpu-graph-warm-up: its kernels run eagerly once first
  // --cpu-before: CPU work (ns, busy) a --gpu-bound step does before launching the named kernel
  // ("graph": before its graph launch), as cuBLAS choosing a GEMM or Python between launches.
  std::vector<std::pair<std::string, uint64_t>> cpu_before;
  int sync_every = 1;
  uint64_t queue_limit_ns = 0;  // --queue-limit-us: launches block on a full queue
  bool nvtx = false;  // --nvtx: NVTX_INJECTION64_PATH (the library unless set), a mark before cuInit
};

// What --fork-children saw: children forked, and those that did not exit within the timeout.
struct ForkReport {
  int forked = 0;
  int hung = 0;
  int failed = 0;  // exited with a status other than 0, or by a signal
};
extern ForkReport g_fork_report;

// Kernels to launch: the --kernel-names list cycled through, or a default per call site.
class Kernels {
 public:
  explicit Kernels(const std::vector<std::string> &names);
  // The next name of the user's list, or `fallback` if there is none.
  CUfunction next(const char *fallback);

 private:
  std::vector<CUfunction> user_;
  std::atomic<size_t> next_{0};
};

// cudaRuntimeGetVersion of the --cudart runtime (12000, 13000), 0 if none was loaded. Launch
// APIs the runtime's CUDA does not have are not used (all-cbids).
extern int g_runtime_version;

// Counts mock API calls that failed: a mock bug, not the library's doing.
extern std::atomic<uint64_t> g_mock_errors;
bool check(CUresult rc, const char *what);

const std::vector<std::string> &scenario_names();
bool run_scenario(const std::string &name, Kernels &kernels);
// mockapp_consumer.cc: consumers made by raising the library's semaphores from inside.
bool fake_consumer_attach(const std::string &library, const std::string &probes);
void scenario_attach_detach(Kernels &kernels);
void scenario_clone_refire(Kernels &kernels);
// mockapp_copies.cc: copies and fills from call sites of their own.
void scenario_copies(Kernels &kernels);
// mockapp_nvtx.cc: NVTX ranges around launches (--scenario=nvtx), and NVTX's start (--nvtx).
void scenario_nvtx(Kernels &kernels);
void nvtx_before_cuinit(const std::string &library);
void run_timed_workload(const Options &options, Kernels &kernels);

// The mock CUPTI's view, if a mock libcupti is loaded (reached through dlopen(RTLD_NOLOAD)).
bool kernel_activity_enabled_now(uint64_t *records_written);
void print_status(double t_ms);
void print_summary(const Options &options, double elapsed_s);

}  // namespace mockapp
