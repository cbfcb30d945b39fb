#include "report.h"

#include <cinttypes>
#include <cmath>

#include "parcagpu/cbid_table.h"

namespace parcagpu::trace {

const char *api_name(int32_t signed_cbid) { return parcagpu::launch_api_name(signed_cbid); }

std::string json_line(const Json &j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string human_ns(uint64_t ns) {
  char buf[32];
  if (ns >= 1000000000ull)
    std::snprintf(buf, sizeof buf, "%.3f s", ns * 1e-9);
  else if (ns >= 1000000ull)
    std::snprintf(buf, sizeof buf, "%.3f ms", ns * 1e-6);
  else
    std::snprintf(buf, sizeof buf, "%.3f us", ns * 1e-3);
  return buf;
}

namespace {

Json by_cbid(const std::map<int32_t, uint64_t> &m) {
  Json o = Json::object();
  for (const auto &[cbid, n] : m) o[std::to_string(cbid)] = n;
  return o;
}

double rounded(double v) { return std::round(v * 1000.0) / 1000.0; }

}  // namespace

Json devices_json(const std::vector<DeviceSummary> &devices) {
  Json out = Json::array();
  for (const DeviceSummary &d : devices) {
    Json ks = Json::array();
    for (const StackKernelSummary &k : d.by_kernel)
      ks.push_back({{"kernel", k.kernel}, {"demangled", k.kernel_demangled}, {"gpu_ns", k.gpu_ns},
                    {"kernels", k.kernels}});
    out.push_back({{"device", d.device},
                   {"kernels", d.kernels},
                   {"kernel_records", d.kernel_records},
                   {"gpu_ns", d.gpu_ns},
                   {"pids", d.pids},
                   {"kernel_names", d.kernel_names},
                   {"by_kernel", std::move(ks)}});
  }
  return out;
}

Json summary_json(const Summary &s) {
  Json o;
  // The keys tests and GPU scripts rely on first, in this order.
  o["correlations"] = s.correlations;
  o["correlations_by_cbid"] = by_cbid(s.correlations_by_cbid);
  o["kernel_records"] = s.kernel_records;
  o["graph_kernel_records"] = s.graph_kernel_records;
  o["kernels_matched"] = s.kernels_matched;
  o["graph_kernels_matched"] = s.graph_kernels_matched;
  o["orphan_kernels"] = s.orphan_kernels;
  o["orphan_correlations_eager"] = s.orphan_correlations_eager;
  o["orphan_correlations_graph"] = s.orphan_correlations_graph;
  o["graph_launches_with_kernels"] = s.graph_launches_with_kernels;
  o["ringbuf_drops"] = s.ringbuf_drops;
  o["read_errors"] = s.read_errors;
  o["errors"] = s.errors;
  o["events"] = s.events;
  o["duration_s"] = rounded(s.duration_s);
  o["events_per_s"] = rounded(s.events_per_s);
  o["pids"] = s.pids;
  o["gpu_config"] = s.gpu_config;
  Json names = Json::object();
  for (const auto &[name, c] : s.kernels_by_name) {
    Json n;
    n["records"] = c.records;
    n["matched"] = c.matched;
    if (std::string d = demangle(name); d != name) n["demangled"] = d;
    names[name] = std::move(n);
  }
  o["kernels_by_name"] = std::move(names);
  o["matched_by_cbid"] = by_cbid(s.matched_by_cbid);
  o["kernel_executed_events"] = s.kernel_executed_events;
  o["activity_batches"] = s.activity_batches;
  o["batch_records_over_cap"] = s.batch_records_over_cap;
  o["records_other_kind"] = s.records_other_kind;
  o["duplicate_correlations"] = s.duplicate_correlations;
  o["kernels_ignored_at_exit"] = s.kernels_ignored_at_exit;
  o["cubin_loaded"] = s.cubin_loaded;
  o["cubin_unloaded"] = s.cubin_unloaded;
  o["stall_reason_maps"] = s.stall_reason_maps;
  o["pc_sample_batches"] = s.pc_sample_batches;
  o["pc_sample_records"] = s.pc_sample_records;
  o["graph_capture_launches"] = s.graph_capture_launches;
  o["graph_node_clones"] = s.graph_node_clones;
  o["graph_kernels_with_capture_site"] = s.graph_kernels_with_capture_site;
  o["graph_kernels_without_capture_site"] = s.graph_kernels_without_capture_site;
  o["capture_processes_forgotten"] = s.capture_processes_forgotten;
  o["capture_entries_forgotten"] = s.capture_entries_forgotten;
  o["forgotten_correlations_eager"] = s.forgotten_correlations_eager;
  o["forgotten_correlations_graph"] = s.forgotten_correlations_graph;
  o["forgotten_kernels"] = s.forgotten_kernels;
  o["retired_graph_launches"] = s.retired_graph_launches;
  o["joiner_peak_entries"] = s.joiner_peak_entries;
  o["joiner_max_entries"] = s.joiner_max_entries;
  o["joiner_max_age_s"] = rounded(s.joiner_max_age_s);
  o["stacks_dropped"] = s.stacks_dropped;
  o["stack_errors"] = s.stack_errors;
  o["stack_copy_bytes"] = s.stack_copy_bytes;
  o["stack_copy_errors"] = s.stack_copy_errors;
  o["dwarf_stacks"] = s.dwarf_stacks;
  o["dwarf_stacks_failed"] = s.dwarf_stacks_failed;
  o["dwarf_stacks_ended_outside_code"] = s.dwarf_stacks_ended_outside_code;
  o["stacks_cut_at_non_code"] = s.stacks_cut_at_non_code;
  o["python_processes"] = s.python_processes;
  o["python_stacks"] = s.python_stacks;
  o["python_frames"] = s.python_frames;
  o["python_frame_read_errors"] = s.python_frame_read_errors;
  o["python_merge_mismatches"] = s.python_merge_mismatches;
  o["python_no_thread"] = s.python_no_thread;
  o["python_read_errors"] = s.python_read_errors;
  o["python_truncated"] = s.python_truncated;
  o["distinct_stacks"] = s.distinct_stacks;
  o["stack_table_overflows"] = s.stack_table_overflows;
  o["gpu_ns_matched"] = s.gpu_ns_matched;
  o["stacks_total"] = s.stacks_total;
  Json rows = Json::array();
  for (const StackSummary &r : s.gpu_time_by_stack) {
    Json row;
    row["stack_id"] = r.stack_id;
    row["gpu_ns"] = r.gpu_ns;
    row["kernels"] = r.kernels;
    row["frames"] = r.frames;
    Json ks = Json::array();
    for (const StackKernelSummary &k : r.by_kernel)
      ks.push_back({{"kernel", k.kernel}, {"demangled", k.kernel_demangled}, {"gpu_ns", k.gpu_ns},
                    {"kernels", k.kernels}});
    row["by_kernel"] = std::move(ks);
    rows.push_back(std::move(row));
  }
  o["gpu_time_by_stack"] = std::move(rows);
  o["gpu_time_by_device"] = devices_json(s.gpu_time_by_device);
  o["libraries"] = s.libraries;
  if (s.capture_sites_enabled) {
    Json sites = Json::array();
    for (const CaptureSiteSummary &c : s.capture_sites)
      sites.push_back({{"kernel", c.kernel},
                       {"demangled", c.kernel_demangled},
                       {"records", c.records},
                       {"total_ns", c.total_ns},
                       {"captured_at", c.captured_at},
                       {"stack", c.stack}});
    o["capture_sites"] = std::move(sites);
  }
  return o;
}

void print_stack_table(FILE *f, const char *title, const std::vector<StackSummary> &rows,
                       uint64_t total_ns, uint64_t total_kernels, uint64_t total_stacks) {
  std::fprintf(f, "%s: %s of GPU time in %" PRIu64 " kernels, %" PRIu64 " stack%s%s\n", title,
               human_ns(total_ns).c_str(), total_kernels, total_stacks, total_stacks == 1 ? "" : "s",
               rows.size() < total_stacks ? (", top " + std::to_string(rows.size()) + " shown").c_str() : "");
  if (rows.empty()) {
    std::fprintf(f, "  (no kernel matched to a launch)\n");
    return;
  }
  constexpr size_t kKernelsShown = 4, kFramesShown = 12;
  for (size_t i = 0; i < rows.size(); ++i) {
    const StackSummary &r = rows[i];
    std::fprintf(f, "  #%-2zu %12s %6.1f%% %8" PRIu64 " kernels\n", i + 1, human_ns(r.gpu_ns).c_str(),
                 total_ns ? 100.0 * r.gpu_ns / total_ns : 0.0, r.kernels);
    for (size_t k = 0; k < r.by_kernel.size() && k < kKernelsShown; ++k) {
      const StackKernelSummary &ks = r.by_kernel[k];
      std::fprintf(f, "       %-9s %12s %8" PRIu64 "  %s\n", k == 0 ? "kernels" : "",
                   human_ns(ks.gpu_ns).c_str(), ks.kernels,
                   ks.kernel.empty() ? "(no name)" : ks.kernel_demangled.c_str());
    }
    if (r.by_kernel.size() > kKernelsShown)
      std::fprintf(f, "       %-9s %zu more kernel names\n", "", r.by_kernel.size() - kKernelsShown);
    for (size_t k = 0; k < r.frames.size() && k < kFramesShown; ++k)
      std::fprintf(f, "       %-9s %s\n", k == 0 ? "stack" : "", r.frames[k].c_str());
    if (r.frames.size() > kFramesShown)
      std::fprintf(f, "       %-9s ... %zu outer frames\n", "", r.frames.size() - kFramesShown);
  }
}

void print_device_table(FILE *f, const std::vector<DeviceSummary> &devices) {
  uint64_t total_ns = 0, kernels = 0;
  for (const DeviceSummary &d : devices) {
    total_ns += d.gpu_ns;
    kernels += d.kernels;
  }
  std::fprintf(f, "GPU time by device: %s of GPU time in %" PRIu64 " kernels, %zu device%s\n",
               human_ns(total_ns).c_str(), kernels, devices.size(), devices.size() == 1 ? "" : "s");
  for (const DeviceSummary &d : devices) {
    std::fprintf(f, "  device %-3u %12s %6.1f%% %8" PRIu64 " kernels", d.device, human_ns(d.gpu_ns).c_str(),
                 total_ns ? 100.0 * d.gpu_ns / total_ns : 0.0, d.kernels);
    if (d.kernel_records != d.kernels) std::fprintf(f, " of %" PRIu64 " records", d.kernel_records);
    if (d.pids > 1) std::fprintf(f, ", %" PRIu64 " processes", d.pids);
    if (!d.by_kernel.empty()) {
      const StackKernelSummary &top = d.by_kernel.front();
      std::fprintf(f, "   top %s %.1f%%", top.kernel.empty() ? "(no name)" : top.kernel_demangled.c_str(),
                   d.gpu_ns ? 100.0 * top.gpu_ns / d.gpu_ns : 0.0);
    }
    std::fprintf(f, "\n");
  }
}

void print_capture_sites(FILE *f, const Summary &s) {
  std::fprintf(f, "Capture sites (graph kernels by kernel and capture stack):\n");
  if (s.capture_sites.empty()) {
    std::fprintf(f, "  none%s\n", s.graph_capture_launches ? "" : " (no graph_capture_launch seen)");
    return;
  }
  for (const CaptureSiteSummary &c : s.capture_sites) {
    std::fprintf(f, "  %s: %" PRIu64 " record%s, %s GPU\n",
                 c.kernel.empty() ? "(no name)" : c.kernel_demangled.c_str(), c.records,
                 c.records == 1 ? "" : "s", human_ns(c.total_ns).c_str());
    if (c.stack.empty()) {
      std::fprintf(f, "    (no stack recorded)\n");
      continue;
    }
    std::fprintf(f, "    captured at %s\n", c.captured_at.c_str());
    for (size_t i = 0; i < c.stack.size(); ++i)
      std::fprintf(f, "    %s #%-2zu %s\n", static_cast<int>(i) == c.captured_at_index ? "=>" : "  ",
                   i, c.stack[i].c_str());
  }
}

namespace {

void print_counters(FILE *f, const Summary &s) {
  auto line = [f](const char *label, uint64_t v) { std::fprintf(f, "  %-38s %12" PRIu64 "\n", label, v); };
  std::fprintf(f, "Counters:\n");
  for (const auto &[cbid, n] : s.correlations_by_cbid) {
    char label[96];
    std::snprintf(label, sizeof label, "launches %s (%d)%s", api_name(cbid), cbid,
                  is_graph_cbid(cbid) ? " [graph]" : "");
    uint64_t m = 0;
    if (auto it = s.matched_by_cbid.find(cbid); it != s.matched_by_cbid.end()) m = it->second;
    std::fprintf(f, "  %-38s %12" PRIu64 "   kernels matched %" PRIu64 "\n", label, n, m);
  }
  line("kernel records (activity_batch)", s.kernel_records);
  line("  of graph launches (graphId != 0)", s.graph_kernel_records);
  line("kernels matched", s.kernels_matched);
  line("  graph kernels matched", s.graph_kernels_matched);
  line("graph launches with kernels", s.graph_launches_with_kernels);
  line("orphan kernels (no correlation)", s.orphan_kernels);
  line("orphan correlations, eager", s.orphan_correlations_eager);
  line("orphan correlations, graph", s.orphan_correlations_graph);
  line("duplicate correlations", s.duplicate_correlations);
  line("unmatched kernels ignored at exit", s.kernels_ignored_at_exit);
  line("forgotten launches without kernel, eager", s.forgotten_correlations_eager);
  line("forgotten launches without kernel, graph", s.forgotten_correlations_graph);
  line("forgotten kernels without launch", s.forgotten_kernels);
  line("graph launches retired (idle max-age)", s.retired_graph_launches);
  line("joiner peak entries", s.joiner_peak_entries);
  line("kernel_executed firings", s.kernel_executed_events);
  line("activity_batch firings", s.activity_batches);
  line("records over the 128 cap (ignored)", s.batch_records_over_cap);
  line("records of other kinds (skipped)", s.records_other_kind);
  line("gpu_config", s.gpu_config);
  line("cubin_loaded", s.cubin_loaded);
  line("cubin_unloaded", s.cubin_unloaded);
  line("stall_reason_map", s.stall_reason_maps);
  line("pc_sample_batch firings", s.pc_sample_batches);
  line("library errors (error probe)", s.errors);
  line("ring-buffer drops", s.ringbuf_drops);
  line("probe read errors", s.read_errors);
  line("stacks dropped (ring full)", s.stacks_dropped);
  line("stack walk errors", s.stack_errors);
  line("stacks unwound by DWARF CFI", s.dwarf_stacks);
  line("  stack copies not unwound (frame pointers used)", s.dwarf_stacks_failed + s.stack_copy_errors);
  line("  ended at an address in no module", s.dwarf_stacks_ended_outside_code);
  line("  stack bytes copied", s.stack_copy_bytes);
  line("stacks cut at a frame in no code", s.stacks_cut_at_non_code);
  line("Python processes", s.python_processes);
  line("stacks with Python frames", s.python_stacks);
  line("  Python frames", s.python_frames);
  line("  code objects unreadable", s.python_frame_read_errors);
  line("  stacks with unpaired loop frames", s.python_merge_mismatches);
  line("  launches, thread not in Python", s.python_no_thread);
  line("  frame chain read errors", s.python_read_errors);
  line("  frame chains cut at 64", s.python_truncated);
  line("distinct stacks", s.distinct_stacks);
  line("graph_capture_launch events", s.graph_capture_launches);
  line("graph_node_clone events", s.graph_node_clones);
  line("graph kernels with a capture site", s.graph_kernels_with_capture_site);
  line("graph kernels without one", s.graph_kernels_without_capture_site);
  if (!s.kernels_by_name.empty()) {
    std::fprintf(f, "  kernels by name (records / matched):\n");
    for (const auto &[name, c] : s.kernels_by_name)
      std::fprintf(f, "    %10" PRIu64 " %10" PRIu64 "  %s\n", c.records, c.matched,
                   name.empty() ? "(no name)" : demangle(name).c_str());
  }
}

}  // namespace

void print_summary(FILE *f, const Summary &s, bool verbose) {
  uint64_t eager = 0, graph = 0;
  for (const auto &[cbid, n] : s.correlations_by_cbid) (is_graph_cbid(cbid) ? graph : eager) += n;
  std::fprintf(f, "\nparcagpu-trace: %.1f s, %" PRIu64 " process%s, %zu librar%s", s.duration_s, s.pids,
               s.pids == 1 ? "" : "es", s.libraries.size(), s.libraries.size() == 1 ? "y" : "ies");
  for (size_t i = 0; i < s.libraries.size() && i < 3; ++i)
    std::fprintf(f, "%s%s", i ? ", " : " (", s.libraries[i].c_str());
  std::fprintf(f, "%s\n", s.libraries.empty() ? "" : s.libraries.size() > 3 ? ", ...)" : ")");
  std::fprintf(f, "  launches announced %" PRIu64 " (eager %" PRIu64 ", graph %" PRIu64
                  "); kernels matched %" PRIu64 " of %" PRIu64 " (graph %" PRIu64 "), %s of GPU time\n",
               s.correlations, eager, graph, s.kernels_matched, s.kernel_records, s.graph_kernels_matched,
               human_ns(s.gpu_ns_matched).c_str());
  std::string lost;
  auto add = [&lost](const char *what, uint64_t n) {
    if (n) lost += (lost.empty() ? "" : ", ") + std::string(what) + " " + std::to_string(n);
  };
  add("orphan kernels", s.orphan_kernels);
  add("launches without kernels (eager)", s.orphan_correlations_eager);
  add("launches without kernels (graph)", s.orphan_correlations_graph);
  add("ring-buffer drops", s.ringbuf_drops);
  add("read errors", s.read_errors);
  add("stacks dropped", s.stacks_dropped);
  std::fprintf(f, "  lost: %s\n", lost.empty() ? "nothing (every kernel record matched its launch)" : lost.c_str());
  if (s.forgotten_correlations_eager + s.forgotten_correlations_graph + s.forgotten_kernels)
    std::fprintf(f, "  of which forgotten after %.0f s: launches %" PRIu64 ", kernels %" PRIu64 "\n",
                 s.joiner_max_age_s, s.forgotten_correlations_eager + s.forgotten_correlations_graph,
                 s.forgotten_kernels);
  if (s.errors) std::fprintf(f, "  library errors (error probe): %" PRIu64 "\n", s.errors);
  if (s.kernels_ignored_at_exit)
    std::fprintf(f, "  unmatched kernels of launches announced while detaching: %" PRIu64 "\n",
                 s.kernels_ignored_at_exit);
  std::fprintf(f, "\n");
  if (s.gpu_time_by_device.size() > 1) {  // one device: the stack table says it all
    print_device_table(f, s.gpu_time_by_device);
    std::fprintf(f, "\n");
  }
  print_stack_table(f, s.capture_sites_enabled ? "GPU time by launch stack (graph kernels by capture stack)"
                                               : "GPU time by launch stack",
                    s.gpu_time_by_stack, s.gpu_ns_matched, s.kernels_matched, s.stacks_total);
  if (s.capture_sites_enabled) {
    std::fprintf(f, "\n");
    print_capture_sites(f, s);
  }
  if (verbose) {
    std::fprintf(f, "\n");
    print_counters(f, s);
  }
}

void KernelTable::header() {
  std::fprintf(out_, "%-12s %10s %3s %5s %6s %10s %7s %-26s %-40s %s\n", "START(s)", "DUR(us)", "DEV",
               "STRM", "GRAPH", "CORR", "PID", "API", "KERNEL", "LAUNCHED AT");
}

void KernelTable::row(const KernelRecord &k, const Launch &l, std::string_view kernel,
                      std::string_view site) {
  if (!have_base_) {
    base_ns_ = k.start;
    have_base_ = true;
  }
  const double t = (static_cast<double>(k.start) - static_cast<double>(base_ns_)) * 1e-9;
  const double dur = k.end >= k.start ? static_cast<double>(k.end - k.start) * 1e-3 : -1.0;
  char api[48];
  std::snprintf(api, sizeof api, "%s(%d)", api_name(l.signed_cbid), l.signed_cbid);
  std::fprintf(out_, "%-12.6f %10.3f %3u %5u %6u %10u %7u %-26s %-40.*s %.*s\n", t, dur, k.device_id,
               k.stream_id, k.graph_id, k.correlation_id, k.pid, api, static_cast<int>(kernel.size()),
               kernel.data(), static_cast<int>(site.size()), site.data());
}

}  // namespace parcagpu::trace
