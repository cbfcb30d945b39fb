#include "counters.h"

namespace parcagpu::trace {
namespace {

void add(uint64_t *to, uint64_t from) { *to += from; }
void add(double *to, double from) { *to += from; }
void add(counter_by_cbid *to, const counter_by_cbid &from) {
  for (const auto &[cbid, n] : from) (*to)[cbid] += n;
}
void add(counter_by_name *to, const counter_by_name &from) {
  for (const auto &[name, c] : from) {
    NameCounts &t = (*to)[name];
    t.records += c.records;
    t.matched += c.matched;
  }
}

}  // namespace

void add_counters(Counters *to, const Counters &from) {
#define COUNTER(kind, name, text, label, help) add(&to->name, from.name);
#include "counters.def"
#undef COUNTER
}

}  // namespace parcagpu::trace
