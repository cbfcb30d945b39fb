// The joining and accounting logic of parcagpu-trace, without BPF: it is fed decoded events and
// produces the summary. Joins the two sides by (pid, correlation ID) the way the production
// agent does: each cuda_correlation waits for its kernels, each kernel waits for its
// correlation. Graph launches announce once and all their kernels carry the launch's ID.
//
// Bounded: what waits (launches for kernels, kernels for launches, graph launches for more
// kernels) is kept in two generations. The current one takes new and refreshed entries; every
// max_age/2, or when it holds max_entries/2, it becomes the old one and the old one is
// forgotten, counted. So at most max_entries are held, and nothing outlives max_age without
// activity. Forgotten launches without kernels and kernels without launches are orphans.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "counters.h"
#include "stacks.h"
#include "timestamp_check.h"

namespace parcagpu::trace {

// A graph launch fans out into many kernels with one correlation ID: the GraphLaunch entries of
// include/parcagpu/cbid_table.h (311/312 runtime, -514/-515 driver). Everything else is eager.
bool is_graph_cbid(int32_t signed_cbid);

struct KernelRecord {
  uint32_t pid = 0, correlation_id = 0;
  // Where it ran; its graph and node in it (0 for an eager launch's kernel).
  uint32_t device_id = 0, context_id = 0, stream_id = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  uint64_t start = 0, end = 0;  // on the GPU (CUPTI's clock)
  uint64_t seen_ns = 0;  // when the event fired (CLOCK_MONOTONIC): the joiner's clock
  uint64_t process_start_ns = 0;  // when its process started (CLOCK_MONOTONIC), 0 unknown
  std::string_view name;
  // A copy or fill (memory_batch): its bytes, whether its API was synchronous (the record's
  // flag), whether host memory on either side was pageable, and how long the call held its
  // thread (the library's measure).
  bool memory = false;
  bool sync_copy = false;
  bool pageable_host = false;
  uint64_t bytes = 0;
  uint64_t cpu_blocked_ns = 0;
  // Joiner::judge's verdict (tools/trace/timestamp_check.h): an impossible record counts as a kernel
  // with no GPU time.
  Impossible impossible = Impossible::kNone;
  uint64_t duration_ns() const { return end > start ? end - start : 0; }
  // What it adds to GPU time: nothing when its times are impossible.
  uint64_t gpu_ns() const { return impossible == Impossible::kNone ? duration_ns() : 0; }
};

// A launch as announced by cuda_correlation.
struct Launch {
  uint32_t pid = 0;
  uint32_t correlation_id = 0;
  int32_t signed_cbid = 0;
  uint32_t stack_id = 0;  // StackTable id of the launch site
  uint64_t announced_ns = 0;  // when cuda_correlation fired (CLOCK_MONOTONIC), 0 unknown
};

// Receives every kernel matched to its launch, when it is matched: at once, or when its
// launch's announcement arrives after it. `tag` is what the caller passed with the kernel.
class MatchSink {
 public:
  virtual ~MatchSink() = default;
  virtual void on_match(const Launch &launch, const KernelRecord &kernel, uint32_t name_id,
                        uint32_t tag) = 0;
};

// One row of --capture-sites: graph kernels of one name whose nodes were captured with one stack.
struct CaptureSiteSummary {
  std::string kernel;
  std::string kernel_demangled;
  uint64_t records = 0;
  uint64_t total_ns = 0;          // GPU time (end - start) of those records
  std::string captured_at;        // the captured-at frame's function ("" if no stack)
  int captured_at_index = -1;     // into stack
  std::vector<std::string> stack; // innermost first
};

// One row of the GPU time by stack table.
struct StackKernelSummary {
  std::string kernel, kernel_demangled;
  uint64_t gpu_ns = 0, kernels = 0;
};

// The n kernels of `by_name` (kernel name id -> a cell with gpu_ns and kernels) with the most GPU
// time, most first (the name id breaks ties), named from `names`: the top kernels of a device and
// of a process alike.
template <class Map>
std::vector<StackKernelSummary> top_kernels(const Map &by_name, const NameTable &names, size_t n) {
  std::vector<std::pair<uint32_t, typename Map::mapped_type>> cells(by_name.begin(), by_name.end());
  std::sort(cells.begin(), cells.end(), [](const auto &a, const auto &b) {
    return a.second.gpu_ns != b.second.gpu_ns ? a.second.gpu_ns > b.second.gpu_ns : a.first < b.first;
  });
  std::vector<StackKernelSummary> out;
  for (size_t i = 0; i < cells.size() && i < n; ++i)
    out.push_back({names.raw(cells[i].first), names.demangled(cells[i].first), cells[i].second.gpu_ns,
                   cells[i].second.kernels});
  return out;
}
struct StackSummary {
  uint32_t stack_id = 0;
  uint64_t gpu_ns = 0, kernels = 0;
  std::vector<std::string> frames;  // innermost first; one "[...]" entry for pseudo stacks
  std::vector<StackKernelSummary> by_kernel;  // most GPU time first
};

// One row of GPU time by device (tools/trace/device_profile.h).
struct DeviceSummary {
  uint32_t device = 0;
  uint64_t kernel_records = 0;  // kernel records of the device read, matched or not
  uint64_t kernels = 0;         // of which matched to their launch
  uint64_t gpu_ns = 0;          // GPU time of the matched ones
  uint64_t pids = 0;            // processes whose records name this device
  uint64_t kernel_names = 0;    // distinct kernels matched (by_kernel holds the top N)
  std::vector<StackKernelSummary> by_kernel;  // most GPU time first
};

// One row of GPU time by process (tools/trace/processes.h): a process's matched kernels, with the
// labels that tell the ranks of one job apart.
struct ProcessSummary {
  uint32_t pid = 0;
  std::string comm;
  std::optional<int64_t> rank, local_rank;  // RANK / LOCAL_RANK of its environment
  uint64_t gpu_ns = 0, kernels = 0;
  struct Device {
    uint32_t device = 0;
    uint64_t gpu_ns = 0, kernels = 0;
  };
  std::vector<Device> devices;                // by ordinal
  uint64_t kernel_names = 0;                  // distinct kernels (by_kernel holds the top N)
  std::vector<StackKernelSummary> by_kernel;  // most GPU time first
};

// Everything the tool reports: the counters (tools/trace/counters.h: the joiner's, the capture sites',
// the tracer's and the BPF side's, added up) and the tables.
struct Summary : Counters {
  std::vector<StackSummary> gpu_time_by_stack;  // top N, most GPU time first
  std::vector<DeviceSummary> gpu_time_by_device;  // every device seen, by ordinal
  std::vector<ProcessSummary> gpu_time_by_process;  // every process with GPU time, by rank then pid
  bool capture_sites_enabled = false;               // --capture-sites: the table below is output
  std::vector<CaptureSiteSummary> capture_sites;    // sorted by total_ns, descending
  std::vector<std::string> libraries;               // library files attached to
};

class Joiner {
 public:
  struct Limits {
    size_t max_entries = 1 << 18;             // launches + pending kernels held, at most
    uint64_t max_age_ns = 30'000'000'000ull;  // nothing waits longer without activity
    // How many matched eager launches are remembered after their kernel, so that an unexpected
    // second kernel with the same ID still counts as matched rather than as an orphan.
    size_t retired_window = 1 << 16;
  };
  explicit Joiner(Limits limits, MatchSink *sink = nullptr);
  Joiner() : Joiner(Limits{}) {}

  struct Match {
    bool matched = false;
    int32_t signed_cbid = 0;  // of the correlation, when matched
  };

  void on_correlation(uint32_t pid, uint32_t correlation_id, int32_t signed_cbid,
                      uint32_t stack_id = 0, uint64_t now_ns = 0);
  // `tag` goes to the sink with the kernel (capture stack of a graph kernel, or 0).
  Match on_kernel(const KernelRecord &k, uint32_t tag = 0);
  // Checks a kernel record's times (tools/trace/timestamp_check.h) before on_kernel, with its launch's
  // announcement when that came first, and sets k->impossible. Counted in the impossible_*
  // counters; each record should be judged once.
  Impossible judge(KernelRecord *k);
  // A process gone: what the timestamp check remembers of it.
  void forget_process(uint32_t pid) { times_.forget_process(pid); }
  // Other events: counted for "events", "pids" and their own figures.
  void on_error(uint32_t pid);
  void on_gpu_config(uint32_t pid);
  void on_other(uint32_t pid);  // metadata events counted elsewhere, verbose-only events
  // Ages the tables without an event (the tool's loop calls it with CLOCK_MONOTONIC).
  void tick(uint64_t now_ns);

  // At exit, from just before cuda_correlation is detached: a kernel whose launch is unknown
  // may belong to a launch we no longer see announced (detach in progress, or another consumer
  // keeps the library announcing). If its correlation never comes, it counts in
  // kernels_ignored_at_exit instead of orphan_kernels. kernel_records = kernels_matched +
  // orphan_kernels + kernels_ignored_at_exit always holds.
  void set_closing() { closing_ = true; }

  // Correlations still waiting for their first kernel (for draining at exit).
  uint64_t awaiting_kernels() const { return awaiting_; }
  // The processes those correlations belong to (walks the tables: call it rarely).
  std::vector<uint32_t> awaiting_pids() const;
  // Launches and pending kernels held now (bounded by Limits::max_entries).
  size_t entries() const;
  // What waited and was forgotten because the joiner held max_entries: launches without their
  // kernel and kernels without their launch (cheap: for the live loss warning).
  uint64_t forgotten_at_max_pending() const { return c_.forgotten_at_max_pending; }
  size_t max_entries() const { return limits_.max_entries; }
  // Adds the join figures at this point to s (orphans = what is still waiting now + what was
  // forgotten).
  void add_to(Counters *s) const;

  NameTable &names() { return names_; }
  const NameTable &names() const { return names_; }

 private:
  static uint64_t key(uint32_t pid, uint32_t corr) { return (uint64_t)pid << 32 | corr; }
  void see_pid(uint32_t pid);
  void see_time(uint64_t now_ns);
  void count_match(int32_t cbid, bool graph_record, uint32_t name, uint64_t n = 1);
  void retire(uint64_t k, const Launch &l);
  // Why the old generation is forgotten: it aged (max_age/2 passed), or the current one holds
  // max_entries/2 (--max-pending: what waited is lost to the cap, counted apart).
  enum class Rotation { kByAge, kAtMaxPending };
  void rotate(Rotation why);

  struct Correlation {
    Launch launch;
    uint32_t kernels = 0;
  };
  struct PendingKernel {
    KernelRecord rec;  // rec.name is not kept (use name_id)
    uint32_t name_id = 0;
    uint32_t tag = 0;
    bool while_closing = false;  // arrived after set_closing()
  };
  struct Generation {
    std::unordered_map<uint64_t, Correlation> live;  // announced, graph or still waiting
    std::unordered_map<uint64_t, std::vector<PendingKernel>> pending;  // kernels waiting
    size_t pending_kernels = 0;
    size_t size() const { return live.size() + pending_kernels; }
  };
  Correlation *find_live(uint64_t k);  // refreshes (moves to the current generation)
  void forget(Generation &g, Rotation why);

  Limits limits_;
  MatchSink *sink_;
  NameTable names_;
  Generation cur_, old_;
  uint64_t now_ns_ = 0, rotated_at_ns_ = 0;
  size_t peak_entries_ = 0;
  std::unordered_map<uint64_t, Launch> retired_;  // eager launches that got their kernel
  std::deque<uint64_t> retired_order_;
  std::vector<NameCounts> name_counts_;
  std::unordered_set<uint32_t> pids_;
  TimestampCheck times_;
  uint32_t last_pid_ = 0;
  bool have_pid_ = false;
  bool closing_ = false;
  uint64_t awaiting_ = 0;
  uint64_t replaced_orphans_eager_ = 0, replaced_orphans_graph_ = 0;
  uint64_t forgotten_kernels_ = 0, forgotten_kernels_closing_ = 0;
  // What the joiner counts as it goes; fill() adds what it works out at the end (orphans, pids,
  // kernels by name, bounds).
  Counters c_;
};

}  // namespace parcagpu::trace
