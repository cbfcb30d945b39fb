// A view: one more thing the tracer does with the events, beside joining kernels to launches
// (e.g. reading PC samples). The tracer hands a view every ring-buffer event of the types it
// claims (after its own accounting of them) and asks it for its part of each report. To add
// one: a class here-like in its own files, a PT_EV_* event and its BPF program, and one
// `tracer.add_view(std::make_unique<MyView>(...))` in parcagpu_trace.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "trace_events.h"
#include "report.h"

namespace parcagpu::trace {

class View {
 public:
  virtual ~View() = default;
  virtual const char *name() const = 0;
  virtual bool wants(uint32_t event_type) const = 0;
  virtual void on_event(const pt_header &h, const void *data, size_t size) = 0;
  // The final reports: a key of its own in the JSON summary, a section of the text summary.
  virtual void add_json(Json &summary) const { (void)summary; }
  virtual void print(FILE *out) const { (void)out; }
};

}  // namespace parcagpu::trace
