// Output of parcagpu-trace: the live kernel table, the human summary and the --json summary.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "joiner.h"

namespace parcagpu::trace {

// The launch API's name for a signed cbid ("unknown" when it is not a launch path we know).
const char *api_name(int32_t signed_cbid);

// The summary as ONE JSON object (no trailing newline). Keys: see the README / summary_json().
std::string summary_json(const Summary &s);

// The same figures, readable (with the capture sites when s.capture_sites_enabled).
void print_summary(FILE *out, const Summary &s);
void print_capture_sites(FILE *out, const Summary &s);

// --capture-sites: what a graph kernel's row adds.
struct CaptureNote {
  std::string_view captured_at;             // the capture site's first user frame
  const std::vector<std::string> *stack;    // the whole stack, or nullptr (already shown)
};

// The live table of kernels.
class KernelTable {
 public:
  explicit KernelTable(FILE *out) : out_(out) {}
  void header();
  void row(const KernelRecord &k, const Joiner::Match &m, const CaptureNote *note = nullptr);

 private:
  FILE *out_;
  uint64_t base_ns_ = 0;
  bool have_base_ = false;
};

// JSON string escaping (exposed for the unit test).
std::string json_escape(std::string_view s);

}  // namespace parcagpu::trace
