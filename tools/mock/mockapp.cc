// parcagpu-mockapp LIB [options]: a fake CUDA application on the mock driver.
//
// It loads LIB the way the CUDA driver does (CUDA_INJECTION64_PATH, then cuInit), or with
// --preload through LD_PRELOAD, then launches kernels through the mock driver, and prints one
// MOCKAPP_SUMMARY line of JSON on stdout (and a readable summary on stderr) before it exits,
// that is before the library's exit handlers run. Whatever the library does, the application
// exits 0 if it ran fine itself: tests rely on a broken or inert library never failing it.
#include "mockapp.h"

#include <argp.h>
#include <dlfcn.h>
#include <limits.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "parcagpu/cbid_table.h"

namespace mockapp {
namespace {

// Not PARCAGPU_*: the library warns about PARCAGPU_ variables it does not know.
constexpr const char kReexecMarker[] = "MOCKAPP_REEXECUTED";

// A number in [min, max], the whole of `text`.
template <typename T>
bool parse_number(const std::string &text, T min, T max, T *out) {
  T v{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !(v >= min) ||
      !(v <= max))
    return false;
  *out = v;
  return true;
}

constexpr double kNoLimit = std::numeric_limits<double>::max();

// "5" and "30s" are seconds, "2m" minutes, "500ms" milliseconds.
bool parse_duration(const std::string &text, double *seconds) {
  static const std::pair<const char *, double> kUnits[] = {{"ms", 0.001}, {"s", 1}, {"m", 60}};
  for (const auto &[suffix, scale] : kUnits) {
    const size_t n = std::strlen(suffix);
    if (text.size() > n && text.compare(text.size() - n, n, suffix) == 0) {
      if (!parse_number(text.substr(0, text.size() - n), 0.0, kNoLimit, seconds)) return false;
      *seconds *= scale;
      return true;
    }
  }
  return parse_number(text, 0.0, kNoLimit, seconds);
}

std::vector<std::string> split_list(const std::string &list, const char *separators = ",") {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = list.find_first_of(separators, start);
    const std::string item = list.substr(start, comma == std::string::npos ? comma : comma - start);
    if (!item.empty()) items.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return items;
}

bool fail(const std::string &message) {
  std::fprintf(stderr, "parcagpu-mockapp: %s\n", message.c_str());
  return false;
}

// The options, one row each: argp's help and the parse are both made from this table.
struct OptionSpec {
  const char *name;
  const char *arg;   // its argument in the usage; nullptr: a flag
  const char *help;  // argp wraps it
  std::function<bool(const std::string &arg, Options *o)> apply;  // false: it said why
};

// An integer option in [min, max] stored in *field of Options.
template <typename Field>
std::function<bool(const std::string &, Options *)> integer(const char *name, long min, long max,
                                                            Field Options::*field) {
  return [=](const std::string &arg, Options *o) {
    long n = 0;
    if (!parse_number(arg, min, max, &n))
      return fail(std::string("--") + name + " must be " + std::to_string(min) + ".." +
                  std::to_string(max) + ": " + arg);
    o->*field = static_cast<Field>(n);
    return true;
  };
}

// A rate (per second, 0 or more) stored in *field of Options.
std::function<bool(const std::string &, Options *)> rate(const char *name, double Options::*field) {
  return [=](const std::string &arg, Options *o) {
    return parse_number(arg, 0.0, kNoLimit, &(o->*field)) ||
           fail(std::string("bad --") + name + ": " + arg);
  };
}

// A list of kernels with their GPU time, NAME:MICROSECONDS,..., stored in *field of Options.
std::function<bool(const std::string &, Options *)> kernel_times(
    const char *name, std::vector<std::pair<std::string, uint64_t>> Options::*field) {
  return [=](const std::string &arg, Options *o) {
    for (const std::string &item : split_list(arg)) {
      const size_t colon = item.rfind(':');
      double us = 0;
      if (colon == std::string::npos || colon == 0 ||
          !parse_number(item.substr(colon + 1), 0.001, kNoLimit, &us))
        return fail(std::string("--") + name + " wants NAME:MICROSECONDS,...: " + item);
      (o->*field).emplace_back(item.substr(0, colon), static_cast<uint64_t>(us * 1000));
    }
    return true;
  };
}

// A flag that sets *field of Options.
std::function<bool(const std::string &, Options *)> flag(bool Options::*field) {
  return [=](const std::string &, Options *o) { return o->*field = true; };
}

// --kernel-names FILE: kernel names, one per line.
bool read_kernel_names(const std::string &arg, Options *o) {
  std::ifstream in(arg);
  if (!in) return fail("cannot read --kernel-names file " + arg);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) o->kernel_names.push_back(line);
  }
  return !o->kernel_names.empty() || fail("--kernel-names file " + arg + " has no names");
}

bool parse_exit_how(const std::string &arg, Options *o) {
  if (arg != "exit" && arg != "quick_exit" && arg != "_exit")
    return fail("--exit must be exit, quick_exit or _exit: " + arg);
  o->exit_how = arg;
  return true;
}

// --apis LIST: launch APIs by their cbid table names.
bool parse_launch_apis(const std::string &arg, Options *o) {
  for (const std::string &a : split_list(arg)) {
    bool known = false;
    for (const auto &cb : parcagpu::kSubscribedCallbacks)
      known |= is_kernel_launch_role(cb.role) && a == cb.name;
    if (!known) return fail("--apis: no launch API " + a + " in the cbid table");
    o->apis.push_back(a);
  }
  return true;
}

bool parse_queue_limit(const std::string &arg, Options *o) {
  long n = 0;
  if (!parse_number(arg, 1L, 10000000L, &n)) return fail("bad --queue-limit-us: " + arg);
  o->queue_limit_ns = static_cast<uint64_t>(n) * 1000;
  return true;
}

bool parse_fake_consumer(const std::string &arg, Options *o) {
  if (arg.empty()) return fail("--fake-consumer needs probe names or 'all'");
  o->fake_consumer = arg;
  return true;
}

bool parse_scenarios(const std::string &arg, Options *o) {
  for (const std::string &s : split_list(arg)) {
    bool known = false;
    for (const std::string &k : scenario_names()) known |= (k == s);
    if (!known) return fail("unknown scenario '" + s + "'");
    o->scenarios.push_back(s);
  }
  return true;
}

// How the mock app starts: which library, through which loader path and runtime.
std::vector<OptionSpec> process_options() {
  return {
      {"preload", nullptr, "also load LIB with LD_PRELOAD (re-executes itself)",
       flag(&Options::preload)},
      {"no-inject", nullptr, "do not set CUDA_INJECTION64_PATH", flag(&Options::no_inject)},
      {"no-mock-path", nullptr,
       "do not prefix LD_LIBRARY_PATH with the mock library dir "
       "(nor drop CUDA_HOME, CUDA_PATH, CONDA_PREFIX)",
       flag(&Options::no_mock_path)},
      {"cudart", "PATH",
       "load this CUDA runtime before cuInit, as an application "
       "linked to it would (default: $MOCKAPP_CUDART)",
       [](const std::string &arg, Options *o) { return o->cudart = arg, true; }},
  };
}

// The timed workload: how many threads, GPUs and processes launch how fast for how long.
std::vector<OptionSpec> timed_workload_options() {
  return {
      {"threads", "N",
       "launching threads (default 1); with --scenario, each "
       "replays the scenarios",
       integer("threads", 1, 1024, &Options::threads)},
      {"launch-rate", "N", "launches/s per simulated GPU (default 1000)",
       rate("launch-rate", &Options::launch_rate)},
      {"graph-rate", "N", "of which graph launches/s (default 100)",
       rate("graph-rate", &Options::graph_rate)},
      {"num-gpus", "N", "simulated GPUs (default 1)",
       integer("num-gpus", 1, MOCK_CUDA_MAX_DEVICES, &Options::num_gpus)},
      {"device-batch", "N",
       "with --num-gpus: N launches on one device, then N on "
       "the next (default 1: devices round-robin), as a program "
       "that drives its GPUs in turn from one thread",
       integer("device-batch", 1, 1000000, &Options::device_batch)},
      {"procs", "N", "fork N processes before cuInit, each runs the workload",
       integer("procs", 1, 256, &Options::procs)},
      {"duration", "T", "5, 30s, 2m, 500ms (default 2s)",
       [](const std::string &arg, Options *o) {
         return parse_duration(arg, &o->duration_s) || fail("bad --duration: " + arg);
       }},
      {"stress", nullptr, "no sleeps: launch as fast as possible", flag(&Options::stress)},
      {"launches", "N", "stop after N launches per thread (deterministic counts)",
       integer("launches", 1, 1000000000, &Options::launches)},
      {"kernel-names", "FILE", "kernel names, one per line, cycled through", read_kernel_names},
  };
}

// What happens around the workload: status lines, forks, the way out, the APIs used.
std::vector<OptionSpec> run_options() {
  return {
      {"status-interval", "MS", "print MOCKAPP_STATUS {json} every MS ms",
       integer("status-interval", 1, 3600000, &Options::status_interval_ms)},
      {"fork-children", "N",
       "fork N children while the workload runs, spread over "
       "--duration; each calls exit() at once (fork safety)",
       integer("fork-children", 1, 10000, &Options::fork_children)},
      {"exit", "HOW", "end with exit (default), quick_exit or _exit", parse_exit_how},
      {"loop", nullptr, "repeat --scenario until --duration has passed", flag(&Options::loop)},
      {"apis", "LIST",
       "the timed workload launches through these APIs only "
       "(cbid table names: cudaLaunchKernel,cuGraphLaunch,...), "
       "each thread cycling through them",
       parse_launch_apis},
      {"api-per-thread", nullptr, "with --apis: thread t launches through API t % n alone",
       flag(&Options::api_per_thread)},
      {"nvtx", nullptr,
       "NVTX_INJECTION64_PATH=the library (unless set) and an NVTX call before cuInit "
       "(--scenario=nvtx makes the ranges)",
       flag(&Options::nvtx)},
  };
}

// The GPU-bound loop instead of the timed mix.
std::vector<OptionSpec> gpu_bound_options() {
  return {
      {"gpu-bound", "K:US,...",
       "instead of the timed mix, a GPU-bound loop: each step "
       "launches kernels K (cudaLaunchKernel, or --apis' eager APIs in turn) taking US us of "
       "GPU time each, then synchronizes the stream; prints "
       "MOCKAPP_GPU_TRUTH {kernel: GPU ns} at the end",
       kernel_times("gpu-bound", &Options::gpu_bound)},
      {"gpu-graph", "K:US,...",
       "--gpu-bound: each step also launches one graph of kernels K "
       "(cudaGraphLaunch, or --apis' graph APIs in turn), US us of GPU time each",
       kernel_times("gpu-graph", &Options::gpu_graph)},
      {"gpu-graph-warm-up", nullptr,
       "--gpu-graph: launch the graph's kernels eagerly once, synchronized, before instantiating "
       "it (PyTorch warms a step up before capturing it)",
       flag(&Options::gpu_graph_warm_up)},
      {"cpu-before", "K:US,...",
       "--gpu-bound: before launching kernel K (\"graph\": the step's graph) the thread works US "
       "us on the CPU (busy): launches after CPU stretches of different lengths",
       kernel_times("cpu-before", &Options::cpu_before)},
      {"sync-every", "N", "--gpu-bound: synchronize every N steps (0: never)",
       integer("sync-every", 0, 1000000, &Options::sync_every)},
  };
}

// The launch queue, a consumer's semaphores and the observed sequences to replay.
std::vector<OptionSpec> replay_options() {
  return {
      {"queue-limit-us", "N",
       "a launch blocks while its stream has more than N us of "
       "GPU work queued (a full launch queue)",
       parse_queue_limit},
      {"fake-consumer", "P",
       "after cuInit raise the library's semaphores of probes P "
       "(\"all\" or a list) as an attaching consumer would",
       parse_fake_consumer},
      {"scenario", "LIST", "replay observed launch sequences instead of the timed workload:",
       parse_scenarios},
  };
}

// The groups in --help's order.
const std::vector<OptionSpec> &option_table() {
  static const std::vector<OptionSpec> kTable = [] {
    std::vector<OptionSpec> table;
    for (auto group : {process_options, timed_workload_options, run_options, gpu_bound_options,
                       replay_options})
      for (OptionSpec &spec : group()) table.push_back(std::move(spec));
    return table;
  }();
  return kTable;
}

// argp reads the table: the option of row i has key kFirstKey + i (long names only).
constexpr int kFirstKey = 1000;

error_t parse_opt(int key, char *arg, argp_state *state) {
  auto *o = static_cast<Options *>(state->input);
  const std::vector<OptionSpec> &table = option_table();
  if (key >= kFirstKey && key < kFirstKey + static_cast<int>(table.size()))
    return table[key - kFirstKey].apply(arg ? arg : "", o) ? 0 : EINVAL;
  if (key == ARGP_KEY_ARG && state->arg_num == 0) {
    o->library = arg;
    return 0;
  }
  if (key == ARGP_KEY_ARG || key == ARGP_KEY_NO_ARGS)
    return fail("expected exactly one LIB argument (or 'none')"), EINVAL;
  return ARGP_ERR_UNKNOWN;
}

bool parse_options(int argc, char **argv, Options *o) {
  const std::vector<OptionSpec> &table = option_table();
  // The scenarios follow --scenario's help.
  std::vector<std::string> help;
  for (const OptionSpec &spec : table) {
    help.push_back(spec.help);
    if (spec.name == std::string("scenario"))
      for (const std::string &name : scenario_names()) help.back() += " " + name;
  }
  std::vector<argp_option> options;
  for (size_t i = 0; i < table.size(); ++i)
    options.push_back(
        {table[i].name, kFirstKey + static_cast<int>(i), table[i].arg, 0, help[i].c_str(), 0});
  options.push_back({});
  static const char kDoc[] =
      "A fake CUDA application on the mock driver: loads LIB as the driver does "
      "(CUDA_INJECTION64_PATH; 'none' for none) and launches kernels.";
  const argp parser = {options.data(), parse_opt, "LIB", kDoc, nullptr, nullptr, nullptr};
  argp_err_exit_status = 2;
  if (const char *v = std::getenv("MOCKAPP_CUDART"); v && *v) o->cudart = v;
  if (argp_parse(&parser, argc, argv, 0, nullptr, o) != 0) return false;
  if (o->graph_rate > o->launch_rate)
    return fail("--graph-rate must not exceed --launch-rate (graph launches are part of it)");
  if (o->library == "none" && o->preload) return fail("--preload needs a LIB");
  if (o->loop && o->scenarios.empty()) return fail("--loop needs --scenario");
  if (!o->gpu_graph.empty() && o->gpu_bound.empty()) return fail("--gpu-graph needs --gpu-bound");
  if (!o->cpu_before.empty() && o->gpu_bound.empty()) return fail("--cpu-before needs --gpu-bound");
  return true;
}

std::string real_path(const std::string &path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) ? std::string(buf) : path;
}

bool path_list_contains(const char *list, const std::string &wanted) {
  if (!list) return false;
  for (const std::string &entry : split_list(list, ": "))
    if (real_path(entry) == wanted) return true;
  return false;
}

std::string prepend(const char *variable, const std::string &value) {
  const char *old = std::getenv(variable);
  return old && *old ? value + ":" + old : value;
}

// Variables that point the library's CUPTI search at a real CUDA installation, ahead of the
// loader path where the mock is.
constexpr const char *kCudaLocationVars[] = {"CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX"};

// Re-executes itself once if the environment must change before the process starts: the mock
// libcupti must shadow a real one installed on the machine (the library's search takes the
// loader path, where the mock goes first, after CUDA_HOME, CUDA_PATH and CONDA_PREFIX, which are
// dropped), and LD_PRELOAD only works from the start. A --cudart library goes into LD_PRELOAD
// ahead of LIB: a dynamically linked runtime is loaded before any constructor runs.
void reexec_if_needed(const Options &o, char **argv) {
  if (std::getenv(kReexecMarker)) return;
  const std::string exe = real_path("/proc/self/exe");
  const std::string mock_dir = real_path(exe.substr(0, exe.rfind('/')) + "/../mock");
  const bool use_mock = !o.no_mock_path && !std::getenv("PARCAGPU_CUPTI_PATH");
  bool need_unset = false;
  for (const char *v : kCudaLocationVars) need_unset |= use_mock && std::getenv(v) != nullptr;
  const bool need_mock_path =
      use_mock && !path_list_contains(std::getenv("LD_LIBRARY_PATH"), mock_dir);
  const std::string lib = real_path(o.library);
  const std::string cudart = o.cudart.empty() ? "" : real_path(o.cudart);
  const bool need_preload =
      o.preload && (!path_list_contains(std::getenv("LD_PRELOAD"), lib) ||
                    (!cudart.empty() && !path_list_contains(std::getenv("LD_PRELOAD"), cudart)));
  if (!need_mock_path && !need_preload && !need_unset) return;
  if (need_mock_path) setenv("LD_LIBRARY_PATH", prepend("LD_LIBRARY_PATH", mock_dir).c_str(), 1);
  if (need_unset)
    for (const char *v : kCudaLocationVars) unsetenv(v);
  if (need_preload) {
    setenv("LD_PRELOAD", prepend("LD_PRELOAD", lib).c_str(), 1);
    if (!cudart.empty()) setenv("LD_PRELOAD", prepend("LD_PRELOAD", cudart).c_str(), 1);
  }
  setenv(kReexecMarker, "1", 1);
  // By its own path, not /proc/self/exe: the kernel names the process (comm) after the file
  // exec'd, and consumers label it so ("exe" in pprof's comm label before, issue 44).
  execv(exe.c_str(), argv);
  std::fprintf(stderr, "parcagpu-mockapp: warning: cannot re-execute itself (%s); going on\n",
               std::strerror(errno));
}

// Prints MOCKAPP_STATUS every interval until stopped.
class StatusPrinter {
 public:
  StatusPrinter(int interval_ms, std::chrono::steady_clock::time_point start)
      : interval_(interval_ms), start_(start) {
    if (interval_ms > 0) thread_ = std::thread([this] { loop(); });
  }
  ~StatusPrinter() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (auto next = start_ + interval_;; next += interval_) {
      if (cv_.wait_until(lock, next, [this] { return stop_; })) return;
      print_status(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
              .count());
    }
  }
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// LeakSanitizer cannot judge a child forked from a multithreaded process: memory the parent's
// other threads held only on their stacks looks leaked in a child where they do not exist. Its
// leak check asks this (optional) hook; the forked children of --fork-children answer yes.
std::atomic<bool> g_in_forked_child{false};

}  // namespace
}  // namespace mockapp

extern "C" int __lsan_is_turned_off() {
  return mockapp::g_in_forked_child.load(std::memory_order_relaxed) ? 1 : 0;
}

namespace mockapp {
namespace {

// --fork-children: forks children from a thread of its own while the launching threads run, as
// a training job's data loader does. Each child calls exit() at once, so the library's exit
// path runs in a process where only the forking thread exists and whatever another thread held
// at the fork stays held. A child still alive after kChildTimeout counts as hung and is killed.
class Forker {
 public:
  Forker(int children, double duration_s, std::chrono::steady_clock::time_point start)
      : children_(children), duration_s_(duration_s), start_(start) {
    if (children > 0) thread_ = std::thread([this] { loop(); });
  }
  ~Forker() {
    if (thread_.joinable()) thread_.join();
  }

 private:
  static constexpr auto kChildTimeout = std::chrono::seconds(20);

  void loop() {
    std::vector<std::pair<pid_t, std::chrono::steady_clock::time_point>> alive;
    for (int i = 0; i < children_; ++i) {
      std::this_thread::sleep_until(
          start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                       std::chrono::duration<double>(duration_s_ * (i + 1) / (children_ + 1))));
      std::fflush(nullptr);  // nothing buffered may be written twice
      const pid_t pid = fork();
      if (pid == 0) {
        g_in_forked_child.store(true, std::memory_order_relaxed);
        std::exit(0);
      }
      if (pid < 0) {
        std::perror("parcagpu-mockapp: fork");
        continue;
      }
      ++g_fork_report.forked;
      alive.emplace_back(pid, std::chrono::steady_clock::now());
      reap(&alive, false);
    }
    while (!alive.empty()) {
      reap(&alive, true);
      if (!alive.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // Collects the children that exited; with `kill_late`, kills those past the timeout.
  static void reap(std::vector<std::pair<pid_t, std::chrono::steady_clock::time_point>> *alive,
                   bool kill_late) {
    for (auto it = alive->begin(); it != alive->end();) {
      int status = 0;
      if (waitpid(it->first, &status, WNOHANG) == it->first) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          std::fprintf(stderr, "parcagpu-mockapp: forked child %d failed (%s %d)\n",
                       static_cast<int>(it->first), WIFSIGNALED(status) ? "signal" : "exit status",
                       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
          ++g_fork_report.failed;
        }
        it = alive->erase(it);
      } else if (kill_late && std::chrono::steady_clock::now() - it->second > kChildTimeout) {
        std::fprintf(stderr,
                     "parcagpu-mockapp: forked child %d did not exit within %lld s; killed\n",
                     static_cast<int>(it->first), static_cast<long long>(kChildTimeout.count()));
        kill(it->first, SIGKILL);
        waitpid(it->first, &status, 0);
        ++g_fork_report.hung;
        it = alive->erase(it);
      } else {
        ++it;
      }
    }
  }

  const int children_;
  const double duration_s_;
  const std::chrono::steady_clock::time_point start_;
  std::thread thread_;
};

// The CUDA runtime the application "links": loaded before cuInit, kept for the process's life.
// The library under test finds it among the loaded objects and derives the CUDA major in use and
// where CUPTI should be from it.
bool load_cudart(const std::string &path) {
  void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    const char *e = dlerror();
    std::fprintf(stderr, "parcagpu-mockapp: cannot load --cudart %s: %s\n", path.c_str(),
                 e ? e : "unknown");
    return false;
  }
  int version = 0;
  using GetVersion = int (*)(int *);
  if (auto fn = reinterpret_cast<GetVersion>(dlsym(h, "cudaRuntimeGetVersion"))) fn(&version);
  g_runtime_version = version;
  std::fprintf(stderr, "parcagpu-mockapp: CUDA runtime %s loaded, version %d\n", path.c_str(),
               version);
  return true;
}

// One process of the application: load the library, run, report.
int run_process(const Options &o) {
  if (o.library == "none")
    unsetenv("CUDA_INJECTION64_PATH");
  else if (!o.no_inject)
    setenv("CUDA_INJECTION64_PATH", o.library.c_str(), 1);
  if (!o.cudart.empty() && !load_cudart(o.cudart)) return 1;
  if (o.nvtx) nvtx_before_cuinit(o.library);
  if (!check(mock_cuda_set_num_devices(o.num_gpus), "mock_cuda_set_num_devices")) return 1;
  const auto start = std::chrono::steady_clock::now();
  if (!check(cuInit(0), "cuInit")) return 1;
  // Like cudaSetDevice(0) + cudaFree(0) at the start of a CUDA program: the context exists
  // before the first launch (RESOURCE CONTEXT_CREATED, as seen on the H100).
  if (!check(mock_cuda_set_device(0), "cudaSetDevice")) return 1;
  if (!o.fake_consumer.empty() && !fake_consumer_attach(o.library, o.fake_consumer)) return 1;
  Kernels kernels(o.kernel_names);
  {
    StatusPrinter status(o.status_interval_ms, start);
    Forker forker(o.fork_children, o.duration_s, start);
    if (!o.scenarios.empty()) {
      // Each of --threads threads replays the scenarios (--loop: again until --duration).
      const auto end = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                   std::chrono::duration<double>(o.duration_s));
      auto replay = [&] {
        do {
          for (const std::string &s : o.scenarios) run_scenario(s, kernels);
        } while (o.loop && std::chrono::steady_clock::now() < end);
      };
      std::vector<std::thread> threads;
      for (int t = 1; t < o.threads; ++t) threads.emplace_back(replay);
      replay();
      for (std::thread &t : threads) t.join();
    } else {
      run_timed_workload(o, kernels);
    }
    check(mock_cuda_device_synchronize(), "cudaDeviceSynchronize");
    check(mock_cuda_unload_modules(), "module unload");  // as cudart does at exit
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print_summary(o, elapsed);
  return g_mock_errors.load() == 0 ? 0 : 1;
}

// Ends the process the way --exit asks: exit() runs atexit handlers, quick_exit() only
// at_quick_exit ones, _exit() none.
[[noreturn]] void end_process(const Options &o, int rc) {
  std::fflush(nullptr);
  if (o.exit_how == "quick_exit") std::quick_exit(rc);
  if (o.exit_how == "_exit") _exit(rc);
  std::exit(rc);
}

}  // namespace
}  // namespace mockapp

int main(int argc, char **argv) {
  using namespace mockapp;
  setvbuf(stdout, nullptr, _IOLBF, 0);  // status lines must reach a pipe as they happen
  Options o;
  if (!parse_options(argc, argv, &o)) {
    std::fprintf(stderr, "Try 'parcagpu-mockapp --help'.\n");
    return 2;
  }
  reexec_if_needed(o, argv);
  if (o.procs == 1) end_process(o, run_process(o));

  std::fflush(stdout);
  std::vector<pid_t> children;
  for (int i = 0; i < o.procs; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      // exit, not _exit (unless asked): the child's library must tear down like any process's.
      end_process(o, run_process(o));
    }
    if (pid < 0) {
      std::perror("parcagpu-mockapp: fork");
      break;
    }
    children.push_back(pid);
  }
  int failed = static_cast<int>(o.procs - children.size());
  for (pid_t pid : children) {
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failed;
      std::fprintf(stderr, "parcagpu-mockapp: child %d failed (%s %d)\n", static_cast<int>(pid),
                   WIFSIGNALED(status) ? "signal" : "exit status",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
  }
  std::fprintf(stderr, "parcagpu-mockapp: %d of %d processes ran fine\n", o.procs - failed,
               o.procs);
  return failed == 0 ? 0 : 1;
}
