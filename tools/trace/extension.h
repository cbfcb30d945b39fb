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
#include <vector>

#include "trace_events.h"
#include "report.h"

namespace parcagpu::trace {

// PC samples as --pprof writes them (PcProfile::add_pprof): the samples of one stall reason at one
// PC offset of one kernel.
struct PprofPcSample {
  uint32_t pid = 0;
  int64_t device = -1;    // -1: not known (the process fired gpu_config for several devices)
  std::string kernel;     // demangled, whole
  std::string module;     // "cubin 0x<crc>"
  std::string file;       // the PC's source file ("" without -lineinfo)
  int line = 0;
  uint64_t pc_offset = 0;
  std::string stall;      // the stall reason, short ("long_scoreboard")
  uint64_t samples = 0;
  uint64_t gpu_ns = 0;    // samples x the ns per sample of gpu_config; 0: not known
};

class Extension {
 public:
  virtual ~Extension() = default;
  virtual const char *name() const = 0;
  virtual bool wants(uint32_t event_type) const = 0;
  virtual void on_event(const pt_header &h, const void *data, size_t size) = 0;
  // The final reports: a key of its own in the JSON summary, a section of the text summary.
  virtual void add_json(Json &summary) const { (void)summary; }
  virtual void print(FILE *out) const { (void)out; }
  // Its samples in --pprof's profile (with sample types of their own); none by default.
  virtual void add_pprof(std::vector<PprofPcSample> *out) const { (void)out; }
  virtual bool has_pprof_samples() const { return false; }
  // The whole name behind a kernel name that is the library's stand-in for a longer one
  // (include/parcagpu/abi.h), where the extension knows it (--pc reads the cubins); else null.
  virtual const std::string *whole_name(std::string_view name) const {
    (void)name;
    return nullptr;
  }
};

}  // namespace parcagpu::trace
