// parcagpu-trace's PC sampling (--pc), without BPF: PcSampling decodes the events (its own,
// pc_events.h, and the tracer's cuda_correlation, cubin and gpu_config events) that
// the tracer hands it; PcProfile adds up what the PC probes delivered per kernel (function), with
// its top stall reasons, its hottest PC offsets and the source lines they map to (CubinLines on
// the cubin the library published, read from the process as the production consumer reads it),
// and how the samples tie to announced launches. Unit-tested in tests/unit/trace/pc_profile_test.cc; the
// BPF side is pc_bpf_session.cc.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cubin_lines.h"
#include "trace_events.h"
#include "report.h"
#include "extension.h"

namespace parcagpu::trace {

struct PcSample {
  uint32_t pid = 0, correlation_id = 0;
  uint64_t cubin_crc = 0, pc_offset = 0;  // the PC: its cubin and its offset there
  uint32_t function_index = 0;
  std::string function;
  std::vector<std::pair<uint32_t, uint32_t>> stalls;  // (stall-reason index, samples)
};

struct PcBpfCounters {
  uint64_t batches = 0, records = 0, over_cap = 0, read_errors = 0, ringbuf_drops = 0;
};

class PcProfile {
 public:
  void on_correlation(uint32_t pid, uint32_t correlation_id, int32_t signed_cbid);
  // names: PARCAGPU_STALL_REASON_MAX slots of PARCAGPU_STALL_REASON_NAME_LEN bytes.
  void on_stall_map(uint32_t pid, const char *names, size_t size);
  // The cubin's bytes as read from the process (empty: unreadable).
  void on_cubin(uint32_t pid, uint64_t crc, uint64_t size, const std::vector<uint8_t> &bytes);
  void on_cubin_unloaded(uint32_t pid, uint64_t crc);
  void on_gpu_config(uint32_t pid, uint32_t device, uint32_t factor, uint32_t clock_khz,
                     uint32_t sm_count);
  void on_sample(const PcSample &s);
  // A kernel that ran (a kernel record read through activity_batch): its GPU time, so that the
  // report can name the kernels that got no PC samples.
  void on_kernel(uint32_t pid, const char *name, size_t name_len, uint32_t device, uint64_t gpu_ns);
  // The library's error probe: a process whose PC samples CUPTI did not all attribute.
  void on_library_error(uint32_t pid, const std::string &component, const std::string &message);
  void set_bpf(const PcBpfCounters &c) { bpf_ = c; }

  // Hottest kernels by samples with their top stall reasons; per kernel its hottest PCs.
  void print(FILE *out, size_t kernels = 10, size_t pcs = 5) const;
  Json json(size_t kernels = 50, size_t pcs = 10) const;
  // Every (kernel, PC offset, stall reason) with its samples, for --pprof.
  void add_pprof(std::vector<PprofPcSample> *out) const;

  // The whole name behind the library's stand-in `name` (a kernel name longer than the
  // consumer keeps, include/parcagpu/abi.h), from the cubins read; null if none has it.
  const std::string *whole_name(std::string_view name) const;

  // "smsp__pcsamp_warps_issue_stalled_long_scoreboard" -> "long_scoreboard".
  static std::string short_reason(const std::string &name);
  static uint32_t crc32(const uint8_t *data, size_t size);  // zlib's, for the bytes read

 private:
  struct PcStat {
    uint64_t samples = 0;
    std::map<uint32_t, uint64_t> stalls;
  };
  struct Kernel {
    uint32_t pid = 0;
    std::string function;  // the cubin's symbol; the probe's copy where its cubin was not read
    bool name_cut = false;  // the probe's copy, cut at its length: no cubin to complete it
    std::string received_name;  // the probe's copy where it is not `function` (cut, stand-in)
    uint64_t cubin_crc = 0;
    uint32_t function_index = 0;  // CUPTI's: its symbol's index in the cubin's symbol table
    uint64_t samples = 0, records = 0, pairs = 0;
    std::map<uint32_t, uint64_t> stalls;            // index -> samples
    std::map<uint64_t, PcStat> pcs;                 // pc offset -> samples
    std::map<uint32_t, uint64_t> by_correlation;    // correlation ID -> samples
    // Samples by what announced their launch, taken when they arrive (announced_ forgets).
    std::map<std::string, uint64_t> by_launch;
    uint64_t with_stack = 0, gpu_only = 0, unannounced = 0;
  };
  struct Cubin {
    uint64_t size = 0;
    bool read = false;
    uint32_t bytes_crc32 = 0;
    bool unloaded = false;
    CubinLines lines;
  };
  struct Config {
    uint32_t device, factor, clock_khz, sm_count;
  };
  struct Ranked {
    const Kernel *k;
  };
  std::string stall_name(uint32_t pid, uint32_t index) const;
  // Kernels with GPU time and no PC samples, most GPU time first, with why where it is known.
  struct NotSampled {
    uint32_t pid;
    std::string function;  // whole where a cubin has it, else as received
    uint64_t gpu_ns, kernels;
    const char *reason;  // a key: no_pc_sampling, no_cubin, not_in_cubins, not_attributed, ...
    std::string why;     // in words
  };
  std::vector<NotSampled> not_sampled() const;
  const char *why_not_sampled(uint32_t pid, const std::string &function, uint64_t gpu_ns,
                              bool in_cubin, std::string *why) const;
  // The whole name of a kernel record's name (a stand-in, or cut at 255 bytes) from the cubins of
  // its process; *in_cubin: a cubin of the process has the function.
  std::string kernel_function(uint32_t pid, const std::string &name, bool *in_cubin) const;
  void print_not_sampled(FILE *out, size_t n) const;
  // json()'s parts, each adding its keys in the order the JSON lists them.
  void add_totals_json(Json &j) const;
  void add_process_tables_json(Json &j) const;
  Json kernel_json(const Kernel &k, size_t npcs) const;
  void add_attribution_json(const Kernel &k, Json &jk) const;
  void add_hot_spots_json(const Kernel &k, size_t npcs, Json &jk) const;
  // A sample's function name whole: from its cubin (the symbol at its functionIndex, or the one
  // symbol the probe's cut copy begins), else the copy; *cut when that copy may be cut.
  std::string full_name(const PcSample &s, bool *cut) const;
  const Cubin *cubin(uint32_t pid, uint64_t crc) const;
  std::vector<const Kernel *> ranked() const;
  // Samples of a kernel by what announced their correlation ID: a launch API's signed cbid, or
  // "unannounced" (an ID no cuda_correlation named) / "gpu_only" (ID 0: a launch the library did
  // not announce, published without a CPU stack).
  std::map<std::string, uint64_t> by_launch(const Kernel &k) const;
  // A kernel's samples by whether a CPU stack goes with them: announced (with_stack), ID 0
  // (gpu_only), a nonzero ID never announced (unannounced); and its launches (nonzero IDs).
  struct StackShare {
    uint64_t with_stack = 0, gpu_only = 0, unannounced = 0, launches = 0;
  };
  StackShare stack_share(const Kernel &k) const;
  StackShare stack_share() const;  // every kernel's

  // (pid, corr) -> signed cbid of the launches announced lately, in two generations of at most
  // kAnnouncedGeneration: every launch ever announced was kept, and with every launch announced
  // a 10-minute soak's trace grew by ~600 MB for 8.8M of them. A PC sample comes within seconds
  // of its launch (the library drains every episode), so the last 2^19 to 2^20 suffice.
  static constexpr size_t kAnnouncedGeneration = size_t{1} << 19;
  using Announced = std::unordered_map<uint64_t, int32_t>;
  Announced announced_, announced_old_;
  const int32_t *announced(uint32_t pid, uint32_t corr) const;
  std::map<uint32_t, std::vector<std::string>> stall_names_;     // pid -> 64 names
  uint64_t stall_maps_ = 0;
  std::map<std::pair<uint32_t, uint64_t>, std::unique_ptr<Cubin>> cubins_;
  uint64_t cubins_unloaded_ = 0;
  std::map<std::pair<uint32_t, uint32_t>, Config> configs_;  // (pid, device) -> first firing
  uint64_t gpu_config_firings_ = 0;
  std::map<std::pair<uint32_t, std::string>, Kernel> kernels_;
  struct Ran {
    uint64_t gpu_ns = 0, kernels = 0;
  };
  std::map<std::pair<uint32_t, std::string>, Ran> ran_;  // (pid, kernel name as received)
  std::map<uint32_t, uint64_t> not_attributed_reports_;  // pid -> library errors saying so
  uint64_t records_ = 0, samples_ = 0, pairs_ = 0, records_no_stalls_ = 0;
  uint64_t names_completed_ = 0, names_left_cut_ = 0;  // records, by their function name
  PcBpfCounters bpf_;
};

// The extension: every event of the types it wants, into a PcProfile. The text and JSON reports get
// its "PC samples" section and its "pc" key.
class PcSampling : public Extension {
 public:
  explicit PcSampling(bool verbose) : verbose_(verbose) {}
  const char *name() const override { return "pc"; }
  bool wants(uint32_t event_type) const override;
  void on_event(const pt_header &h, const void *data, size_t size) override;
  void add_json(Json &summary) const override;
  void add_pprof(std::vector<PprofPcSample> *out) const override { profile_.add_pprof(out); }
  bool has_pprof_samples() const override { return true; }
  void print(FILE *out) const override;
  const std::string *whole_name(std::string_view name) const override;

  // The BPF side's counters (PcBpfSession::counters()), read once its programs are detached.
  void set_bpf(const PcBpfCounters &c) { profile_.set_bpf(c); }
  const PcProfile &profile() const { return profile_; }
  uint64_t malformed() const { return malformed_; }

 private:
  void on_cubin_loaded(uint32_t pid, const pt_meta_event &e);
  bool verbose_;
  PcProfile profile_;
  uint64_t malformed_ = 0;
};

}  // namespace parcagpu::trace
