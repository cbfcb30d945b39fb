#include "pc_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "parcagpu/abi.h"
#include "pc_view.h"
#include "pc_view.skel.h"

namespace parcagpu::trace {
namespace {

// The probes this view reads, and its BPF program for each (same names).
const char *const kProbes[] = {"cuda_correlation", "stall_reason_map", "cubin_loaded",
                               "cubin_unloaded", "gpu_config", "pc_sample_batch"};

// A cubin as the production consumer gets it: from the process's memory, at the address the
// library published, for as long as the module is loaded.
std::vector<uint8_t> read_process(uint32_t pid, uint64_t addr, uint64_t size) {
  std::vector<uint8_t> bytes;
  if (size == 0 || size > (uint64_t{1} << 30)) return bytes;
  const std::string path = "/proc/" + std::to_string(pid) + "/mem";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bytes;
  bytes.resize(size);
  size_t got = 0;
  while (got < size) {
    const ssize_t n = pread(fd, bytes.data() + got, size - got, static_cast<off_t>(addr + got));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (got != size) bytes.clear();
  return bytes;
}

template <typename T>
T field(const uint8_t *rec, size_t off) {
  T v;
  std::memcpy(&v, rec + off, sizeof v);
  return v;
}

}  // namespace

PcSession::~PcSession() {
  stop();
  if (rb_) ring_buffer__free(rb_);
  if (skel_) pc_view_bpf__destroy(skel_);
}

bool PcSession::start(const std::string &lib, int pid, const std::vector<std::string> &present,
                      uint32_t ringbuf_bytes, bool verbose, std::string *error) {
  verbose_ = verbose;
  skel_ = pc_view_bpf__open();
  if (!skel_) {
    *error = std::string("cannot open the PC view's BPF object: ") + std::strerror(errno);
    return false;
  }
  int e = bpf_map__set_max_entries(skel_->maps.pc_events, ringbuf_bytes);
  if (e == 0) e = pc_view_bpf__load(skel_);
  if (e != 0) {
    *error = std::string("cannot load the PC view's BPF programs: ") + std::strerror(-e);
    return false;
  }
  for (const char *probe : kProbes) {
    if (std::find(present.begin(), present.end(), probe) == present.end()) continue;
    bpf_program *prog = bpf_object__find_program_by_name(skel_->obj, probe);
    bpf_link *link = prog ? bpf_program__attach_usdt(prog, pid, lib.c_str(), PARCAGPU_PROVIDER,
                                                     probe, nullptr)
                          : nullptr;
    if (!link) {
      *error = std::string("cannot attach the PC view to ") + probe + ": " + std::strerror(errno);
      return false;
    }
    links_.push_back(link);
  }
  rb_ = ring_buffer__new(bpf_map__fd(skel_->maps.pc_events), &PcSession::handle, this, nullptr);
  if (!rb_) {
    *error = std::string("cannot open the PC view's ring buffer: ") + std::strerror(errno);
    return false;
  }
  thread_ = std::thread([this] {
    while (!stopping_.load()) ring_buffer__poll(rb_, 100);
  });
  return true;
}

void PcSession::stop() {
  if (!thread_.joinable()) return;
  for (bpf_link *l : links_) bpf_link__destroy(l);
  links_.clear();
  stopping_ = true;
  thread_.join();
  while (ring_buffer__consume(rb_) > 0) {
  }
  read_counters();
  if (malformed_) std::fprintf(stderr, "parcagpu-trace: %" PRIu64 " malformed PC events\n", malformed_);
}

void PcSession::read_counters() {
  const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0 || !skel_) return;
  uint64_t st[PV_STAT_MAX] = {};
  std::vector<uint64_t> values(ncpu);
  const int fd = bpf_map__fd(skel_->maps.pc_stats);
  for (uint32_t i = 0; i < PV_STAT_MAX; i++) {
    if (bpf_map_lookup_elem(fd, &i, values.data()) != 0) continue;
    for (uint64_t v : values) st[i] += v;
  }
  PcBpfCounters c;
  c.batches = st[PV_STAT_BATCHES];
  c.records = st[PV_STAT_RECORDS];
  c.over_cap = st[PV_STAT_OVER_CAP];
  c.ringbuf_drops = st[PV_STAT_RINGBUF_DROPS];
  c.read_errors = st[PV_STAT_ERR_ARG] + st[PV_STAT_ERR_POINTER] + st[PV_STAT_ERR_RECORD] +
                  st[PV_STAT_ERR_NAME] + st[PV_STAT_ERR_STALL] + st[PV_STAT_ERR_MAP];
  std::lock_guard<std::mutex> lock(mu_);
  profile_.set_bpf(c);
}

int PcSession::handle(void *ctx, void *data, size_t size) {
  static_cast<PcSession *>(ctx)->on_event(data, size);
  return 0;
}

void PcSession::on_event(const void *data, size_t size) {
  if (size < sizeof(pv_header)) {
    ++malformed_;
    return;
  }
  const auto *h = static_cast<const pv_header *>(data);
  std::lock_guard<std::mutex> lock(mu_);
  switch (h->type) {
    case PV_EV_PC_RECORD: {
      if (size < sizeof(pv_pc_record_event)) break;
      const auto *e = static_cast<const pv_pc_record_event *>(data);
      PcSample s;
      s.pid = h->pid;
      s.cubin_crc = field<uint64_t>(e->record, 8);
      s.pc_offset = field<uint64_t>(e->record, 16);
      s.function_index = field<uint32_t>(e->record, 24);
      s.correlation_id = field<uint32_t>(e->record, 56);
      s.function.assign(e->function_name, strnlen(e->function_name, sizeof e->function_name));
      uint64_t count = field<uint64_t>(e->record, 40);
      if (count > PARCAGPU_STALL_REASON_MAX) count = PARCAGPU_STALL_REASON_MAX;
      for (uint64_t i = 0; i < count; ++i) s.stalls.push_back({e->stall[2 * i], e->stall[2 * i + 1]});
      profile_.on_sample(s);
      return;
    }
    case PV_EV_STALL_REASON_MAP:
      if (size < sizeof(pv_stall_map_event)) break;
      profile_.on_stall_map(h->pid, static_cast<const pv_stall_map_event *>(data)->names,
                            sizeof(pv_stall_map_event::names));
      return;
    case PV_EV_CUBIN_LOADED:
    case PV_EV_CUBIN_UNLOADED: {
      if (size < sizeof(pv_cubin_event)) break;
      const auto *e = static_cast<const pv_cubin_event *>(data);
      if (h->type == PV_EV_CUBIN_UNLOADED) {
        profile_.on_cubin_unloaded(h->pid, e->crc);
      } else {
        const auto bytes = read_process(h->pid, e->ptr, e->size);
        if (verbose_)
          std::fprintf(stderr, "[%u] cubin_loaded crc=0x%" PRIx64 " size=%" PRIu64 " read=%s\n", h->pid,
                       static_cast<uint64_t>(e->crc), static_cast<uint64_t>(e->size),
                       bytes.empty() ? "no" : "yes");
        profile_.on_cubin(h->pid, e->crc, e->size, bytes);
      }
      return;
    }
    case PV_EV_GPU_CONFIG: {
      if (size < sizeof(pv_gpu_config_event)) break;
      const auto *e = static_cast<const pv_gpu_config_event *>(data);
      profile_.on_gpu_config(h->pid, e->device_id, e->sampling_factor, e->clock_khz, e->sm_count);
      return;
    }
    case PV_EV_CORRELATION: {
      if (size < sizeof(pv_correlation_event)) break;
      const auto *e = static_cast<const pv_correlation_event *>(data);
      profile_.on_correlation(h->pid, e->correlation_id, e->signed_cbid);
      return;
    }
  }
  ++malformed_;
}

}  // namespace parcagpu::trace
