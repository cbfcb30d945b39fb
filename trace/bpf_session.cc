#include "bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

#include "parcagpu/abi.h"
#include "parcagpu_trace.skel.h"

namespace parcagpu::trace {
namespace {

bool g_verbose_libbpf = false;
std::string g_last_warning;

int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args) {
  if (g_verbose_libbpf) return std::vfprintf(stderr, fmt, args);
  if (level == LIBBPF_WARN) {
    char buf[512];
    std::vsnprintf(buf, sizeof buf, fmt, args);
    std::string line(buf);
    while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) g_last_warning = line;
  }
  return 0;
}

}  // namespace

const std::vector<const char *> &handled_probes() {
  static const std::vector<const char *> probes = {
      "cuda_correlation", "activity_batch", "kernel_executed",
      "error",            "gpu_config",     "cubin_loaded",
      "cubin_unloaded",   "stall_reason_map", "pc_sample_batch",
      // Capture-site attribution: optional, a library without them is still traced.
      "graph_capture_launch", "graph_node_clone",
  };
  return probes;
}

void BpfSession::setup_libbpf_logging(bool verbose) {
  g_verbose_libbpf = verbose;
  libbpf_set_print(libbpf_print);
}

const std::string &BpfSession::last_libbpf_warning() { return g_last_warning; }

BpfSession::~BpfSession() {
  detach_all();
  if (rb_) ring_buffer__free(rb_);
  if (skel_) parcagpu_trace_bpf__destroy(skel_);
}

bool BpfSession::load(bool verbose_events, bool capture_stacks, uint32_t ringbuf_bytes,
                      std::string *error, int *err) {
  skel_ = parcagpu_trace_bpf__open();
  if (!skel_) {
    *err = errno;
    *error = std::string("cannot open the BPF object: ") + std::strerror(*err);
    return false;
  }
  skel_->rodata->verbose_events = verbose_events;
  skel_->rodata->capture_stacks = capture_stacks;
  int e = bpf_map__set_max_entries(skel_->maps.events, ringbuf_bytes);
  if (e == 0) e = parcagpu_trace_bpf__load(skel_);
  if (e != 0) {
    *err = -e;
    *error = std::string("cannot load the BPF programs: ") + std::strerror(*err);
    return false;
  }
  return true;
}

int BpfSession::attach(const std::string &lib, int pid, const std::vector<std::string> &present,
                       std::string *error, int *err) {
  for (const char *probe : handled_probes()) {
    if (std::find(present.begin(), present.end(), probe) == present.end()) continue;
    bpf_program *prog = bpf_object__find_program_by_name(skel_->obj, probe);
    if (!prog) {
      *err = ENOENT;
      *error = std::string("internal: no BPF program for probe ") + probe;
      return -1;
    }
    bpf_link *link = bpf_program__attach_usdt(prog, pid, lib.c_str(), PARCAGPU_PROVIDER, probe,
                                              nullptr);
    if (!link) {
      *err = errno;
      *error = std::string("cannot attach to ") + PARCAGPU_PROVIDER + ":" + probe + " in " + lib +
               ": " + std::strerror(*err);
      return -1;
    }
    links_.push_back({probe, link});
  }
  return static_cast<int>(links_.size());
}

void BpfSession::detach(const char *probe) {
  for (auto it = links_.begin(); it != links_.end(); ++it) {
    if (std::strcmp(it->probe, probe) != 0) continue;
    bpf_link__destroy(it->link);
    links_.erase(it);
    return;
  }
}

void BpfSession::detach_all() {
  for (auto &a : links_) bpf_link__destroy(a.link);
  links_.clear();
}

bool BpfSession::open_ringbuf(Handler handler, void *ctx, std::string *error) {
  rb_ = ring_buffer__new(bpf_map__fd(skel_->maps.events), handler, ctx, nullptr);
  if (!rb_) {
    *error = std::string("cannot open the ring buffer: ") + std::strerror(errno);
    return false;
  }
  return true;
}

int BpfSession::poll(int timeout_ms) { return ring_buffer__poll(rb_, timeout_ms); }

int BpfSession::consume() { return ring_buffer__consume(rb_); }

void BpfSession::read_stats(uint64_t out[PT_STAT_MAX]) const {
  std::fill(out, out + PT_STAT_MAX, 0);
  const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0 || !skel_) return;
  std::vector<uint64_t> values(ncpu);
  const int fd = bpf_map__fd(skel_->maps.stats);
  for (uint32_t i = 0; i < PT_STAT_MAX; i++) {
    if (bpf_map_lookup_elem(fd, &i, values.data()) != 0) continue;
    for (uint64_t v : values) out[i] += v;
  }
}

}  // namespace parcagpu::trace
