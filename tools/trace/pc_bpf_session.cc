#include "pc_bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "parcagpu/abi.h"
#include "pc_events.h"
#include "pc_sampling.skel.h"

namespace parcagpu::trace {
namespace {

// Probe name -> the PC sampling program for it, typed as in bpf_session.cc. Only what the tracer's
// own events do not carry: the records and the stall-reason names.
using Progs = decltype(pc_sampling_bpf::progs);
constexpr ProbeProgram<Progs> kProbes[] = {
    {"stall_reason_map", &Progs::stall_reason_map},
    {"pc_sample_batch", &Progs::pc_sample_batch},
};

}  // namespace

PcBpfSession::~PcBpfSession() {
  detach_all();
  if (skel_) pc_sampling_bpf__destroy(skel_);
}

bool PcBpfSession::load(int events_fd, int meta_events_fd, int cgroup_map_fd, bool filter_cgroup, std::string *error,
                     int *err) {
  skel_ = pc_sampling_bpf__open();
  if (!skel_) {
    *err = errno;
    *error = std::string("cannot open the PC sampling BPF object: ") + std::strerror(*err);
    return false;
  }
  skel_->rodata->filter_cgroup = filter_cgroup;
  int e = bpf_map__reuse_fd(skel_->maps.events, events_fd);
  if (e == 0) e = bpf_map__reuse_fd(skel_->maps.meta_events, meta_events_fd);
  if (e == 0) e = bpf_map__reuse_fd(skel_->maps.cgroup_map, cgroup_map_fd);
  if (e == 0) e = pc_sampling_bpf__load(skel_);
  if (e != 0) {
    *err = -e;
    *error = std::string("cannot load the PC sampling BPF programs: ") + std::strerror(*err);
    return false;
  }
  return true;
}

int PcBpfSession::attach(const std::string &path, int pid, const std::vector<std::string> &present,
                      std::string *error, int *err) {
  return attach_usdt(usdt_programs(kProbes, skel_->progs), path, pid, present,
                     "the PC sampling programs", &links_, error, err);
}

void PcBpfSession::detach_all() { destroy_links(&links_); }

PcBpfCounters PcBpfSession::counters() const {
  PcBpfCounters c;
  const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0 || !skel_) return c;
  uint64_t st[PV_STAT_MAX] = {};
  std::vector<uint64_t> values(ncpu);
  const int fd = bpf_map__fd(skel_->maps.stats);
  for (uint32_t i = 0; i < PV_STAT_MAX; i++) {
    if (bpf_map_lookup_elem(fd, &i, values.data()) != 0) continue;
    for (uint64_t v : values) st[i] += v;
  }
  c.batches = st[PV_STAT_BATCHES];
  c.records = st[PV_STAT_RECORDS];
  c.over_cap = st[PV_STAT_OVER_CAP];
  c.ringbuf_drops = st[PV_STAT_RINGBUF_DROPS] + st[PV_STAT_META_RINGBUF_DROPS];
  c.read_errors = st[PV_STAT_ERR_ARG] + st[PV_STAT_ERR_POINTER] + st[PV_STAT_ERR_RECORD] +
                  st[PV_STAT_ERR_NAME] + st[PV_STAT_ERR_STALL] + st[PV_STAT_ERR_MAP];
  return c;
}

}  // namespace parcagpu::trace
