// The BPF side of parcagpu-trace's PC sampling (--pc): loads pc_sampling.bpf.c into the
// tracer's ring buffer and cgroup filter, attaches its programs (pc_sample_batch,
// stall_reason_map) to each library file before the tracer's own (Targets::before_attach), and
// reads its counters. What is done with the events is PcSampling's (pc_profile.h), fed by the
// tracer like any extension (tools/trace/extension.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "owns_handles.h"
#include "pc_profile.h"
#include "usdt_attach.h"

struct pc_sampling_bpf;
struct bpf_link;

namespace parcagpu::trace {

class PcBpfSession : OwnsHandles {
 public:
  PcBpfSession() = default;
  ~PcBpfSession();

  // Opens and loads the programs, writing into the ring buffers `events_fd` (PC records) and
  // `meta_events_fd` (the stall-reason names) and filtering by the cgroup array `cgroup_map_fd`
  // when `filter_cgroup` (all BpfSession's). False with *error /
  // *err on failure.
  bool load(int events_fd, int meta_events_fd, int cgroup_map_fd, bool filter_cgroup, std::string *error, int *err);

  // Attaches the PC sampling programs for the probes named in `present` to the library file `path`
  // for `pid` (-1 = every process). Must come before the tracer's attach to the same file: the
  // library fires its metadata when a probe's semaphore rises, which only the first uprobe on a
  // probe does. Returns the number attached, or -1 with *error / *err (what was attached to
  // this file is detached again).
  int attach(const std::string &path, int pid, const std::vector<std::string> &present,
             std::string *error, int *err);
  void detach_all();
  size_t links() const { return links_.size(); }
  // Every link, taken out for the caller to destroy (BpfSession::take_links).
  std::vector<bpf_link *> take_links() { return parcagpu::trace::take_links(&links_, [](const char *) { return false; }); }

  PcBpfCounters counters() const;

 private:
  pc_sampling_bpf *skel_ = nullptr;
  std::vector<UsdtLink> links_;
};

}  // namespace parcagpu::trace
