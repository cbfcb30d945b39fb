// Every counter of parcagpu-trace's summary, written once. The table generates the fields of
// `Counters` (the counting part of `Summary`, tools/trace/joiner.h), the keys of the JSON summary
// (tools/trace/report.cc: the counters come first, in this order, which the tests and GPU scripts rely
// on), the lines of -v's "Counters:" section, and `parcagpu-trace --list-counters`, which the
// Python tests read (tests/integration/harness.py: COUNTER) rather than spelling the keys again.
//
// The table is tools/trace/counters.def, a row per counter:
//   COUNTER(kind, name, text, label, help)
//   kind   count: uint64_t; seconds: double (rounded to ms in JSON); by_cbid: {signed cbid: n};
//          by_name: {kernel name: records, matched}
//   name   the field and its JSON key
//   text   where -v prints it among the counters (1 first; 0: not a line of its own)
//   label  its -v line
//   help   what it counts
//
// Components that count keep a `Counters` of their own (the joiner, the capture sites, the
// tracer) and the summary adds them up (add_counters), so a counter is named in the table and where
// it is counted, nowhere else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace parcagpu::trace {

struct NameCounts {
  uint64_t records = 0;
  uint64_t matched = 0;
};

using counter_count = uint64_t;
using counter_seconds = double;
using counter_by_cbid = std::map<int32_t, uint64_t>;
using counter_by_name = std::map<std::string, NameCounts>;

struct Counters {
#define COUNTER(kind, name, text, label, help) counter_##kind name{};
#include "counters.def"
#undef COUNTER
};

// One row of the table, for code that walks it (the -v lines, --list-counters).
struct CounterInfo {
  const char *kind, *name;
  int text;
  const char *label, *help;
};
inline constexpr CounterInfo kCounters[] = {
#define COUNTER(kind, name, text, label, help) {#kind, #name, text, label, help},
#include "counters.def"
#undef COUNTER
};

// f(info, field) for every counter of c, in the table's order (field: const counter_KIND &).
template <class F>
void for_each_counter(const Counters &c, F &&f) {
  size_t i = 0;
#define COUNTER(kind, name, text, label, help) f(kCounters[i++], c.name);
#include "counters.def"
#undef COUNTER
}

// to += from, counter by counter (maps key by key): the summary adds up what each part counted.
void add_counters(Counters *to, const Counters &from);

}  // namespace parcagpu::trace
