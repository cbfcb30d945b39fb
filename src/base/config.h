// Run-time configuration from PARCAGPU_* environment variables. Parsing never fails: an unknown
// variable or an invalid value yields a warning (and the error probe, from the caller) and the
// default, so a typo in a fleet-wide setting can't take a job down.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "parcagpu/cbid_table.h"

namespace parcagpu {

struct CbidRef {
  CbDomain domain;
  uint32_t cbid;
};

// When CUPTI's kernel activity collection is on while a consumer listens.
enum class ActivityMode : uint8_t {
  WhileConsumer,  // the whole time: every kernel recorded, unannounced ones filtered out
  AroundLaunch,   // only inside announced launches' API calls: others pay nothing for it
};

struct Config {
  bool debug = false;
  double eager_rate_limit = 100.0;   // announced eager launches per second (per process)
  double graph_rate_limit = 20.0;    // announced graph launches per second (per process)
  std::string cupti_path;            // explicit libcupti path; empty = search
  uint32_t max_outstanding = 16384;  // correlation tracker cap (entries)
  uint32_t max_age_ms = 30000;       // a tracked launch older than this is given up
  // Announced copies' call times waiting for their records
  // (trackers/blocked_copies.h); at the cap a new one is dropped (counted, said).
  uint32_t max_blocked_copies = 1024;
  uint32_t flush_threshold = 256;       // launches awaiting kernels before an early flush
  uint32_t flush_interval_ms = 1000;    // periodic flush while kernel activity is collected
  uint32_t buffer_kib = 1024;           // size of one activity buffer
  uint32_t max_buffers = 32;            // activity buffers alive at once (memory cap)
  std::vector<CbidRef> disabled_cbids;  // operator knob: launch paths not to subscribe
  // Where the GPUs' PC sampling lock files are (PcDeviceLocks): processes that share this
  // directory sample a GPU in turn. Containers sharing a GPU can share a mounted directory.
  std::string pc_lock_dir = "/dev/shm";
  uint32_t watch_interval_ms = 100;  // how often the watcher reads the semaphores (consumers.h)
  // Measured on an H100 (tools/bench/): per-launch collection keeps a consumer's cost near the
  // no-consumer cost at default rates; WhileConsumer costs ~1.65x per eager launch.
  ActivityMode activity_mode = ActivityMode::AroundLaunch;
  // PARCAGPU_ACTIVITY_HOST_MEMORY: where CUPTI keeps the kernel timestamps the GPU writes before
  // they are read into activity buffers. On: page-locked host memory
  // (CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED), so the library takes no GPU memory for
  // them; off: CUPTI's default since CUDA 12.0 Update 1, device buffers of its own on every
  // context (docs/cupti-facts.md, GPU memory).
  bool activity_host_memory = true;

  // PC sampling (CUPTI's PC Sampling API), while a consumer is attached to pc_sample_batch.
  // The three numbers keep the upstream library's (parca-dev/parcagpu) names and meanings, so
  // deployments keep their settings; docs/how-it-works.md "PC sampling".
  bool pc_sampling = true;          // PARCAGPU_PC_SAMPLING: ours, an operator's off switch
  double pc_sampling_rate = 100.0;  // PARCAGPU_PC_SAMPLING_RATE: target samples per second;
                                    // 0 = no rate control (windows as the duty cap allows)
  // PARCAGPU_SAMPLING_FACTOR: the hardware samples every 2^factor cycles, 5..31; 0 = CUPTI's
  // default for the device (11 on an H100). 17 by default: breadth over depth. The rate
  // controller spends a budget of samples; at 2^11 a window of one GEMM spent it, and a 40 s
  // eager transformer-block loop on the H100 gave PC samples for 6 of its 7 kernels with 2% or
  // more of the GPU time, at 2^17 for 7 of 7, stall-reason shares within 4 points of a dense
  // run (docs/pc-sampling.md, "Breadth").
  uint32_t sampling_factor = 17;
  // PARCAGPU_PC_HW_BUFFER_MB: 0 = CUPTI's default (512 MB). Every episode's first sampled launch
  // and its Disable wait on this buffer: 304 + 67-81 ms at 512 MB, 67-70 + 35-47 ms at 8 MB on an
  // H100 (docs/pc-sampling.md P13).
  uint32_t pc_hw_buffer_mb = 8;
  // PARCAGPU_PC_GRAPHS: whether graph kernels are PC-sampled. A graph whose first launch (its
  // upload) comes while PC sampling is enabled gives PC records in every later episode, and
  // costs every later launch of it ~30% more for good, episode or not (H100: 5.8 against
  // 4.7 us for 4 empty kernels, docs/pc-sampling.md P21); one uploaded while PC sampling is
  // off costs nothing and never gives records (P19). Off (the default): an episode under way
  // ends before a graph's first launch, so graph replay keeps its cost and its kernels' samples
  // are counted as not attributed. On: graphs first launched in an episode are sampled.
  bool pc_graphs = false;
  // PARCAGPU_PC_GRAPH_SHADOWS: with graphs kept out (above), whether their kernels are registered
  // with PC sampling anyway: before each graph instantiation PC sampling is enabled for about a
  // millisecond, with kernel activity held off, and an exec of the library's own is instantiated
  // from the same graph, uploaded and destroyed. The application's exec then pays nothing per
  // launch (H100: 69.0 against 68.8 us of GPU time per launch of 32 kernels, launch time alike;
  // H200: replay of a 52- and a 336-kernel PyTorch graph within noise) and its kernels give
  // records in later episodes, also where the graph was captured after start-up
  // (docs/pc-sampling.md P32, P33). Off by default: a graph registered for PC sampling makes
  // CUPTI's memory grow with the episodes that follow (docs/cupti-facts.md); in a 15-minute
  // H200 soak of a PyTorch graph replay with it on, the process's RSS grew 1368 -> 1656 MiB from
  // the ninth minute on (the program alone: flat). Off, kernels first run inside a graph outside
  // the learning episode give no PC samples.
  bool pc_graph_shadows = false;
  // PARCAGPU_PC_START_QUIET_MS: PC sampling is first enabled once no module has been loaded for
  // this long (at most 30 s after a consumer attached), or at a graph's registration. Once it
  // has been enabled, every module loaded after is loaded whole where lazy loading would load
  // only the kernels used: a PyTorch MLP step on an H200 took 66 MiB more GPU memory enabled at
  // the first launch, 2 MiB more at 10000 (docs/pc-sampling.md P34). Kernels first launched
  // before are sampled all the same (P20), but a graph uploaded or registered before the first
  // Enable gives none (P19; that soak at 10000 with graph registration on: no PC record in
  // 75 s). 0 (the default): at the first launch after a consumer attached.
  uint32_t pc_start_quiet_ms = 0;
};

struct ConfigWarning {
  std::string variable;
  std::string value;
  std::string reason;
};

// Environment lookup: returns nullptr when unset. Tests pass a map-backed one.
using EnvLookup = std::function<const char *(const char *name)>;

// Parses the known variables through `getenv`, and checks `all_names` (every PARCAGPU_* name
// present in the environment) for unknown ones. Appends one warning per problem.
Config parse_config(const EnvLookup &getenv, const std::vector<std::string> &all_names,
                    std::vector<ConfigWarning> *warnings);

// Every PARCAGPU_* name in this process's environment.
std::vector<std::string> parcagpu_env_names();

// The names parse_config understands (for the warning text and the README).
const std::vector<const char *> &known_config_names();

}  // namespace parcagpu
