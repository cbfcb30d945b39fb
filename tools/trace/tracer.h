// Decodes parcagpu-trace's ring-buffer events and feeds everything that is done with them: the
// joiner (kernels to launches), the stacks (symbolized once per distinct stack), capture sites,
// the GPU profile (total and per interval), the live outputs (-k, --json-lines) and the extensions.
// No BPF here: main hands it the events and the BPF counters.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "capture_sites.h"
#include "device_profile.h"
#include "joiner.h"
#include "mmap_tracker.h"
#include "options.h"
#include "trace_events.h"
#include "processes.h"
#include "profile.h"
#include "autograd.h"
#include "python.h"
#include "report.h"
#include "stacks.h"
#include "symbolizer.h"
#include "unwinder.h"
#include "extension.h"
#include "memory_profile.h"
#include "nvtx_ranges.h"

namespace parcagpu::trace {

class Tracer : public MatchSink {
 public:
  explicit Tracer(const Options &o);

  // BpfSession's ring-buffer callback (ctx = this).
  static int handle(void *ctx, void *data, size_t size);
  void on_event(const void *data, size_t size);

  void add_extension(std::unique_ptr<Extension> v) { extensions_.push_back(std::move(v)); }
  // A library file was attached: its frames are mechanism, and --json-lines says so.
  void on_library(const std::string &path, const std::string &shown, uint32_t pid);
  // Mapping records go to the symbolizer (and `hooks`); drained before a new stack is
  // symbolized, so that the mappings made before the launch are known.
  void use_mapping_records(MmapTracker *m, MmapTracker::Hooks hooks);
  void drain_mapping_records();
  // A process gone for good: its caches.
  void forget_process(uint32_t pid);
  // Where a Python process found goes (the BPF map "py_procs"; nullptr = gone); unset or
  // --no-python: Python frames are not taken.
  std::function<bool(uint32_t pid, const pt_py_proc *p)> python_map;
  // Is `pid` CPython 3.11+ (mappings `maps`)? Then it is put in python_map. Checked when a
  // process maps a python* / libpython3* file, and on a process's first event (one running
  // before the tool started).
  void check_python(uint32_t pid, const std::vector<MapEntry> &maps);
  // Attaches the autograd programs (tools/trace/autograd.h) to a libtorch_cpu.so with layout `l`;
  // unset or --no-autograd: nothing attached. False with *error on failure.
  std::function<bool(const std::string &path, const AutogradLayout &l, std::string *error)> autograd_attach;
  // A Python process's mappings: a libtorch_cpu.so among them is attached to (once per file)
  // when its torch version's layout is known, else counted (autograd_layout_unknown).
  void check_torch(uint32_t pid, const std::vector<MapEntry> &maps);

  // What the BPF side has lost so far, for the live warnings (main reads these counters once per
  // poll tick: a few map lookups).
  struct BpfLosses {
    uint64_t ringbuf_drops = 0;       // PT_STAT_RINGBUF_DROPS
    uint64_t meta_ringbuf_drops = 0;  // PT_STAT_META_RINGBUF_DROPS
    uint64_t error_drops = 0;         // PT_STAT_ERROR_DROPS
  };
  // Says each kind of loss on stderr once, when it is first seen: events the ring buffer had no
  // room for, metadata its own ring buffer had no room for, error firings lost, what the joiner
  // forgot at --max-pending. The summary counts them all at exit; these say when they begin.
  void warn_of_losses(const BpfLosses &b);

  void begin_output();              // headers (-k)
  void tick(uint64_t now_ns) { joiner_.tick(now_ns); }
  void set_closing() { joiner_.set_closing(); }
  // An event the exit had no time left to read (parcagpu_trace.cc): counted, not decoded.
  void left_at_exit() { ++meta_.events_left_at_exit; }
  const Joiner &joiner() const { return joiner_; }

  // The last interval's GPU time by stack (text, or a JSON line), then a new interval.
  void print_interval(double seconds);
  // Everything at exit. `stats`: the BPF counters; `libraries`: the files attached to.
  Summary summarize(const uint64_t stats[PT_STAT_MAX], double duration_s,
                    const std::vector<std::string> &libraries) const;
  // The reports: text or JSON on stdout (text on stderr when a file output is -), --folded, --svg,
  // --pprof. False when a file could not be written.
  bool report(const Summary &s) const;

  void on_match(const Launch &l, const KernelRecord &k, uint32_t name_id, uint32_t tag) override;

 private:
  template <typename T>
  const T *as(const void *data, size_t size);
  // The event as E handed to `on`; none (counted as malformed) when it is too short to be one.
  template <typename E>
  void take(const void *data, size_t size, void (Tracer::*on)(const E &));
  // The stack of a launch or capture event (E: pt_correlation_stack_event, pt_capture_stack_event):
  // StackTable::kNone without PT_F_STACK; false when the event is too short for its stacks.
  template <typename E>
  bool stack_of(const pt_header &h, const void *data, size_t size, uint32_t *stack);
  // The stack of an event with PT_F_STACK (`stacks`, `avail` bytes of event from there on): unwound
  // by DWARF CFI from the copy when the event has one (PT_F_STACK_COPY), else (or when that unwind
  // gets no further than the probe) the frame-pointer walk, with the Python frames of
  // PT_F_PY_STACK.
  uint32_t resolve_stack(const pt_header &h, const pt_stacks &stacks, size_t avail);
  // resolve_stack's parts: the edit that puts the Python (and autograd) frames in, with what it
  // adds to the stack's cache key; the DWARF unwind of the copy (false: it got no further).
  using StackEdit = std::function<void(std::vector<Frame> *)>;
  StackEdit python_edit(const pt_header &h, const pt_py_stack *py, std::string *py_key);
  bool resolve_copied_stack(const pt_header &h, const pt_stack_copy &copy, std::string py_key,
                            const StackEdit &edit, uint32_t *id);
  void on_process(uint32_t pid);  // an event from another process than the last one's
  bool on_correlation(const pt_correlation_event &e, const void *data, size_t size);
  void on_library_error(const pt_error_event &e);
  void on_batch(const pt_batch_event &e);
  void on_gpu_config(const pt_gpu_config_event &e);
  void on_clone(const pt_clone_event &e);
  void on_kernel(const pt_kernel_event &e);
  void on_memory_record(const pt_kernel_event &e, KernelRecord *k);
  void add_memory_profile();
  void on_capture(const pt_capture_event &e, const void *data, size_t size);
  void on_meta(const pt_meta_event &e);
  void on_nvtx(const pt_nvtx_event &e);
  void on_nvtx_resource(const pt_nvtx_resource_event &e);
  void on_nvtx_thread_exit(const pt_header &h);
  void emit_stack(uint32_t id);
  void print_line(const Json &j) const;

  const Options &opt_;
  FILE *const report_out_;  // the text report: stdout, or stderr when stdout carries --folded=-
  Symbolizer symbolizer_;
  StackTable stacks_;
  StackResolver resolver_;
  DwarfUnwinder unwinder_;
  Joiner joiner_;
  CaptureSites captures_;
  GpuProfile profile_, interval_profile_;
  DeviceProfile devices_;
  ProcessTable processes_;  // pid, comm, rank of each process heard from: the profile's origins
  KernelTable table_{report_out_};
  MmapTracker *mmaps_ = nullptr;
  MmapTracker::Hooks hooks_;
  std::unordered_set<uint32_t> seen_pids_, emitted_stacks_;
  PythonFrames python_;
  AutogradNames autograd_names_;
  std::unordered_set<std::string> torch_files_;  // libtorch_cpu.so files seen (path|dev|inode)
  uint64_t python_map_full_ = 0;  // Python processes the BPF map refused (warned once)
  // When each process started (CLOCK_MONOTONIC, 0 unknown): the timestamp check's bound.
  std::unordered_map<uint32_t, uint64_t> process_start_;
  uint64_t last_process_start_ns_ = 0;  // of last_pid_
  uint32_t last_pid_ = 0;
  bool have_pid_ = false;
  Counters meta_;  // figures counted here rather than in the joiner
  // The kinds of loss warn_of_losses said already (each once): a bit per row of its table.
  unsigned losses_said_ = 0;
  uint64_t malformed_ = 0;
  std::vector<std::unique_ptr<Extension>> extensions_;
  MemoryProfile *memory_ = nullptr;  // copies and fills, one of extensions_
  NvtxRanges nvtx_;  // --nvtx: each thread's open ranges, put at the root of its launches' stacks
};

}  // namespace parcagpu::trace
