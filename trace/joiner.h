// The joining and accounting logic of parcagpu-trace, without BPF: it is fed decoded events and
// produces the summary. Joins the two sides by (pid, correlation ID) the way the production
// agent does: each cuda_correlation waits for its kernels, each kernel waits for its
// correlation. Graph launches announce once and all their kernels carry the launch's ID.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace parcagpu::trace {

// A graph launch fans out into many kernels with one correlation ID: the GraphLaunch entries of
// include/parcagpu/cbid_table.h (311/312 runtime, -514/-515 driver). Everything else is eager.
bool is_graph_cbid(int32_t signed_cbid);

struct KernelRecord {
  uint32_t pid = 0;
  uint32_t correlation_id = 0;
  uint32_t device_id = 0;
  uint32_t stream_id = 0;
  uint32_t graph_id = 0;
  uint64_t graph_node_id = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  std::string_view name;
};

struct NameCounts {
  uint64_t records = 0;
  uint64_t matched = 0;
};

// One row of --capture-sites: graph kernels of one name whose nodes were captured with one stack.
struct CaptureSiteSummary {
  std::string kernel;
  uint64_t records = 0;
  uint64_t total_ns = 0;          // GPU time (end - start) of those records
  std::string captured_at;        // the first user frame's function ("" if no stack)
  int captured_at_index = -1;     // into stack
  std::vector<std::string> stack; // innermost first; "?" = recovered by the stack scan
};

// Everything the tool reports. The join figures come from the Joiner; the BPF-side counters
// (drops, read errors, probe firings) are filled in by the caller.
struct Summary {
  uint64_t correlations = 0;
  std::map<int32_t, uint64_t> correlations_by_cbid;
  uint64_t kernel_records = 0;        // every kernel record read (activity_batch)
  uint64_t graph_kernel_records = 0;  // of which graphId != 0
  uint64_t kernels_matched = 0;
  uint64_t graph_kernels_matched = 0;
  uint64_t orphan_kernels = 0;             // correlation never seen
  uint64_t orphan_correlations_eager = 0;  // no kernel ever seen
  uint64_t orphan_correlations_graph = 0;
  uint64_t graph_launches_with_kernels = 0;
  uint64_t ringbuf_drops = 0;
  uint64_t read_errors = 0;
  uint64_t errors = 0;  // error probe firings received
  uint64_t events = 0;  // ring-buffer events received
  double duration_s = 0;
  double events_per_s = 0;
  uint64_t pids = 0;
  uint64_t gpu_config = 0;
  std::map<std::string, NameCounts> kernels_by_name;
  std::map<int32_t, uint64_t> matched_by_cbid;
  // Beyond the required keys.
  uint64_t kernel_executed_events = 0;  // kernel_executed firings (not a kernel source)
  uint64_t activity_batches = 0;        // activity_batch firings
  uint64_t batch_records_over_cap = 0;  // records beyond 128 in one firing, not read
  uint64_t records_other_kind = 0;      // records of other kinds, skipped
  uint64_t duplicate_correlations = 0;  // a (pid, ID) announced again while still waiting
  uint64_t kernels_ignored_at_exit = 0;  // unmatched kernels after cuda_correlation detached
  uint64_t cubin_loaded = 0;
  uint64_t cubin_unloaded = 0;
  uint64_t stall_reason_maps = 0;
  uint64_t pc_sample_batches = 0;
  uint64_t pc_sample_records = 0;
  // Capture-site attribution (trace/capture_sites.h), counters always.
  uint64_t graph_capture_launches = 0;  // graph_capture_launch events received
  uint64_t graph_node_clones = 0;       // graph_node_clone events received (re-fires included)
  uint64_t graph_kernels_with_capture_site = 0;
  uint64_t graph_kernels_without_capture_site = 0;  // explicitly built graphs, conditional bodies
  uint64_t capture_stacks_dropped = 0;  // capture events sent without their stack (ring full)
  bool capture_sites_enabled = false;               // --capture-sites: the table below is output
  std::vector<CaptureSiteSummary> capture_sites;    // sorted by total_ns, descending
};

class Joiner {
 public:
  // How many matched eager launches are remembered after their kernel, so that an unexpected
  // second kernel with the same ID still counts as matched rather than as an orphan.
  explicit Joiner(size_t retired_window = 1 << 16) : retired_window_(retired_window) {}

  struct Match {
    bool matched = false;
    int32_t signed_cbid = 0;  // of the correlation, when matched
  };

  void on_correlation(uint32_t pid, uint32_t correlation_id, int32_t signed_cbid);
  Match on_kernel(const KernelRecord &k);
  // Other events: counted for "events", "pids" and their own figures.
  void on_error(uint32_t pid);
  void on_gpu_config(uint32_t pid);
  void on_other(uint32_t pid);  // metadata events counted elsewhere, verbose-only events

  // At exit, from just before cuda_correlation is detached: a kernel whose launch is unknown
  // may belong to a launch we no longer see announced (detach in progress, or another consumer
  // keeps the library announcing). If its correlation never comes, it counts in
  // kernels_ignored_at_exit instead of orphan_kernels. kernel_records = kernels_matched +
  // orphan_kernels + kernels_ignored_at_exit always holds.
  void set_closing() { closing_ = true; }

  // Correlations still waiting for their first kernel (for draining at exit).
  uint64_t awaiting_kernels() const { return awaiting_; }
  // The processes those correlations belong to (walks the table: call it rarely).
  std::vector<uint32_t> awaiting_pids() const;
  // The join figures at this point (orphans = what is still waiting now).
  void fill(Summary *s) const;

 private:
  static uint64_t key(uint32_t pid, uint32_t corr) { return (uint64_t)pid << 32 | corr; }
  uint32_t name_id(std::string_view name);
  void see_pid(uint32_t pid);
  void count_match(int32_t cbid, bool graph_record, uint32_t name, uint64_t n = 1);
  void retire(uint64_t k, int32_t cbid);

  struct Correlation {
    int32_t signed_cbid;
    uint32_t kernels;
  };
  struct Pending {  // kernels waiting for their correlation
    uint64_t graph_records = 0;
    uint64_t while_closing = 0;  // of which arrived after set_closing()
    std::vector<uint32_t> names;
  };
  struct SvHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  size_t retired_window_;
  std::unordered_map<uint64_t, Correlation> live_;   // announced, graph or still waiting
  std::unordered_map<uint64_t, int32_t> retired_;    // eager launches that got their kernel
  std::deque<uint64_t> retired_order_;
  std::unordered_map<uint64_t, Pending> pending_;
  std::unordered_map<std::string, uint32_t, SvHash, std::equal_to<>> name_ids_;
  std::vector<std::pair<std::string, NameCounts>> names_;
  std::unordered_set<uint32_t> pids_;
  uint32_t last_pid_ = 0;
  bool have_pid_ = false;
  bool closing_ = false;
  uint64_t awaiting_ = 0;
  uint64_t replaced_orphans_eager_ = 0, replaced_orphans_graph_ = 0;

  uint64_t events_ = 0, correlations_ = 0, duplicates_ = 0;
  uint64_t kernel_records_ = 0, graph_kernel_records_ = 0;
  uint64_t matched_ = 0, graph_matched_ = 0, graph_launches_with_kernels_ = 0;
  uint64_t errors_ = 0, gpu_config_ = 0;
  std::map<int32_t, uint64_t> correlations_by_cbid_, matched_by_cbid_;
};

}  // namespace parcagpu::trace
