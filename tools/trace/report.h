// Output of parcagpu-trace: the human summary (counts, loss, GPU time by stack, capture sites),
// the live kernel table (-k), the JSON summary (--json) and JSON lines (--json-lines). JSON goes
// through nlohmann-json: names stay UTF-8 as the program wrote them ("k_café"); bytes that are
// not UTF-8 (a name cut inside a character at 255 bytes) become U+FFFD.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "joiner.h"

namespace parcagpu::trace {

using Json = nlohmann::ordered_json;

// The launch API's name for a signed cbid ("unknown" when it is not a launch path we know).
const char *api_name(int32_t signed_cbid);

// The summary as one JSON object. Keys: see tools/trace/README.md.
Json summary_json(const Summary &s);
// One line of JSON: compact, UTF-8 kept, invalid UTF-8 replaced.
std::string json_line(const Json &j);

// "1.234 ms" / "567.000 us" / "2.345 s".
std::string human_ns(uint64_t ns);

// The readable summary: what was traced, what was matched, what was lost, GPU time by stack
// (top N, with their kernels and stacks) and, when enabled, the capture sites. verbose: every
// counter.
void print_summary(FILE *out, const Summary &s, bool verbose);
// The GPU time by stack table alone (also printed per interval).
void print_stack_table(FILE *out, const char *title, const std::vector<StackSummary> &rows,
                       uint64_t total_ns, uint64_t total_kernels, uint64_t total_stacks);
void print_capture_sites(FILE *out, const Summary &s);
// GPU time by device (print_summary shows it when more than one device was seen).
void print_device_table(FILE *out, const std::vector<DeviceSummary> &devices);
// gpu_time_by_device of the JSON summary.
Json devices_json(const std::vector<DeviceSummary> &devices);
// GPU time by rank (or by process, when no process has a RANK / LOCAL_RANK): print_summary shows
// it when more than one process has GPU time.
void print_process_table(FILE *out, const std::vector<ProcessSummary> &processes);
// gpu_time_by_process of the JSON summary.
Json processes_json(const std::vector<ProcessSummary> &processes);
// "rank 1", "rank 3 local_rank 1", "local_rank 0", or "rank -" (neither known).
std::string process_label(const ProcessSummary &p);

// --list-counters: the counter table (tools/trace/counters.h), a line per counter or (json) one object
// {"counters": [{"name", "kind", "text", "label", "help"}]} (tests/integration/harness.py reads it).
void print_counter_table(FILE *out, bool json);

// The live table of kernels (-k): one row per kernel when it is matched to its launch.
class KernelTable {
 public:
  explicit KernelTable(FILE *out) : out_(out) {}
  void header();
  // launch_site: the innermost frame of the launch (or capture) stack, "" if none.
  void row(const KernelRecord &k, const Launch &l, std::string_view kernel, std::string_view launch_site);

 private:
  FILE *out_;
  uint64_t base_ns_ = 0;
  bool have_base_ = false;
};

}  // namespace parcagpu::trace
