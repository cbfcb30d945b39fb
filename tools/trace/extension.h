// An extension of the tracer: one more thing done with the events, beside joining kernels to
// launches (--pc's PC sampling: tools/trace/pc_profile.h). The tracer hands an extension every
// ring-buffer event of the types it claims (after its own accounting of them) and asks it for its
// part of each report. To add one: a class implementing this in its own files, its PT_EV_* events
// and BPF programs, and one `tracer.add_extension(std::make_unique<Mine>(...))` in
// parcagpu_trace.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "trace_events.h"
#include "report.h"

namespace parcagpu::trace {

class Extension {
 public:
  virtual ~Extension() = default;
  virtual const char *name() const = 0;
  virtual bool wants(uint32_t event_type) const = 0;
  virtual void on_event(const pt_header &h, const void *data, size_t size) = 0;
  // The final reports: a key of its own in the JSON summary, a section of the text summary.
  virtual void add_json(Json &summary) const { (void)summary; }
  virtual void print(FILE *out) const { (void)out; }
  // The whole name behind a kernel name that is the library's stand-in for a longer one
  // (include/parcagpu/abi.h), where the extension knows it (--pc reads the cubins); else null.
  virtual const std::string *whole_name(std::string_view name) const {
    (void)name;
    return nullptr;
  }
};

}  // namespace parcagpu::trace
