// The mock CUPTI's PC Sampling API (cupti_pcsampling.h) and cuptiGetCubinCrc, with the
// semantics the library relies on and that were seen on an H100 (docs/pc-sampling.md):
//
// - Every call but Enable needs cuptiPCSamplingEnable first (INVALID_OPERATION otherwise);
//   Start/Stop need ENABLE_START_STOP_CONTROL; configuration is refused while started.
// - Stall reasons: the H100's 40, with its indices and names.
// - In KERNEL_SERIALIZED mode, every kernel that runs while sampling is started (or, without
//   start/stop control, while enabled) yields PC records: a few instruction offsets of the
//   launched function in the module's real cubin (the symbol of that name, its section size),
//   each with samples for one to three of the configured stall reasons, and the kernel's
//   correlation ID (a graph kernel's is its graph launch's). A kernel whose name is not a function
//   of the cubin counts as non-user samples, without records, as CUPTI does; so does a kernel
//   first run while PC sampling was disabled on its context after having been enabled there
//   (between episodes), for good, as on the H100 (docs/pc-sampling.md P19, P20).
// - cuptiPCSamplingGetData hands out at most collectNumPcs records per call, with
//   remainingNumPcs, totalSamples and nonUsrKernelsTotalSamples; Disable puts what is left into
//   the buffer given at configuration.
// - cuptiGetCubinCrc is the CRC-32 (zlib's) of the bytes, so tests can recompute it.
// - One process at a time: PC sampling enabled in a process while another process has it enabled
//   (on the mock "GPU", any device) enables, but its Start fails with CUPTI_ERROR_UNKNOWN, as on
//   the H100 (docs/pc-sampling.md P27; counted as start_conflicts). Processes are told apart by a
//   file lock of the mock's own, /tmp/parcagpu-mock-gpu-pc-<hash of the mock's path>.lock.
//
// Fault injection (MOCK_CUPTI_FAIL) covers every entry point here.
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <vector>

#pragma GCC visibility push(default)
#include <cupti.h>
#include <cupti_pcsampling.h>
#pragma GCC visibility pop

#include <nlohmann/json.hpp>

#include "cupti_mock_internal.h"

namespace mockcupti {
namespace {

// What CUPTI 13 offered on an H100 (index, name), in its order.
struct Reason {
  uint32_t index;
  const char *name;
};
constexpr Reason kReasons[] = {
    {39, "smsp__pcsamp_warps_issue_stalled_warpgroup_arrive_not_issued"},
    {37, "smsp__pcsamp_warps_issue_stalled_wait_not_issued"},
    {36, "smsp__pcsamp_warps_issue_stalled_wait"},
    {35, "smsp__pcsamp_warps_issue_stalled_tex_throttle_not_issued"},
    {33, "smsp__pcsamp_warps_issue_stalled_sleeping_not_issued"},
    {31, "smsp__pcsamp_warps_issue_stalled_short_scoreboard_not_issued"},
    {30, "smsp__pcsamp_warps_issue_stalled_short_scoreboard"},
    {10, "smsp__pcsamp_warps_issue_stalled_imc_miss"},
    {12, "smsp__pcsamp_warps_issue_stalled_lg_throttle"},
    {8, "smsp__pcsamp_warps_issue_stalled_drain"},
    {14, "smsp__pcsamp_warps_issue_stalled_long_scoreboard"},
    {7, "smsp__pcsamp_warps_issue_stalled_dispatch_stall_not_issued"},
    {6, "smsp__pcsamp_warps_issue_stalled_dispatch_stall"},
    {38, "smsp__pcsamp_warps_issue_stalled_warpgroup_arrive"},
    {19, "smsp__pcsamp_warps_issue_stalled_membar_not_issued"},
    {4, "smsp__pcsamp_warps_issue_stalled_branch_resolving"},
    {5, "smsp__pcsamp_warps_issue_stalled_branch_resolving_not_issued"},
    {11, "smsp__pcsamp_warps_issue_stalled_imc_miss_not_issued"},
    {0, "smsp__pcsamp_sample_count"},
    {2, "smsp__pcsamp_warps_issue_stalled_barrier"},
    {34, "smsp__pcsamp_warps_issue_stalled_tex_throttle"},
    {15, "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued"},
    {1, "smsp__pcsamp_samples_data_dropped"},
    {25, "smsp__pcsamp_warps_issue_stalled_no_instructions_not_issued"},
    {3, "smsp__pcsamp_warps_issue_stalled_barrier_not_issued"},
    {9, "smsp__pcsamp_warps_issue_stalled_drain_not_issued"},
    {22, "smsp__pcsamp_warps_issue_stalled_misc"},
    {24, "smsp__pcsamp_warps_issue_stalled_no_instructions"},
    {13, "smsp__pcsamp_warps_issue_stalled_lg_throttle_not_issued"},
    {17, "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle_not_issued"},
    {32, "smsp__pcsamp_warps_issue_stalled_sleeping"},
    {18, "smsp__pcsamp_warps_issue_stalled_membar"},
    {21, "smsp__pcsamp_warps_issue_stalled_mio_throttle_not_issued"},
    {20, "smsp__pcsamp_warps_issue_stalled_mio_throttle"},
    {23, "smsp__pcsamp_warps_issue_stalled_misc_not_issued"},
    {26, "smsp__pcsamp_warps_issue_stalled_not_selected"},
    {29, "smsp__pcsamp_warps_issue_stalled_selected_not_issued"},
    {16, "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle"},
    {27, "smsp__pcsamp_warps_issue_stalled_not_selected_not_issued"},
    {28, "smsp__pcsamp_warps_issue_stalled_selected"},
};
constexpr size_t kNumReasons = sizeof(kReasons) / sizeof(kReasons[0]);
constexpr uint32_t kDefaultPeriod = 11;  // CUPTI's default on the H100 (132 SMs)

struct Function {
  std::string name;
  uint32_t symbol_index;
  uint64_t size;
};

struct Module {
  uint64_t crc;
  std::vector<Function> functions;
};

struct Record {
  uint64_t crc;
  uint64_t pc;
  uint32_t function_index;
  const char *function_name;  // interned, never freed (CUPTI's names are shared too)
  uint32_t correlation_id;
  std::vector<std::pair<uint32_t, uint32_t>> reasons;  // (index, samples)
};

// Per context, kept across Enable and Disable: which functions ran first while PC sampling was
// not enabled on their context after it had been enabled somewhere in the process (keyed by the
// driver's function-name pointer, stable per function). As on the H100/H200
// (docs/pc-sampling.md P20, P23): a kernel first run before any Enable in the process gives
// records; one first run while its context is not enabled, after PC sampling was enabled on
// any context (its own between episodes, or only another one), never does.
bool g_process_ever_enabled = false;

// The mock GPU's PC sampling unit, one process at a time (P27): held by this process while any
// of its contexts is enabled.
int g_gpu_lock_fd = -1;
int g_gpu_holders = 0;

// One mock GPU per build of the mock: two checkouts' test runs on one machine do not share it.
// MOCK_CUPTI_GPU_LOCK names another (the integration tests give each test its own, so tests
// that run at once are on separate machines as far as PC sampling goes).
std::string gpu_lock_path() {
  if (const char *own = getenv("MOCK_CUPTI_GPU_LOCK"); own && *own) return own;
  Dl_info self{};
  const char *path = dladdr(reinterpret_cast<void *>(&gpu_lock_path), &self) && self.dli_fname
                         ? self.dli_fname
                         : "";
  return "/tmp/parcagpu-mock-gpu-pc-" + std::to_string(std::hash<std::string>{}(path)) + ".lock";
}

bool take_gpu() {
  if (g_gpu_holders > 0) return ++g_gpu_holders, true;
  if (g_gpu_lock_fd < 0)
    g_gpu_lock_fd = open(gpu_lock_path().c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0666);
  if (g_gpu_lock_fd >= 0 && flock(g_gpu_lock_fd, LOCK_EX | LOCK_NB) != 0) return false;
  ++g_gpu_holders;
  return true;
}

void give_gpu() {
  if (--g_gpu_holders == 0 && g_gpu_lock_fd >= 0) flock(g_gpu_lock_fd, LOCK_UN);
}
struct FirstUse {
  std::set<const void *> seen, tainted;
  size_t tainted_in_graphs = 0;  // of them, first run in a graph launch
  // Graph IDs whose kernels ran (uploaded at their first launch), of live execs only
  // (pc_graph_destroyed): every exec a program ever ran made a soak's mock grow 10 MB a second.
  std::set<uint32_t> graphs;
  // Execs uploaded, or instantiated, while PC sampling was enabled on their context: on real GPUs
  // each launch of one costs about a microsecond per kernel more (P21, P26, P30). Counted at its
  // first launch; one destroyed unlaunched (a CUPTI client's own exec, P32) costs nothing.
  std::set<uint32_t> uploaded_enabled, instantiated_enabled;
  // Functions first run before PC sampling was ever enabled in the process: they give records
  // when launched eagerly (P20), but in a graph only where that graph's exec was uploaded while
  // enabled (execs_uploaded_enabled, P19) or an upload while enabled registered them since
  // (registered: a throwaway exec, P36's warm-up facts). A graph uploaded before the first Enable,
  // or between episodes, runs them unsampled (P19, P29).
  std::set<const void *> before_any_enable, registered;
  std::set<uint32_t> execs_uploaded_enabled;  // live execs; kept after their first launch
};

// A kernel's first use in its context (its first run, or the upload of an exec holding it):
// after PC sampling was first enabled in the process, one while its context is not enabled
// never gives records (P19, P20, P32).
void note_first_use(FirstUse &fu, const char *name, bool enabled, bool in_graph) {
  if (!name || !fu.seen.insert(name).second) return;
  if (!g_process_ever_enabled) {
    fu.before_any_enable.insert(name);
  } else if (!enabled) {
    fu.tainted.insert(name);
    if (in_graph) fu.tainted_in_graphs++;
  }
}

// A graph's exec first uploaded (its first launch, or cudaGraphUpload) while PC sampling was
// enabled on its context (`registering`: and kernel activity off, P33): its kernels give records
// in it, and those first run before the first Enable are registered for every graph (P19, P36).
void note_upload(FirstUse &fu, uint32_t graph_id, const char *const *kernels, size_t n,
                 bool registering) {
  fu.execs_uploaded_enabled.insert(graph_id);
  if (!registering) return;
  for (size_t i = 0; i < n; ++i)
    if (kernels[i] && fu.before_any_enable.count(kernels[i])) fu.registered.insert(kernels[i]);
}

// A kernel run in a graph's exec that was first run before the first Enable, neither registered
// since nor in an exec uploaded while enabled: unsampled (P19).
bool unregistered_in_graph(const FirstUse &fu, const char *name, uint32_t graph_id) {
  return graph_id != 0 && fu.before_any_enable.count(name) && !fu.registered.count(name) &&
         !fu.execs_uploaded_enabled.count(graph_id);
}

struct PcContext {
  bool enabled = false;
  bool started = false;
  bool start_stop = false;
  CUpti_PCSamplingCollectionMode mode = CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS;
  uint32_t period = 0;  // 0: not set yet (default_period, at the context's first call)
  size_t hw_buffer = size_t{512} << 20;
  std::vector<uint32_t> reasons;  // configured; empty = all
  CUpti_PCSamplingData *config_buffer = nullptr;
  // Counted in g_gpu_holders; enabled without it, another process had the GPU: Start fails.
  bool holds_gpu = false;
  std::deque<Record> pending;
  uint64_t total_samples = 0, nonuser_samples = 0;  // since the last Get Data
};

// Leaked on purpose: the exit report runs after static destructors (mock driver's destructor).
std::mutex g_mu;
// After fork() only the forking thread exists in the child: g_mu may have been held by another
// thread of the parent, and the child's exit report takes it (a forked child hung in exit).
__attribute__((constructor)) void reset_lock_in_forked_children() {
  pthread_atfork(nullptr, nullptr, [] { new (&g_mu) std::mutex; });
}
std::map<uint32_t, PcContext> &g_contexts = *new std::map<uint32_t, PcContext>;  // by context ID
std::map<uint32_t, FirstUse> &g_first_use = *new std::map<uint32_t, FirstUse>;   // by context ID
std::map<uint32_t, Module> &g_modules = *new std::map<uint32_t, Module>;         // by context ID
std::map<std::string, const char *> *g_names = new std::map<std::string, const char *>;

// Counters for the exit report: one list makes the struct's fields and the report's keys.
// graphs_uploaded_enabled: graphs whose first launch (their upload) came while PC sampling was
// enabled on the context; on a real GPU every later launch of them costs ~30% more
// (docs/pc-sampling.md P21). start_conflicts: Starts refused, another process had PC sampling on.
#define MOCK_PC_COUNTERS(X)                                                                \
  X(enables) X(disables) X(configures) X(starts) X(stops) X(get_data_calls)              \
  X(kernels_sampled) X(nonuser_kernels) X(records_made) X(records_delivered)              \
  X(records_discarded) X(graphs_uploaded_enabled) X(graphs_instantiated_enabled)          \
  X(start_conflicts) X(modules_loaded_whole)
struct PcCounters {
#define MOCK_PC_COUNTER_FIELD(name) uint64_t name = 0;
  MOCK_PC_COUNTERS(MOCK_PC_COUNTER_FIELD)
#undef MOCK_PC_COUNTER_FIELD
} g_pc;

uint64_t crc32_of(const void *data, size_t size) {
  return crc32_z(0, static_cast<const Bytef *>(data), size);
}

// The kernels of a cubin: FUNC symbols with a size, in their own .text.<name> section.
std::vector<Function> functions_of(const void *cubin, size_t size) {
  std::vector<Function> out;
  const auto *base = static_cast<const uint8_t *>(cubin);
  if (size < sizeof(Elf64_Ehdr) || std::memcmp(base, ELFMAG, SELFMAG) != 0) return out;
  const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(base);
  if (eh->e_shoff == 0 || eh->e_shoff + uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr) > size)
    return out;
  const auto *sh = reinterpret_cast<const Elf64_Shdr *>(base + eh->e_shoff);
  for (uint16_t i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr &strtab = sh[sh[i].sh_link];
    if (sh[i].sh_offset + sh[i].sh_size > size || strtab.sh_offset + strtab.sh_size > size) break;
    const auto *syms = reinterpret_cast<const Elf64_Sym *>(base + sh[i].sh_offset);
    const size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t s = 0; s < n; ++s) {
      if (ELF64_ST_TYPE(syms[s].st_info) != STT_FUNC ||
          ELF64_ST_BIND(syms[s].st_info) != STB_GLOBAL || syms[s].st_size < 16 ||
          syms[s].st_name >= strtab.sh_size)
        continue;
      out.push_back({reinterpret_cast<const char *>(base + strtab.sh_offset + syms[s].st_name),
                     static_cast<uint32_t>(s), syms[s].st_size});
    }
  }
  return out;
}

const char *intern(const std::string &s) {
  auto it = g_names->find(s);
  if (it != g_names->end()) return it->second;
  const char *p = strdup(s.c_str());  // sized to the name: a consumer must not read past it
  g_names->emplace(s, p);
  return p;
}

uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ull;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}

bool collected(const PcContext &c, uint32_t index) {
  return c.reasons.empty() ||
         std::find(c.reasons.begin(), c.reasons.end(), index) != c.reasons.end();
}

// The samples one kernel yields: a few hot instructions of its function, each with a dominant
// stall reason that depends on the function (so kernels differ) and a minor one.
void sample_kernel(PcContext &c, const Module &m, const Function &f,
                   const mockbridge::KernelRun *run) {
  static const uint32_t kDominant[] = {14, 16, 36, 30, 2, 20, 12, 28};
  static const uint32_t kMinor[] = {28, 26, 4, 22, 6};
  const uint64_t fn_seed = mix(std::hash<std::string>{}(f.name));
  const uint64_t run_seed = mix(fn_seed ^ run->correlation_id ^ (run->graph_node_id << 1));
  const uint64_t instructions = f.size / 16;
  const int pcs = 3 + static_cast<int>(run_seed % 4);
  g_pc.kernels_sampled++;
  for (int i = 0; i < pcs; ++i) {
    // The same few offsets per function come back run after run: hot spots.
    const uint64_t pc = (mix(fn_seed + static_cast<uint64_t>(i % 3)) % instructions) * 16;
    Record r;
    r.crc = m.crc;
    r.pc = pc;
    r.function_index = f.symbol_index;
    r.function_name = intern(f.name);
    r.correlation_id = run->correlation_id;
    const uint32_t dominant = kDominant[(fn_seed >> 8) % (sizeof kDominant / sizeof kDominant[0])];
    const uint32_t minor = kMinor[(run_seed >> (8 + i)) % (sizeof kMinor / sizeof kMinor[0])];
    const uint32_t n = 20 + static_cast<uint32_t>(mix(run_seed + i) % 40);
    if (collected(c, dominant)) r.reasons.push_back({dominant, n});
    if (minor != dominant && collected(c, minor)) r.reasons.push_back({minor, 1 + n / 8});
    if (r.reasons.empty()) continue;  // all its reasons left out by the configuration
    for (const auto &rs : r.reasons) c.total_samples += rs.second;
    c.pending.push_back(std::move(r));
    g_pc.records_made++;
  }
}

uint32_t context_id(CUcontext ctx, bool *ok) {
  uint32_t id = 0;
  *ok = mock_bridge_context_ids(ctx, &id, nullptr) == CUDA_SUCCESS;
  return id;
}

// Moves up to `data->collectNumPcs` pending records into the caller's buffer.
void hand_out(PcContext &c, CUpti_PCSamplingData *data) {
  size_t n = 0;
  const size_t capacity = data->collectNumPcs;
  while (n < capacity && !c.pending.empty()) {
    Record &r = c.pending.front();
    CUpti_PCSamplingPCData &out = data->pPcData[n];
    out.cubinCrc = r.crc;
    out.pcOffset = r.pc;
    out.functionIndex = r.function_index;
    out.functionName = const_cast<char *>(r.function_name);
    const size_t reasons =
        std::min(r.reasons.size(), c.reasons.empty() ? kNumReasons : c.reasons.size());
    for (size_t k = 0; k < reasons; ++k) {
      out.stallReason[k].pcSamplingStallReasonIndex = r.reasons[k].first;
      out.stallReason[k].samples = r.reasons[k].second;
    }
    out.stallReasonCount = reasons;
    // The correlation ID exists only in records of CUPTI 12.4+ layout (the size says which).
    if (out.size >= offsetof(CUpti_PCSamplingPCData, correlationId) + sizeof(uint32_t))
      out.correlationId = r.correlation_id;
    c.pending.pop_front();
    ++n;
  }
  data->totalNumPcs = n;
  data->remainingNumPcs = c.pending.size();
  data->totalSamples = c.total_samples;
  data->nonUsrKernelsTotalSamples = c.nonuser_samples;
  data->droppedSamples = 0;
  data->hardwareBufferFull = 0;
  data->rangeId = 0;
  c.total_samples = c.nonuser_samples = 0;
  g_pc.records_delivered += n;
}

}  // namespace

// ---- Hooks from the rest of the mock ----

// A module loaded after PC sampling was first enabled is loaded whole, every kernel's code on
// the GPU, where lazy loading loads the kernels used (H200, docs/pc-sampling.md P34): counted as
// modules_loaded_whole, the GPU memory a profiler costs the application.
void pc_module_loaded(uint32_t context_id, const void *cubin, size_t size) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_process_ever_enabled) g_pc.modules_loaded_whole++;
  g_modules[context_id] = Module{crc32_of(cubin, size), functions_of(cubin, size)};
}

void pc_module_unloaded(uint32_t context_id) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_modules.erase(context_id);
}

// A graph is registered with PC sampling where it is uploaded: at cudaGraphUpload, or at its
// first launch (pc_kernel_ran); the upload is its kernels' first use too. Uploaded while
// enabled, every later launch of it costs more on real GPUs (docs/pc-sampling.md P21, P30).
// An upload registers its kernels only with kernel activity off: on an H200 an exec uploaded
// while PC sampling was enabled and CONCURRENT_KERNEL on left them unregistered (P33).
void pc_graph_uploaded(uint32_t context_id, uint32_t graph_id, const char *const *kernels,
                       size_t n) {
  const bool activity_on = kernel_activity_enabled(context_id) != 0;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_contexts.find(context_id);
  const bool enabled = it != g_contexts.end() && it->second.enabled;
  FirstUse &fu = g_first_use[context_id];
  for (size_t i = 0; i < n; ++i)
    note_first_use(fu, kernels[i], enabled && !activity_on, /*in_graph=*/true);
  // Only its first upload counts: uploading it again in an episode did not help (P19).
  if (fu.graphs.insert(graph_id).second && enabled) {
    fu.uploaded_enabled.insert(graph_id);
    note_upload(fu, graph_id, kernels, n, !activity_on);
  }
}

// An exec instantiated while PC sampling is enabled on its context pays more at every later
// launch on real GPUs, however it is uploaded (docs/pc-sampling.md P26).
void pc_graph_instantiated(uint32_t context_id, uint32_t graph_id) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_contexts.find(context_id);
  if (it != g_contexts.end() && it->second.enabled)
    g_first_use[context_id].instantiated_enabled.insert(graph_id);
}

// Real CUPTI keeps nothing of a destroyed graph either; a graph ID is never reused, so nothing
// is lost by forgetting it.
void pc_graph_destroyed(uint32_t context_id, uint32_t graph_id) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_first_use.find(context_id);
  if (it == g_first_use.end()) return;
  it->second.graphs.erase(graph_id);
  it->second.uploaded_enabled.erase(graph_id);
  it->second.instantiated_enabled.erase(graph_id);
  it->second.execs_uploaded_enabled.erase(graph_id);
}

void pc_kernel_ran(const mockbridge::KernelRun *run) {
  std::lock_guard<std::mutex> lock(g_mu);
  // Every kernel that runs counts for first use, PC sampling ever touched or not.
  FirstUse &fu = g_first_use[run->context_id];
  auto it = g_contexts.find(run->context_id);
  const bool enabled = it != g_contexts.end() && it->second.enabled;
  note_first_use(fu, run->name, enabled, run->graph_id != 0);
  if (run->graph_id != 0) {
    if (fu.graphs.insert(run->graph_id).second && enabled) {
      // Uploaded at this, its first launch: only the exec is known here, not its other kernels.
      fu.uploaded_enabled.insert(run->graph_id);
      fu.execs_uploaded_enabled.insert(run->graph_id);
    }
    // Launched: an exec that went in while enabled is one the application pays for.
    if (fu.uploaded_enabled.erase(run->graph_id)) g_pc.graphs_uploaded_enabled++;
    if (fu.instantiated_enabled.erase(run->graph_id)) g_pc.graphs_instantiated_enabled++;
  }
  if (it == g_contexts.end()) return;
  PcContext &c = it->second;
  if (!c.enabled || c.mode != CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED) return;
  if (c.start_stop && !c.started) return;
  auto m = g_modules.find(run->context_id);
  const Function *f = nullptr;
  if (m != g_modules.end())
    for (const Function &fn : m->second.functions)
      if (run->name && fn.name == run->name) f = &fn;
  if (!f || fu.tainted.count(run->name) || unregistered_in_graph(fu, run->name, run->graph_id)) {
    g_pc.nonuser_kernels++;
    c.nonuser_samples += 100;
    c.total_samples += 100;
    return;
  }
  sample_kernel(c, m->second, *f, run);
}

nlohmann::ordered_json pc_report() {
  std::lock_guard<std::mutex> lock(g_mu);
  size_t enabled = 0, started = 0, pending = 0;
  for (const auto &c : g_contexts) {
    enabled += c.second.enabled;
    started += c.second.started;
    pending += c.second.pending.size();
  }
  size_t tainted = 0, tainted_in_graphs = 0;
  for (const auto &f : g_first_use) {
    tainted += f.second.tainted.size();
    tainted_in_graphs += f.second.tainted_in_graphs;
  }
  nlohmann::ordered_json j;
#define MOCK_PC_COUNTER_JSON(name) j[#name] = g_pc.name;
  MOCK_PC_COUNTERS(MOCK_PC_COUNTER_JSON)
#undef MOCK_PC_COUNTER_JSON
  j["enabled_now"] = enabled;
  j["started_now"] = started;
  j["pending_now"] = pending;
  j["functions_first_run_between_episodes"] = tainted;
  // Graphs are uploaded outside episodes by default (PARCAGPU_PC_GRAPHS=0): a function first run
  // in one is lost by design (docs/pc-sampling.md P19).
  j["of_them_in_graphs"] = tainted_in_graphs;
  return j;
}

bool pc_sampling_enabled_anywhere() {
  std::lock_guard<std::mutex> lock(g_mu);
  for (const auto &c : g_contexts)
    if (c.second.enabled) return true;
  return false;
}

}  // namespace mockcupti

using namespace mockcupti;

namespace {

// CUPTI's default sampling period differs between GPUs (11 on the H100): a process with two
// kinds of GPU has two. MOCK_CUPTI_PC_DEFAULT_PERIODS=11,12 gives device 0 one and device 1 the
// other (a device past the list: the last); unset, every device has kDefaultPeriod.
uint32_t default_period(CUcontext ctx) {
  uint32_t context = 0, device = 0;
  const char *list = std::getenv("MOCK_CUPTI_PC_DEFAULT_PERIODS");
  if (!list || !*list || mock_bridge_context_ids(ctx, &context, &device) != CUDA_SUCCESS)
    return kDefaultPeriod;
  uint32_t period = kDefaultPeriod;
  const char *p = list;
  for (uint32_t d = 0; d <= device && *p; ++d) {
    char *end = nullptr;
    const unsigned long v = std::strtoul(p, &end, 10);
    if (end == p) break;
    if (v >= 5 && v <= 31) period = static_cast<uint32_t>(v);
    p = *end == ',' ? end + 1 : end;
  }
  return period;
}

// The context's PC state if the call may proceed, else null with *result set.
PcContext *pc_context(CUcontext ctx, CUptiResult *result, bool must_be_enabled = true) {
  bool ok = false;
  const uint32_t id = context_id(ctx, &ok);
  if (!ok) {
    *result = error(CUPTI_ERROR_INVALID_CONTEXT);
    return nullptr;
  }
  PcContext &c = g_contexts[id];
  if (c.period == 0) c.period = default_period(ctx);
  if (must_be_enabled && !c.enabled) {
    *result = error(CUPTI_ERROR_INVALID_OPERATION);
    return nullptr;
  }
  *result = CUPTI_SUCCESS;
  return &c;
}

// `work(state)` on the context's PC state under the lock, or the error of a context that may not
// proceed (unknown; PC sampling not enabled, when it must be).
template <typename Work>
CUptiResult on_pc_context(CUcontext ctx, Work work, bool must_be_enabled = true) {
  std::lock_guard<std::mutex> lock(g_mu);
  CUptiResult r;
  PcContext *c = pc_context(ctx, &r, must_be_enabled);
  return c ? work(*c) : r;
}

enum class Access { kGet, kSet };

// A Set/GetConfigurationAttribute call: each attribute through `one`, which gives its
// attributeStatus; the call fails with the last failed attribute's status. Setting is refused as a
// whole while the context is started.
template <typename PerAttribute>
CUptiResult on_each_attribute(CUpti_PCSamplingConfigurationInfoParams *p, Access access,
                              PerAttribute one) {
  if (!p || (p->numAttributes && !p->pPCSamplingConfigurationInfo))
    return error(CUPTI_ERROR_INVALID_PARAMETER);
  return on_pc_context(p->ctx, [&](PcContext &c) {
    if (access == Access::kSet && c.started) return error(CUPTI_ERROR_INVALID_OPERATION);
    CUptiResult overall = CUPTI_SUCCESS;
    for (size_t i = 0; i < p->numAttributes; ++i) {
      CUpti_PCSamplingConfigurationInfo &info = p->pPCSamplingConfigurationInfo[i];
      info.attributeStatus = one(c, info);
      if (info.attributeStatus != CUPTI_SUCCESS) overall = info.attributeStatus;
    }
    if (access == Access::kSet) g_pc.configures++;
    return overall == CUPTI_SUCCESS ? CUPTI_SUCCESS : error(overall);
  });
}

// cuptiPCSamplingStart (on) and Stop: only with start/stop control, and only from the other state.
CUptiResult set_started(PcContext &c, bool on, uint64_t *count) {
  if (!c.start_stop || c.started == on) return error(CUPTI_ERROR_INVALID_OPERATION);
  c.started = on;
  ++*count;
  return CUPTI_SUCCESS;
}

}  // namespace

extern "C" {

CUptiResult cuptiGetCubinCrc(CUpti_GetCubinCrcParams *p) {
  MOCK_CUPTI_FAULT_POINT(cuptiGetCubinCrc);
  if (!p || !p->cubin || p->cubinSize == 0) return error(CUPTI_ERROR_INVALID_PARAMETER);
  p->cubinCrc = crc32_of(p->cubin, p->cubinSize);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiPCSamplingEnable(CUpti_PCSamplingEnableParams *p) {
  MOCK_CUPTI_FAULT_POINT(cuptiPCSamplingEnable);
  if (!p) return error(CUPTI_ERROR_INVALID_PARAMETER);
  return on_pc_context(
      p->ctx,
      [&](PcContext &c) {
        if (c.enabled) return error(CUPTI_ERROR_INVALID_OPERATION);
        c = PcContext{};
        c.enabled = true;
        c.holds_gpu = take_gpu();
        g_process_ever_enabled = true;
        g_pc.enables++;
        return CUPTI_SUCCESS;
      },
      false);
}

CUptiResult cuptiPCSamplingDisable(CUpti_PCSamplingDisableParams *p) {
  MOCK_CUPTI_FAULT_POINT(cuptiPCSamplingDisable);
  if (!p) return error(CUPTI_ERROR_INVALID_PARAMETER);
  return on_pc_context(p->ctx, [&](PcContext &c) {
    // What is left goes to the buffer given at configuration; what does not fit is discarded.
    if (c.config_buffer) hand_out(c, c.config_buffer);
    g_pc.records_discarded += c.pending.size();
    c.pending.clear();
    c.enabled = false;
    c.started = false;
    if (c.holds_gpu) give_gpu();
    c.holds_gpu = false;
    g_pc.disables++;
    return CUPTI_SUCCESS;
  });
}

CUptiResult cuptiPCSamplingStart(CUpti_PCSamplingStartParams *p) {
  MOCK_CUPTI_FAULT_POINT(cuptiPCSamplingStart);
  if (!p) return error(CUPTI_ERROR_INVALID_PARAMETER);
  return on_pc_context(p->ctx, [](PcContext &c) {
    if (c.enabled && !c.holds_gpu) {
      g_pc.start_conflicts++;
      return error(CUPTI_ERROR_UNKNOWN);
    }
    return set_started(c, true, &g_pc.starts);
  });
}

CUptiResult cuptiPCSamplingStop(CUpti_PCSamplingStopParams *p) {
  MOCK_CUPTI_FAULT_POINT(cuptiPCSamplingStop);
  if (!p) return error(CUPTI_ERROR_INVALID_PARAMETER);
  return on_pc_context(p->ctx, [](PcContext &c) { return set_started(c, false, &g_pc.stops); });
}

CUptiResult cuptiPCSamplingGetData(CUpti_PCSamplingGetDataParams *p) {
  MOCK_CUPTI_FAULT_POINT(cuptiPCSamplingGetData);
  if (!p || !p->pcSamplingData) return error(CUPTI_ERROR_INVALID_PARAMETER);
  auto *data = static_cast<CUpti_PCSamplingData *>(p->pcSamplingData);
  if (data->size < sizeof(CUpti_PCSamplingData) || !data->pPcData || data->collectNumPcs == 0)
    return error(CUPTI_ERROR_INVALID_PARAMETER);
  return on_pc_context(p->ctx, [&](PcContext &c) {
    g_pc.get_data_calls++;
    hand_out(c, data);
    return CUPTI_SUCCESS;
  });
}

CUptiResult cuptiPCSamplingSetConfigurationAttribute(CUpti_PCSamplingConfigurationInfoParams *p) {
  MOCK_CUPTI_FAULT_POINT(cuptiPCSamplingSetConfigurationAttribute);
  return on_each_attribute(
      p, Access::kSet, [](PcContext &c, CUpti_PCSamplingConfigurationInfo &info) {
        const auto &d = info.attributeData;
        switch (info.attributeType) {
          case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD:
            if (d.samplingPeriodData.samplingPeriod < 5 || d.samplingPeriodData.samplingPeriod > 31)
              return CUPTI_ERROR_INVALID_PARAMETER;
            c.period = d.samplingPeriodData.samplingPeriod;
            return CUPTI_SUCCESS;
          case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON: {
            const size_t n = d.stallReasonData.stallReasonCount;
            const uint32_t *first = d.stallReasonData.pStallReasonIndex;
            if (n == 0 || n > kNumReasons || !first) return CUPTI_ERROR_INVALID_PARAMETER;
            c.reasons.assign(first, first + n);
            return CUPTI_SUCCESS;
          }
          case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE:
            c.mode = d.collectionModeData.collectionMode;
            return CUPTI_SUCCESS;
          case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL:
            c.start_stop = d.enableStartStopControlData.enableStartStopControl != 0;
            return CUPTI_SUCCESS;
          case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER:
            c.config_buffer =
                static_cast<CUpti_PCSamplingData *>(d.samplingDataBufferData.samplingDataBuffer);
            return CUPTI_SUCCESS;
          case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE:
            c.hw_buffer = d.hardwareBufferSizeData.hardwareBufferSize;
            return CUPTI_SUCCESS;
          case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE:
          case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT:
          case CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN:
            return CUPTI_SUCCESS;  // accepted, nothing the mock models
          default:
            return CUPTI_ERROR_INVALID_OPERATION;
        }
      });
}

CUptiResult cuptiPCSamplingGetConfigurationAttribute(CUpti_PCSamplingConfigurationInfoParams *p) {
  MOCK_CUPTI_FAULT_POINT(cuptiPCSamplingGetConfigurationAttribute);
  return on_each_attribute(
      p, Access::kGet, [](PcContext &c, CUpti_PCSamplingConfigurationInfo &info) {
        // The attributes the mock reads back; the others are write-only here.
        auto &d = info.attributeData;
        const auto type = info.attributeType;
        if (type == CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD)
          d.samplingPeriodData.samplingPeriod = c.period;
        else if (type == CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE)
          d.hardwareBufferSizeData.hardwareBufferSize = c.hw_buffer;
        else if (type == CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE)
          d.collectionModeData.collectionMode = c.mode;
        else if (type == CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL)
          d.enableStartStopControlData.enableStartStopControl = c.start_stop;
        else
          return CUPTI_ERROR_INVALID_OPERATION;
        return CUPTI_SUCCESS;
      });
}

CUptiResult cuptiPCSamplingGetNumStallReasons(CUpti_PCSamplingGetNumStallReasonsParams *p) {
  MOCK_CUPTI_FAULT_POINT(cuptiPCSamplingGetNumStallReasons);
  if (!p || !p->numStallReasons) return error(CUPTI_ERROR_INVALID_PARAMETER);
  return on_pc_context(p->ctx, [&](PcContext &) {
    *p->numStallReasons = kNumReasons;
    return CUPTI_SUCCESS;
  });
}

CUptiResult cuptiPCSamplingGetStallReasons(CUpti_PCSamplingGetStallReasonsParams *p) {
  MOCK_CUPTI_FAULT_POINT(cuptiPCSamplingGetStallReasons);
  if (!p || !p->stallReasonIndex || !p->stallReasons) return error(CUPTI_ERROR_INVALID_PARAMETER);
  return on_pc_context(p->ctx, [&](PcContext &) {
    const size_t n = std::min(p->numStallReasons, kNumReasons);
    for (size_t i = 0; i < n; ++i) {
      p->stallReasonIndex[i] = kReasons[i].index;
      std::snprintf(p->stallReasons[i], CUPTI_STALL_REASON_STRING_SIZE, "%s", kReasons[i].name);
    }
    return CUPTI_SUCCESS;
  });
}

}  // extern "C"
