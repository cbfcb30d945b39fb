// --pprof: GPU time by launch stack as a pprof profile (perftools.profiles.Profile from
// tools/trace/proto/profile.proto, gzip-compressed as pprof wants it on disk), for pprof, Parca,
// Pyroscope and speedscope. One sample per (launch stack, kernel name, process, device): values
// [kernels, GPU ns], the kernel's name in the label "kernel", its process and device in labels, the stack as locations (leaf first), one
// location per physical frame with its inlined calls as extra lines.
// With --pc, PC samples too, as sample types of their own (pc_samples, pc_gpu_ns; the GPU-time
// samples have 0 there and the PC samples 0 in kernels and gpu): one sample per (kernel, PC
// offset, stall reason), its location the PC's source line in the kernel (or the PC offset
// without -lineinfo), labelled stall_reason, kernel, device, pid, comm, rank as above.
#pragma once

#include <cstdint>
#include <string>

#include "extension.h"
#include "joiner.h"
#include "processes.h"
#include "profile.h"
#include "stacks.h"

namespace parcagpu::trace {

struct PprofInfo {
  int64_t time_nanos = 0;      // when tracing started, ns since the epoch
  int64_t duration_nanos = 0;  // how long it traced
  const std::vector<PprofPcSample> *pc_samples = nullptr;  // --pc: the PC samples
};

// The serialized profile, not compressed. Each sample also carries the labels of its process
// (`processes`): pid and device (num), comm (str), rank and local_rank (num, when its environment
// had RANK / LOCAL_RANK).
std::string pprof_profile(const GpuProfile &p, const StackTable &stacks, const NameTable &names,
                          const ProcessTable &processes, const PprofInfo &info);

// `data` gzip-compressed (a gzip member, as `gzip` writes). False only when zlib fails.
bool gzip_compress(const std::string &data, std::string *out);

}  // namespace parcagpu::trace
