// Output of parcagpu-trace: the live kernel table, the human summary and the --json summary.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "joiner.h"

namespace parcagpu::trace {

// The launch API's name for a signed cbid ("unknown" when it is not a launch path we know).
const char *api_name(int32_t signed_cbid);

// The summary as ONE JSON object (no trailing newline). Keys: see the README / summary_json().
std::string summary_json(const Summary &s);

// The same figures, readable.
void print_summary(FILE *out, const Summary &s);

// The live table of kernels.
class KernelTable {
 public:
  explicit KernelTable(FILE *out) : out_(out) {}
  void header();
  void row(const KernelRecord &k, const Joiner::Match &m);

 private:
  FILE *out_;
  uint64_t base_ns_ = 0;
  bool have_base_ = false;
};

// JSON string escaping (exposed for the unit test).
std::string json_escape(std::string_view s);

}  // namespace parcagpu::trace
