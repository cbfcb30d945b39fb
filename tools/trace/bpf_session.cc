#include "bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <utility>

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

// Probe name -> its program in the skeleton, typed: a probe without a program does not compile.
using Progs = decltype(parcagpu_trace_bpf::progs);
#define PARCAGPU_PROBE(name) ProbeProgram<Progs>{#name, &Progs::name}
// Attached in this order and detached in it too (cuda_correlation by itself first at exit):
// cuda_correlation last. The library announces launches as soon as it sees that semaphore up,
// and collects their kernels only once it has seen a kernel probe's: announced before that,
// their kernels never come (seen in the attach/detach storm as a few hundred orphan launches
// of the first 100 ms).
constexpr ProbeProgram<Progs> kProbes[] = {
    PARCAGPU_PROBE(activity_batch),   PARCAGPU_PROBE(kernel_executed),
    PARCAGPU_PROBE(error),            PARCAGPU_PROBE(gpu_config),
    PARCAGPU_PROBE(cubin_loaded),     PARCAGPU_PROBE(cubin_unloaded),
    PARCAGPU_PROBE(stall_reason_map), PARCAGPU_PROBE(pc_sample_batch),
    // Capture-site attribution: optional, a library without them is still traced.
    PARCAGPU_PROBE(graph_capture_launch), PARCAGPU_PROBE(graph_node_clone),
    // Copies and fills: optional too (a library without memory_batch announces none).
    PARCAGPU_PROBE(memory_batch),
    // NVTX ranges (--nvtx): optional, and before cuda_correlation, so that a thread's ranges are
    // read before the launches they enclose.
    PARCAGPU_PROBE(nvtx_event_batch), PARCAGPU_PROBE(nvtx_resource_name),
    PARCAGPU_PROBE(cuda_correlation),
};
#undef PARCAGPU_PROBE

// What only PC sampling (--pc) needs. pc_sample_batch's consumer is what makes the library
// sample PCs; the others are fired only for PC sampling (stall-reason names, the sampling
// factor once sampling is configured, the cubins for source lines) and their semaphores make the
// library fire its stored metadata again.
constexpr const char *kPcProbes[] = {"pc_sample_batch", "stall_reason_map", "cubin_loaded",
                                     "cubin_unloaded", "gpu_config"};

// What only NVTX ranges (--nvtx) need: a consumer of nvtx_event_batch is what makes the library
// collect NVTX ranges (CUPTI's NVTX callbacks, a cost on every push and pop of the application).
constexpr const char *kNvtxProbes[] = {"nvtx_event_batch", "nvtx_resource_name"};

}  // namespace

// Without --nvtx its programs are not loaded: the verifier's time for their record loops is
// paid in every start-up (an attach within the library's settle time, test_pc_sampling).
static int skip_nvtx_programs(parcagpu_trace_bpf *skel) {
  for (bpf_program *p : {skel->progs.nvtx_event_batch, skel->progs.nvtx_resource_name,
                         skel->progs.nvtx_thread_exit})
    if (int e = bpf_program__set_autoload(p, false); e != 0) return e;
  return 0;
}

bool is_nvtx_probe(const char *probe) {
  for (const char *p : kNvtxProbes)
    if (std::strcmp(p, probe) == 0) return true;
  return false;
}

bool is_pc_probe(const char *probe) {
  for (const char *p : kPcProbes)
    if (std::strcmp(p, probe) == 0) return true;
  return false;
}

const std::vector<const char *> &handled_probes() {
  static const std::vector<const char *> probes = [] {
    std::vector<const char *> v;
    for (const ProbeProgram<Progs> &p : kProbes) v.push_back(p.probe);
    return v;
  }();
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
  if (exit_link_) bpf_link__destroy(exit_link_);
  if (nvtx_exit_link_) bpf_link__destroy(nvtx_exit_link_);
  if (skel_) parcagpu_trace_bpf__destroy(skel_);
}

bool BpfSession::load(const LoadOptions &o, std::string *error, int *err) {
  skel_ = parcagpu_trace_bpf__open();
  if (!skel_) {
    *err = errno;
    *error = std::string("cannot open the BPF object: ") + std::strerror(*err);
    return false;
  }
  pc_probes_ = o.pc_probes;
  nvtx_probes_ = o.nvtx_probes;
  skel_->rodata->verbose_events = o.verbose_events;
  skel_->rodata->launch_stacks = o.launch_stacks;
  skel_->rodata->capture_stacks = o.capture_stacks;
  skel_->rodata->stack_copy_bytes = o.stack_copy_bytes;
  skel_->rodata->filter_cgroup = o.cgroup_fd >= 0;
  int e = bpf_map__set_max_entries(skel_->maps.events, o.ringbuf_bytes);
  // PT_STACK_SLOTS_PER_CPU stack slots per CPU (parcagpu_trace.bpf.c: stack events are built
  // there and sent at their size); ~70 KiB each.
  const int ncpu = libbpf_num_possible_cpus();
  if (e == 0)
    e = bpf_map__set_max_entries(
        skel_->maps.stack_slots,
        (o.launch_stacks || o.capture_stacks ? (ncpu > 0 ? ncpu : 1) : 1) * PT_STACK_SLOTS_PER_CPU);
  if (e == 0 && !o.nvtx_probes) e = skip_nvtx_programs(skel_);
  if (e == 0) e = parcagpu_trace_bpf__load(skel_);
  if (e != 0) {
    *err = -e;
    *error = std::string("cannot load the BPF programs: ") + std::strerror(*err);
    return false;
  }
  // Stack ends found per thread are forgotten when the thread exits (parcagpu_trace.bpf.c,
  // stack_ends): without it a thread id used again would copy only up to the old thread's end.
  if (o.stack_copy_bytes > 0 && (o.launch_stacks || o.capture_stacks)) {
    exit_link_ = bpf_program__attach(skel_->progs.forget_stack_end);
    if (!exit_link_) {
      *err = errno;
      *error = std::string("cannot attach to sched_process_exit: ") + std::strerror(*err);
      return false;
    }
  }
  // NVTX threads' exits free their open ranges in userland (tools/trace/nvtx_ranges.h).
  if (o.nvtx_probes) {
    nvtx_exit_link_ = bpf_program__attach(skel_->progs.nvtx_thread_exit);
    if (!nvtx_exit_link_) {
      *err = errno;
      *error = std::string("cannot attach to sched_process_exit (NVTX threads): ") + std::strerror(*err);
      return false;
    }
  }
  if (o.cgroup_fd >= 0) {
    const uint32_t zero = 0;
    if (bpf_map_update_elem(bpf_map__fd(skel_->maps.cgroup_map), &zero, &o.cgroup_fd, BPF_ANY) != 0) {
      *err = errno;
      *error = std::string("cannot set the cgroup filter: ") + std::strerror(*err);
      return false;
    }
  }
  return true;
}

int BpfSession::attach(const std::string &path, int pid, const std::vector<std::string> &present,
                       std::string *error, int *err) {
  std::vector<UsdtProgram> programs = usdt_programs(kProbes, skel_->progs);
  if (!pc_probes_)
    std::erase_if(programs, [](const UsdtProgram &p) { return is_pc_probe(p.probe); });
  if (!nvtx_probes_)
    std::erase_if(programs, [](const UsdtProgram &p) { return is_nvtx_probe(p.probe); });
  return attach_usdt(programs, path, pid, present, "", &links_, error, err);
}

void BpfSession::detach(const char *probe) { destroy_links(&links_, probe); }

std::vector<bpf_link *> BpfSession::take_other_links() {
  std::vector<bpf_link *> taken = std::move(autograd_links_);
  autograd_links_.clear();
  if (exit_link_) taken.push_back(std::exchange(exit_link_, nullptr));
  if (nvtx_exit_link_) taken.push_back(std::exchange(nvtx_exit_link_, nullptr));
  return taken;
}

void BpfSession::detach_all() {
  destroy_links(&links_);
  destroy_links(autograd_links_);
  autograd_links_.clear();
}

bool BpfSession::attach_autograd(const std::string &path, int pid, const char *seq_symbol, const char *eval_symbol,
                                 uint32_t node_seq_offset, std::string *error) {
  if (!skel_) return false;
  struct Want {
    bpf_program *prog;
    const char *func;
    bool retprobe;
  };
  const Want wants[] = {{skel_->progs.autograd_seq_return, seq_symbol, true},
                        {skel_->progs.autograd_node_enter, eval_symbol, false},
                        {skel_->progs.autograd_node_return, eval_symbol, true}};
  std::vector<bpf_link *> made;
  for (const Want &w : wants) {
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = node_seq_offset, .retprobe = w.retprobe,
                .func_name = w.func);
    bpf_link *l = bpf_program__attach_uprobe_opts(w.prog, pid, path.c_str(), 0, &opts);
    if (!l) {
      const int e = errno;
      *error = std::string(w.func) + (w.retprobe ? " (return)" : "") + ": " + std::strerror(e);
      for (bpf_link *m : made) bpf_link__destroy(m);
      return false;
    }
    made.push_back(l);
  }
  autograd_links_.insert(autograd_links_.end(), made.begin(), made.end());
  return true;
}

bool BpfSession::open_ringbuf(Handler handler, void *ctx, std::string *error) {
  // The metadata ring first: one manager polls both (an event in either wakes it).
  rb_ = ring_buffer__new(bpf_map__fd(skel_->maps.meta_events), handler, ctx, nullptr);
  if (!rb_ || ring_buffer__add(rb_, bpf_map__fd(skel_->maps.events), handler, ctx) != 0) {
    *error = std::string("cannot open the ring buffers: ") + std::strerror(errno);
    return false;
  }
  return true;
}

int BpfSession::poll(int timeout_ms) { return ring_buffer__poll(rb_, timeout_ms); }

int BpfSession::consume() { return ring_buffer__consume(rb_); }

bool BpfSession::set_python_process(uint32_t pid, const pt_py_proc *p) {
  if (!skel_) return false;
  const int fd = bpf_map__fd(skel_->maps.py_procs);
  if (!p) return bpf_map_delete_elem(fd, &pid) == 0;
  return bpf_map_update_elem(fd, &pid, p, BPF_ANY) == 0;
}

int BpfSession::events_fd() const { return bpf_map__fd(skel_->maps.events); }

int BpfSession::meta_events_fd() const { return bpf_map__fd(skel_->maps.meta_events); }

int BpfSession::cgroup_map_fd() const { return bpf_map__fd(skel_->maps.cgroup_map); }

uint64_t BpfSession::read_stat(uint32_t index) const {
  const int ncpu = libbpf_num_possible_cpus();
  if (ncpu <= 0 || !skel_ || index >= PT_STAT_MAX) return 0;
  std::vector<uint64_t> values(ncpu);
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.stats), &index, values.data()) != 0) return 0;
  uint64_t sum = 0;
  for (uint64_t v : values) sum += v;
  return sum;
}

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
