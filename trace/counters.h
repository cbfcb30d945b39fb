// Every counter of parcagpu-trace's summary, written once. The table generates the fields of
// `Counters` (the counting part of `Summary`, trace/joiner.h), the keys of the JSON summary
// (trace/report.cc: the counters come first, in this order, which the tests and GPU scripts rely
// on), the lines of -v's "Counters:" section, and `parcagpu-trace --list-counters`, which the
// Python tests read (tests/integration/harness.py: COUNTER) rather than spelling the keys again.
//
// X(kind, name, text, label, help)
//   kind   count: uint64_t; seconds: double (rounded to ms in JSON); by_cbid: {signed cbid: n};
//          by_name: {kernel name: records, matched}
//   name   the field and its JSON key
//   text   where -v prints it among the counters (1 first; 0: not a line of its own)
//   label  its -v line
//   help   what it counts
//
// Components that count keep a `Counters` of their own (the joiner, the capture sites, the
// tracer) and the summary adds them up (add_counters), so a counter is named here and where it is
// counted, nowhere else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace parcagpu::trace {

#define PARCAGPU_TRACE_COUNTERS(X)                                                                           \
  X(count, correlations, 0, "", "cuda_correlation events: launches announced")                               \
  X(by_cbid, correlations_by_cbid, 0, "", "launches announced by signed cbid")                               \
  X(count, kernel_records, 1, "kernel records (activity_batch)", "every kernel record read (activity_batch)") \
  X(count, graph_kernel_records, 2, "  of graph launches (graphId != 0)", "kernel records with graphId != 0") \
  X(count, kernels_matched, 3, "kernels matched", "kernel records matched to their launch")                  \
  X(count, graph_kernels_matched, 4, "  graph kernels matched", "of which graph kernels")                    \
  X(count, orphan_kernels, 6, "orphan kernels (no correlation)",                                             \
    "kernel records whose correlation never came (forgotten ones included)")                                 \
  X(count, orphan_correlations_eager, 7, "orphan correlations, eager",                                       \
    "eager launches that never got a kernel (forgotten ones included)")                                      \
  X(count, orphan_correlations_graph, 8, "orphan correlations, graph",                                       \
    "graph launches that never got a kernel (forgotten ones included)")                                      \
  X(count, graph_launches_with_kernels, 5, "graph launches with kernels", "graph launches that got kernels")  \
  X(count, ringbuf_drops, 26, "ring-buffer drops", "events that found the ring buffer full (BPF)")           \
  X(count, read_errors, 27, "probe read errors", "failed bpf_usdt_arg / bpf_probe_read_user* (BPF)")         \
  X(count, errors, 25, "library errors (error probe)", "error probe firings received")                       \
  X(count, events, 0, "", "ring-buffer events received")                                                     \
  X(seconds, duration_s, 0, "", "seconds traced")                                                            \
  X(seconds, events_per_s, 0, "", "events per second traced")                                                \
  X(count, pids, 0, "", "processes heard from")                                                              \
  X(count, gpu_config, 20, "gpu_config", "gpu_config firings")                                               \
  X(by_name, kernels_by_name, 0, "", "kernel records and matched kernels by kernel name")                    \
  X(by_cbid, matched_by_cbid, 0, "", "matched kernels by their launch's signed cbid")                        \
  X(count, kernel_executed_events, 16, "kernel_executed firings", "kernel_executed firings (not a kernel source)") \
  X(count, activity_batches, 17, "activity_batch firings", "activity_batch firings")                         \
  X(count, batch_records_over_cap, 18, "records over the 128 cap (ignored)",                                 \
    "records beyond 128 in one activity_batch firing, not read")                                             \
  X(count, records_other_kind, 19, "records of other kinds (skipped)", "activity records of other kinds, skipped") \
  X(count, duplicate_correlations, 9, "duplicate correlations",                                              \
    "a (pid, ID) announced again while still waiting")                                                       \
  X(count, kernels_ignored_at_exit, 10, "unmatched kernels ignored at exit",                                 \
    "unmatched kernels after cuda_correlation began to detach")                                              \
  X(count, cubin_loaded, 21, "cubin_loaded", "cubin_loaded firings")                                         \
  X(count, cubin_unloaded, 22, "cubin_unloaded", "cubin_unloaded firings")                                   \
  X(count, stall_reason_maps, 23, "stall_reason_map", "stall_reason_map firings")                            \
  X(count, pc_sample_batches, 24, "pc_sample_batch firings", "pc_sample_batch firings")                      \
  X(count, pc_sample_records, 0, "", "PC sample records read (BPF)")                                         \
  X(count, graph_capture_launches, 44, "graph_capture_launch events", "graph_capture_launch events received") \
  X(count, graph_node_clones, 45, "graph_node_clone events", "graph_node_clone events (re-fires included)")   \
  X(count, graph_kernels_with_capture_site, 46, "graph kernels with a capture site",                         \
    "graph kernel records whose node leads to a captured launch")                                            \
  X(count, graph_kernels_without_capture_site, 47, "graph kernels without one",                              \
    "graph kernel records without (explicitly built graphs, conditional bodies)")                            \
  X(count, capture_processes_forgotten, 0, "", "capture state of exited processes dropped")                  \
  X(count, capture_entries_forgotten, 0, "", "capture sites / clones dropped at the cap")                    \
  X(count, forgotten_correlations_eager, 11, "forgotten launches without kernel, eager",                     \
    "eager launches that waited --max-age for a kernel (orphans too)")                                       \
  X(count, forgotten_correlations_graph, 12, "forgotten launches without kernel, graph",                     \
    "graph launches that waited --max-age for a kernel (orphans too)")                                       \
  X(count, forgotten_kernels, 13, "forgotten kernels without launch",                                        \
    "kernel records that waited --max-age for their launch (orphans too)")                                   \
  X(count, retired_graph_launches, 14, "graph launches retired (idle max-age)",                              \
    "graph launches with kernels, idle for --max-age")                                                       \
  X(count, joiner_peak_entries, 15, "joiner peak entries", "launches + kernels the joiner held at most")      \
  X(count, joiner_max_entries, 0, "", "--max-pending")                                                       \
  X(seconds, joiner_max_age_s, 0, "", "--max-age")                                                           \
  X(count, stacks_dropped, 28, "stacks dropped (ring full)", "events sent without their stack (ring buffer full)") \
  X(count, stack_errors, 29, "stack walk errors", "bpf_get_stack failures")                                  \
  X(count, stack_copy_bytes, 33, "  stack bytes copied", "user stack bytes copied for DWARF unwinding")       \
  X(count, stack_copy_errors, 0, "", "stack copies that failed (frame pointers used)") \
  X(count, dwarf_stacks, 30, "stacks unwound by DWARF CFI", "stacks unwound by DWARF CFI")                   \
  X(count, dwarf_stacks_failed, 31, "  stack copies not unwound (frame pointers used)",                      \
    "copies that unwound no further than the probe (frame pointers used); -v's line adds stack_copy_errors") \
  X(count, dwarf_stacks_ended_outside_code, 32, "  ended at an address in no module",                        \
    "DWARF unwinds that stopped at an address in no module")                                                 \
  X(count, stacks_cut_at_non_code, 34, "stacks cut at a frame in no code",                                   \
    "distinct frame-pointer stacks cut at a frame in no file's code")                                        \
  X(count, python_processes, 35, "Python processes", "processes found to run CPython 3.11-3.13")             \
  X(count, python_stacks, 36, "stacks with Python frames", "launch stacks that carried Python frames")        \
  X(count, python_frames, 37, "  Python frames", "Python frames those launches carried (shims not counted)")  \
  X(count, python_frame_read_errors, 38, "  code objects unreadable",                                        \
    "code objects unreadable (a \"[python] ?\" frame), per code object")                                     \
  X(count, python_merge_mismatches, 39, "  stacks with unpaired loop frames",                                \
    "distinct stacks whose interpreter frames and Python runs did not pair up")                              \
  X(count, python_no_thread, 40, "  launches, thread not in Python",                                         \
    "launches in a Python process from a thread Python does not know (BPF)")                                 \
  X(count, python_read_errors, 41, "  frame chain read errors", "thread-state or frame pointers unreadable (BPF)") \
  X(count, python_truncated, 42, "  frame chains cut at 64", "chains longer than PT_PY_FRAMES_MAX (BPF)")    \
  X(count, distinct_stacks, 43, "distinct stacks", "distinct launch stacks")                                 \
  X(count, stack_table_overflows, 0, "", "stacks beyond the stack table's 65536")                            \
  X(count, gpu_ns_matched, 0, "", "GPU time of the matched kernels")                                         \
  X(count, stacks_total, 0, "", "rows of GPU time by stack before the top-N cut")

struct NameCounts {
  uint64_t records = 0;
  uint64_t matched = 0;
};

using counter_count = uint64_t;
using counter_seconds = double;
using counter_by_cbid = std::map<int32_t, uint64_t>;
using counter_by_name = std::map<std::string, NameCounts>;

struct Counters {
#define PARCAGPU_COUNTER_FIELD(kind, name, text, label, help) counter_##kind name{};
  PARCAGPU_TRACE_COUNTERS(PARCAGPU_COUNTER_FIELD)
#undef PARCAGPU_COUNTER_FIELD
};

// One row of the table, for code that walks it (the -v lines, --list-counters).
struct CounterInfo {
  const char *kind, *name;
  int text;
  const char *label, *help;
};
inline constexpr CounterInfo kCounters[] = {
#define PARCAGPU_COUNTER_INFO(kind, name, text, label, help) {#kind, #name, text, label, help},
    PARCAGPU_TRACE_COUNTERS(PARCAGPU_COUNTER_INFO)
#undef PARCAGPU_COUNTER_INFO
};

// f(info, field) for every counter of c, in the table's order (field: const counter_KIND &).
template <class F>
void for_each_counter(const Counters &c, F &&f) {
  size_t i = 0;
#define PARCAGPU_COUNTER_VISIT(kind, name, text, label, help) f(kCounters[i++], c.name);
  PARCAGPU_TRACE_COUNTERS(PARCAGPU_COUNTER_VISIT)
#undef PARCAGPU_COUNTER_VISIT
}

// to += from, counter by counter (maps key by key): the summary adds up what each part counted.
void add_counters(Counters *to, const Counters &from);

}  // namespace parcagpu::trace
