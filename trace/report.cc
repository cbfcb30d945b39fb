#include "report.h"

#include <cinttypes>

#include "parcagpu/cbid_table.h"

namespace parcagpu::trace {

const char *api_name(int32_t signed_cbid) { return parcagpu::launch_api_name(signed_cbid); }

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c >= 0x7f) {
          // Names are truncated byte-wise in BPF and may end mid-UTF-8: escape every non-ASCII
          // byte so the output is always valid JSON.
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

namespace {

class JsonObject {
 public:
  explicit JsonObject(std::string *out) : out_(out) { *out_ += '{'; }
  ~JsonObject() { *out_ += '}'; }
  void key(std::string_view k) {
    if (!first_) *out_ += ", ";
    first_ = false;
    *out_ += '"';
    *out_ += json_escape(k);
    *out_ += "\": ";
  }
  void num(std::string_view k, uint64_t v) {
    key(k);
    *out_ += std::to_string(v);
  }
  void str(std::string_view k, std::string_view v) {
    key(k);
    *out_ += '"';
    *out_ += json_escape(v);
    *out_ += '"';
  }
  void real(std::string_view k, double v) {
    key(k);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    *out_ += buf;
  }
  void by_cbid(std::string_view k, const std::map<int32_t, uint64_t> &m) {
    key(k);
    JsonObject o(out_);
    for (const auto &[cbid, n] : m) o.num(std::to_string(cbid), n);
  }

 private:
  std::string *out_;
  bool first_ = true;
};

}  // namespace

std::string summary_json(const Summary &s) {
  std::string out;
  {
    JsonObject o(&out);
    o.num("correlations", s.correlations);
    o.by_cbid("correlations_by_cbid", s.correlations_by_cbid);
    o.num("kernel_records", s.kernel_records);
    o.num("graph_kernel_records", s.graph_kernel_records);
    o.num("kernels_matched", s.kernels_matched);
    o.num("graph_kernels_matched", s.graph_kernels_matched);
    o.num("orphan_kernels", s.orphan_kernels);
    o.num("orphan_correlations_eager", s.orphan_correlations_eager);
    o.num("orphan_correlations_graph", s.orphan_correlations_graph);
    o.num("graph_launches_with_kernels", s.graph_launches_with_kernels);
    o.num("ringbuf_drops", s.ringbuf_drops);
    o.num("read_errors", s.read_errors);
    o.num("errors", s.errors);
    o.num("events", s.events);
    o.real("duration_s", s.duration_s);
    o.real("events_per_s", s.events_per_s);
    o.num("pids", s.pids);
    o.num("gpu_config", s.gpu_config);
    o.key("kernels_by_name");
    {
      JsonObject names(&out);
      for (const auto &[name, c] : s.kernels_by_name) {
        names.key(name);
        JsonObject nc(&out);
        nc.num("records", c.records);
        nc.num("matched", c.matched);
      }
    }
    o.by_cbid("matched_by_cbid", s.matched_by_cbid);
    o.num("kernel_executed_events", s.kernel_executed_events);
    o.num("activity_batches", s.activity_batches);
    o.num("batch_records_over_cap", s.batch_records_over_cap);
    o.num("records_other_kind", s.records_other_kind);
    o.num("duplicate_correlations", s.duplicate_correlations);
    o.num("kernels_ignored_at_exit", s.kernels_ignored_at_exit);
    o.num("cubin_loaded", s.cubin_loaded);
    o.num("cubin_unloaded", s.cubin_unloaded);
    o.num("stall_reason_maps", s.stall_reason_maps);
    o.num("pc_sample_batches", s.pc_sample_batches);
    o.num("pc_sample_records", s.pc_sample_records);
    o.num("graph_capture_launches", s.graph_capture_launches);
    o.num("graph_node_clones", s.graph_node_clones);
    o.num("graph_kernels_with_capture_site", s.graph_kernels_with_capture_site);
    o.num("graph_kernels_without_capture_site", s.graph_kernels_without_capture_site);
    o.num("capture_stacks_dropped", s.capture_stacks_dropped);
    if (s.capture_sites_enabled) {
      o.key("capture_sites");
      out += '[';
      bool first = true;
      for (const CaptureSiteSummary &c : s.capture_sites) {
        if (!first) out += ", ";
        first = false;
        JsonObject site(&out);
        site.str("kernel", c.kernel);
        site.num("records", c.records);
        site.num("total_ns", c.total_ns);
        site.str("captured_at", c.captured_at);
        site.key("stack");
        out += '[';
        for (size_t i = 0; i < c.stack.size(); ++i) {
          if (i) out += ", ";
          out += '"' + json_escape(c.stack[i]) + '"';
        }
        out += ']';
      }
      out += ']';
    }
  }
  return out;
}

void print_summary(FILE *f, const Summary &s) {
  auto line = [f](const char *label, uint64_t v) { std::fprintf(f, "  %-34s %12" PRIu64 "\n", label, v); };
  std::fprintf(f, "\nparcagpu-trace summary: %.3f s, %" PRIu64 " events (%.0f/s) from %" PRIu64
                  " process%s\n",
               s.duration_s, s.events, s.events_per_s, s.pids, s.pids == 1 ? "" : "es");
  line("correlations (cuda_correlation)", s.correlations);
  for (const auto &[cbid, n] : s.correlations_by_cbid) {
    char label[96];
    std::snprintf(label, sizeof label, "  %s (%d)%s", api_name(cbid), cbid,
                  is_graph_cbid(cbid) ? " [graph]" : "");
    uint64_t m = 0;
    if (auto it = s.matched_by_cbid.find(cbid); it != s.matched_by_cbid.end()) m = it->second;
    std::fprintf(f, "  %-34s %12" PRIu64 "   kernels matched %" PRIu64 "\n", label, n, m);
  }
  line("kernel records (activity_batch)", s.kernel_records);
  line("  of graph launches (graphId != 0)", s.graph_kernel_records);
  line("kernels matched", s.kernels_matched);
  line("  graph kernels matched", s.graph_kernels_matched);
  line("graph launches with kernels", s.graph_launches_with_kernels);
  line("orphan kernels (no correlation)", s.orphan_kernels);
  line("orphan correlations, eager", s.orphan_correlations_eager);
  line("orphan correlations, graph", s.orphan_correlations_graph);
  line("kernel_executed firings", s.kernel_executed_events);
  line("activity_batch firings", s.activity_batches);
  line("records over the 128 cap (ignored)", s.batch_records_over_cap);
  line("records of other kinds (skipped)", s.records_other_kind);
  if (s.duplicate_correlations) line("duplicate correlations", s.duplicate_correlations);
  if (s.kernels_ignored_at_exit) line("unmatched kernels ignored at exit", s.kernels_ignored_at_exit);
  line("gpu_config", s.gpu_config);
  line("cubin_loaded", s.cubin_loaded);
  line("cubin_unloaded", s.cubin_unloaded);
  line("stall_reason_map", s.stall_reason_maps);
  line("pc_sample_batch firings", s.pc_sample_batches);
  line("library errors (error probe)", s.errors);
  line("ring-buffer drops", s.ringbuf_drops);
  line("probe read errors", s.read_errors);
  line("graph_capture_launch events", s.graph_capture_launches);
  line("graph_node_clone events", s.graph_node_clones);
  line("graph kernels with a capture site", s.graph_kernels_with_capture_site);
  line("graph kernels without one", s.graph_kernels_without_capture_site);
  if (s.capture_stacks_dropped) line("capture stacks dropped (ring full)", s.capture_stacks_dropped);
  if (!s.kernels_by_name.empty()) {
    std::fprintf(f, "  kernels by name (records / matched):\n");
    for (const auto &[name, c] : s.kernels_by_name)
      std::fprintf(f, "    %10" PRIu64 " %10" PRIu64 "  %s\n", c.records, c.matched,
                   name.empty() ? "(no name)" : name.c_str());
  }
  if (s.capture_sites_enabled) print_capture_sites(f, s);
}

void print_capture_sites(FILE *f, const Summary &s) {
  std::fprintf(f, "  capture sites (graph kernels by kernel and capture stack; ? = found by stack scan):\n");
  if (s.capture_sites.empty()) {
    std::fprintf(f, "    none%s\n", s.graph_capture_launches ? "" : " (no graph_capture_launch seen)");
    return;
  }
  for (const CaptureSiteSummary &c : s.capture_sites) {
    std::fprintf(f, "    %s: %" PRIu64 " record%s, %.3f ms GPU\n",
                 c.kernel.empty() ? "(no name)" : c.kernel.c_str(), c.records,
                 c.records == 1 ? "" : "s", static_cast<double>(c.total_ns) * 1e-6);
    if (c.stack.empty()) {
      std::fprintf(f, "      (no stack recorded)\n");
      continue;
    }
    std::fprintf(f, "      captured at %s\n", c.captured_at.c_str());
    for (size_t i = 0; i < c.stack.size(); ++i)
      std::fprintf(f, "      %s #%-2zu %s\n", static_cast<int>(i) == c.captured_at_index ? "=>" : "  ",
                   i, c.stack[i].c_str());
  }
}

void KernelTable::header() {
  std::fprintf(out_, "%-12s %10s %3s %5s %6s %10s %7s %-30s %s\n", "START(s)", "DUR(us)", "DEV",
               "STRM", "GRAPH", "CORR", "PID", "API", "KERNEL");
}

void KernelTable::row(const KernelRecord &k, const Joiner::Match &m, const CaptureNote *note) {
  if (!have_base_) {
    base_ns_ = k.start;
    have_base_ = true;
  }
  const double t = (static_cast<double>(k.start) - static_cast<double>(base_ns_)) * 1e-9;
  const double dur = k.end >= k.start ? static_cast<double>(k.end - k.start) * 1e-3 : -1.0;
  char api[48];
  if (m.matched)
    std::snprintf(api, sizeof api, "%s(%d)", api_name(m.signed_cbid), m.signed_cbid);
  else
    std::snprintf(api, sizeof api, "-");
  std::fprintf(out_, "%-12.6f %10.3f %3u %5u %6u %10u %7u %-30s %.*s", t, dur, k.device_id,
               k.stream_id, k.graph_id, k.correlation_id, k.pid, api,
               static_cast<int>(k.name.size()), k.name.data());
  if (note) {
    std::fprintf(out_, "  <- captured at %.*s\n", static_cast<int>(note->captured_at.size()),
                 note->captured_at.data());
    if (note->stack)  // the first kernel of this capture stack: the whole stack, once
      for (const std::string &fr : *note->stack) std::fprintf(out_, "%14s| %s\n", "", fr.c_str());
  } else {
    std::fputc('\n', out_);
  }
}

}  // namespace parcagpu::trace
