#include "report.h"

#include <cinttypes>
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <type_traits>
#include <utility>

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

// A counter's JSON value, by its kind (tools/trace/counters.h).
Json counter_json(uint64_t v) { return v; }
Json counter_json(double seconds) { return std::round(seconds * 1000.0) / 1000.0; }
Json counter_json(const counter_by_cbid &m) {
  Json o = Json::object();
  for (const auto &[cbid, n] : m) o[std::to_string(cbid)] = n;
  return o;
}
Json counter_json(const counter_by_name &m) {
  Json names = Json::object();
  for (const auto &[name, c] : m) {
    Json n;
    n["records"] = c.records;
    n["matched"] = c.matched;
    if (std::string d = demangle(name); d != name) n["demangled"] = d;
    names[name] = std::move(n);
  }
  return names;
}

// by_kernel of a stack or a device.
Json kernels_json(const std::vector<StackKernelSummary> &kernels) {
  Json ks = Json::array();
  for (const StackKernelSummary &k : kernels)
    ks.push_back({{"kernel", k.kernel}, {"demangled", k.kernel_demangled}, {"gpu_ns", k.gpu_ns},
                  {"kernels", k.kernels}});
  return ks;
}

}  // namespace

Json devices_json(const std::vector<DeviceSummary> &devices) {
  Json out = Json::array();
  for (const DeviceSummary &d : devices) {
    out.push_back({{"device", d.device},
                   {"kernels", d.kernels},
                   {"kernel_records", d.kernel_records},
                   {"gpu_ns", d.gpu_ns},
                   {"pids", d.pids},
                   {"kernel_names", d.kernel_names},
                   {"by_kernel", kernels_json(d.by_kernel)}});
  }
  return out;
}

Json processes_json(const std::vector<ProcessSummary> &processes) {
  Json out = Json::array();
  auto optional = [](const std::optional<int64_t> &v) { return v ? Json(*v) : Json(nullptr); };
  for (const ProcessSummary &p : processes) {
    Json devices = Json::array();
    for (const ProcessSummary::Device &d : p.devices)
      devices.push_back({{"device", d.device}, {"gpu_ns", d.gpu_ns}, {"kernels", d.kernels}});
    out.push_back({{"pid", p.pid},
                   {"comm", p.comm},
                   {"rank", optional(p.rank)},
                   {"local_rank", optional(p.local_rank)},
                   {"gpu_ns", p.gpu_ns},
                   {"kernels", p.kernels},
                   {"devices", std::move(devices)},
                   {"kernel_names", p.kernel_names},
                   {"by_kernel", kernels_json(p.by_kernel)}});
  }
  return out;
}

std::string process_label(const ProcessSummary &p) {
  std::string who;
  if (p.rank) who = "rank " + std::to_string(*p.rank);
  if (p.local_rank) who += (who.empty() ? "" : " ") + std::string("local_rank ") + std::to_string(*p.local_rank);
  if (who.empty()) who = "rank -";
  return who;
}

void print_process_table(FILE *f, const std::vector<ProcessSummary> &processes) {
  uint64_t total_ns = 0, kernels = 0;
  bool ranked = false;
  for (const ProcessSummary &p : processes) {
    total_ns += p.gpu_ns;
    kernels += p.kernels;
    ranked |= p.rank.has_value() || p.local_rank.has_value();
  }
  std::fprintf(f, "GPU time by %s: %s of GPU time in %" PRIu64 " kernels, %zu process%s\n",
               ranked ? "rank" : "process", human_ns(total_ns).c_str(), kernels, processes.size(),
               processes.size() == 1 ? "" : "es");
  for (const ProcessSummary &p : processes) {
    std::string devices;
    for (const ProcessSummary::Device &d : p.devices)
      devices += (devices.empty() ? "" : ",") + std::to_string(d.device);
    std::fprintf(f, "  %-20s pid %-7u %-15s %12s %6.1f%% %8" PRIu64 " kernels   device%s %s", process_label(p).c_str(),
                 p.pid, p.comm.empty() ? "?" : p.comm.c_str(), human_ns(p.gpu_ns).c_str(),
                 total_ns ? 100.0 * p.gpu_ns / total_ns : 0.0, p.kernels, p.devices.size() == 1 ? "" : "s",
                 devices.c_str());
    if (!p.by_kernel.empty()) {
      const StackKernelSummary &top = p.by_kernel.front();
      std::fprintf(f, "   top %s %.1f%%", top.kernel.empty() ? "(no name)" : top.kernel_demangled.c_str(),
                   p.gpu_ns ? 100.0 * top.gpu_ns / p.gpu_ns : 0.0);
    }
    std::fprintf(f, "\n");
  }
}

Json summary_json(const Summary &s) {
  Json o;
  // The keys tests and GPU scripts rely on first, in this order.
  for_each_counter(s, [&o](const CounterInfo &c, const auto &v) { o[c.name] = counter_json(v); });
  Json rows = Json::array();
  for (const StackSummary &r : s.gpu_time_by_stack) {
    Json row;
    row["stack_id"] = r.stack_id;
    row["gpu_ns"] = r.gpu_ns;
    row["kernels"] = r.kernels;
    row["frames"] = r.frames;
    row["by_kernel"] = kernels_json(r.by_kernel);
    rows.push_back(std::move(row));
  }
  o["gpu_time_by_stack"] = std::move(rows);
  o["gpu_time_by_device"] = devices_json(s.gpu_time_by_device);
  o["gpu_time_by_process"] = processes_json(s.gpu_time_by_process);
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

namespace {
// A stack's frames, innermost first, the first `shown` of them; its NVTX ranges (the outermost
// frames, "[nvtx] ...": tools/trace/nvtx_ranges.h) always, where the stack is cut too.
void print_frames(FILE *f, const std::vector<std::string> &frames, size_t shown) {
  size_t ranges = 0;
  while (ranges < frames.size() && frames[frames.size() - 1 - ranges].rfind("[nvtx] ", 0) == 0) ++ranges;
  const size_t n = frames.size(), cut = n > shown + ranges ? n - ranges - shown : 0;
  for (size_t k = 0; k < n; ++k) {
    if (cut && k >= shown && k < n - ranges) {
      if (k == shown)
        std::fprintf(f, "       %-9s ... %zu outer frame%s\n", "", cut, cut == 1 ? "" : "s");
      continue;
    }
    std::fprintf(f, "       %-9s %s\n", k == 0 ? "stack" : "", frames[k].c_str());
  }
}
}  // namespace

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
      std::fprintf(f, "       %-9s %zu more kernel name%s\n", "", r.by_kernel.size() - kKernelsShown,
                   r.by_kernel.size() - kKernelsShown == 1 ? "" : "s");
    print_frames(f, r.frames, kFramesShown);
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
  // The counters with a line of their own, in the table's text order.
  std::vector<std::pair<const CounterInfo *, uint64_t>> lines;
  for_each_counter(s, [&](const CounterInfo &c, const auto &v) {
    if constexpr (std::is_same_v<std::decay_t<decltype(v)>, uint64_t>) {
      if (c.text == 0) return;
      // The line of copies not unwound counts the failed copies too (frame pointers used).
      lines.push_back({&c, &v == &s.dwarf_stacks_failed ? v + s.stack_copy_errors : v});
    }
  });
  std::sort(lines.begin(), lines.end(), [](const auto &a, const auto &b) { return a.first->text < b.first->text; });
  for (const auto &[c, v] : lines) line(c->label, v);
  if (!s.kernels_by_name.empty()) {
    std::fprintf(f, "  kernels by name (records / matched):\n");
    for (const auto &[name, c] : s.kernels_by_name)
      std::fprintf(f, "    %10" PRIu64 " %10" PRIu64 "  %s\n", c.records, c.matched,
                   name.empty() ? "(no name)" : demangle(name).c_str());
  }
}

// "what n, what n, ...": the nonzero counts with what they count, in the order given.
std::string nonzero_counts(std::initializer_list<std::pair<const char *, uint64_t>> counts) {
  std::string text;
  for (const auto &[what, n] : counts)
    if (n) text += (text.empty() ? "" : ", ") + std::string(what) + " " + std::to_string(n);
  return text;
}

// The first lines: how long, which processes and libraries, launches and kernels matched.
void print_headline(FILE *f, const Summary &s) {
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
}

// Every loss the JSON counts, what was forgotten, impossible kernel records, library errors.
void print_losses(FILE *f, const Summary &s) {
  // The losses that had only a -v counter line are the last three.
  const std::string lost = nonzero_counts({{"orphan kernels", s.orphan_kernels},
                                           {"launches without kernels (eager)", s.orphan_correlations_eager},
                                           {"launches without kernels (graph)", s.orphan_correlations_graph},
                                           {"ring-buffer drops", s.ringbuf_drops},
                                           {"metadata ring-buffer drops", s.meta_ringbuf_drops},
                                           {"error firings lost", s.errors_lost},
                                           {"read errors", s.read_errors},
                                           {"stacks dropped", s.stacks_dropped},
                                           {"events left unread at exit", s.events_left_at_exit},
                                           {"records over the activity_batch cap", s.batch_records_over_cap},
                                           {"capture sites forgotten", s.capture_entries_forgotten},
                                           {"stacks beyond the stack table", s.stack_table_overflows}});
  std::fprintf(f, "  lost: %s\n", lost.empty() ? "nothing (every kernel record matched its launch)" : lost.c_str());
  if (s.forgotten_correlations_eager + s.forgotten_correlations_graph + s.forgotten_kernels) {
    std::fprintf(f, "  of which forgotten: launches %" PRIu64 ", kernels %" PRIu64,
                 s.forgotten_correlations_eager + s.forgotten_correlations_graph, s.forgotten_kernels);
    if (s.forgotten_at_max_pending)
      std::fprintf(f, " (%" PRIu64 " of them at --max-pending %" PRIu64 ", the rest after %.0f s)",
                   s.forgotten_at_max_pending, s.joiner_max_entries, s.joiner_max_age_s);
    else
      std::fprintf(f, " (after %.0f s)", s.joiner_max_age_s);
    std::fprintf(f, "\n");
  }
  if (s.impossible_kernel_records) {
    const std::string why = nonzero_counts({{"reversed or 0", s.impossible_reversed},
                                            {"longer than their process", s.impossible_longer_than_process},
                                            {"longer than launch to delivery", s.impossible_longer_than_launch},
                                            {"overlapping their stream", s.impossible_stream_overlap},
                                            {"beyond their device in a second", s.impossible_device_overfull}});
    std::fprintf(f, "  impossible kernel records: %" PRIu64 " of %" PRIu64 " (%s), left out of the GPU time\n",
                 s.impossible_kernel_records, s.kernel_records, why.c_str());
  }
  if (s.error_firings || s.errors)
    std::fprintf(f, "  library errors (error probe): %" PRIu64 " received of %" PRIu64 " fired\n", s.errors,
                 s.error_firings);
  if (s.kernels_ignored_at_exit)
    std::fprintf(f, "  unmatched kernels of launches announced while detaching: %" PRIu64 "\n",
                 s.kernels_ignored_at_exit);
}

}  // namespace

void print_summary(FILE *f, const Summary &s, bool verbose) {
  print_headline(f, s);
  print_losses(f, s);
  std::fprintf(f, "\n");
  if (s.gpu_time_by_process.size() > 1) {  // several ranks (or processes): which spends what
    print_process_table(f, s.gpu_time_by_process);
    std::fprintf(f, "\n");
  }
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

void print_counter_table(FILE *f, bool json) {
  if (json) {
    Json rows = Json::array();
    for (const CounterInfo &c : kCounters)
      rows.push_back({{"name", c.name}, {"kind", c.kind}, {"text", c.text}, {"label", c.label}, {"help", c.help}});
    std::fprintf(f, "%s\n", json_line({{"counters", std::move(rows)}}).c_str());
    return;
  }
  for (const CounterInfo &c : kCounters) std::fprintf(f, "%-36s %-8s %s\n", c.name, c.kind, c.help);
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
