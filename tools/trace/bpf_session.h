// The BPF side of parcagpu-trace seen from userland: load the skeleton, attach one USDT program
// per probe of provider "parcagpu" to each library file found, read the ring buffer and the
// per-CPU counters, detach.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "owns_handles.h"
#include "trace_events.h"
#include "usdt_attach.h"

struct parcagpu_trace_bpf;
struct bpf_link;
struct ring_buffer;

namespace parcagpu::trace {

// The probes this tool handles, in attach order. cuda_correlation comes first so that detaching
// it first at exit (see BpfSession::detach) makes the library flush its last kernels.
// Adding a probe: a SEC("usdt") program of the same name in parcagpu_trace.bpf.c, its event in
// trace_events.h, a row in the table of bpf_session.cc. Handled probes that a library lacks
// are skipped (an older library).
const std::vector<const char *> &handled_probes();

struct LoadOptions {
  bool verbose_events = false;   // also send kernel_executed and per-batch events
  bool launch_stacks = true;     // user stack at cuda_correlation
  bool capture_stacks = false;   // user stack at graph_capture_launch
  uint32_t stack_copy_bytes = 0; // with stacks: registers and this much user stack (DWARF unwinding)
  uint32_t ringbuf_bytes = 32u << 20;
  int cgroup_fd = -1;            // >= 0: only tasks in this cgroup
  // Also PC sampling's probes (--pc): pc_sample_batch, stall_reason_map, cubin_loaded,
  // cubin_unloaded, gpu_config (is_pc_probe). Without it they are not attached: a consumer of
  // pc_sample_batch is what turns PC sampling on in the library.
  bool pc_probes = false;
  // Also NVTX's probes (--nvtx): nvtx_event_batch, nvtx_resource_name (is_nvtx_probe), and the
  // thread-exit program that frees an NVTX thread's ranges. Without it they are not attached: a
  // consumer of nvtx_event_batch is what makes the library collect NVTX ranges.
  bool nvtx_probes = false;
};

// The probes only NVTX ranges need: attached with LoadOptions::nvtx_probes only.
bool is_nvtx_probe(const char *probe);

// The probes only PC sampling needs: attached with LoadOptions::pc_probes only.
bool is_pc_probe(const char *probe);

class BpfSession : OwnsHandles {
 public:
  // Called for every ring-buffer event; non-zero stops the current poll.
  using Handler = int (*)(void *ctx, void *data, size_t size);

  BpfSession() = default;
  ~BpfSession();

  // libbpf messages: all of them when verbose, else none (the last warning is kept for errors).
  static void setup_libbpf_logging(bool verbose);
  static const std::string &last_libbpf_warning();

  // Opens and loads the programs. On failure: false, a one-line reason in *error, the errno
  // in *err.
  bool load(const LoadOptions &o, std::string *error, int *err);

  // Attaches every handled probe named in `present` (without pc_probes: but PC sampling's) to
  // the library file `path` for `pid`
  // (-1 = every process). Returns the number attached, or -1 with *error / *err set (what was
  // attached to this file before the failure is detached again).
  int attach(const std::string &path, int pid, const std::vector<std::string> &present,
             std::string *error, int *err);

  // Detaches one probe from every file (no-op when not attached), or everything.
  void detach(const char *probe);
  void detach_all();
  size_t links() const { return links_.size(); }
  // Takes the USDT links of the probes `keep` does not want out of the session, for the caller to
  // destroy (destroy_links), e.g. on another thread while the events are read: one thread for
  // them all (they share libbpf's USDT manager).
  std::vector<bpf_link *> take_links(bool (*keep)(const char *probe)) { return parcagpu::trace::take_links(&links_, keep); }
  // The other links: the autograd uprobes and the process-exit program (not USDT: any thread).
  std::vector<bpf_link *> take_other_links();

  // Both ring buffers (events, and meta_events: the library's error and metadata firings) into
  // one handler.
  bool open_ringbuf(Handler handler, void *ctx, std::string *error);
  int poll(int timeout_ms);  // events handled, or a negative errno
  int consume();             // everything committed now; events handled or negative errno

  // A Python process (tools/trace/python.h) whose launches carry its Python frames, or (nullptr)
  // one that is gone. False when the map is full or the update refused.
  bool set_python_process(uint32_t pid, const pt_py_proc *p);

  // PyTorch autograd (tools/trace/autograd.h): a uretprobe at `seq_symbol` and a uprobe and uretprobe
  // at `eval_symbol` of the file `path` for `pid` (-1 = every process), the Node's sequence_nr_
  // at `node_seq_offset` (the attach cookie). False with *error (nothing of it left attached).
  bool attach_autograd(const std::string &path, int pid, const char *seq_symbol, const char *eval_symbol,
                       uint32_t node_seq_offset, std::string *error);

  // The per-CPU counters summed over CPUs: all of them, or one (cheap enough for every poll tick).
  void read_stats(uint64_t out[PT_STAT_MAX]) const;
  uint64_t read_stat(uint32_t index) const;

  // The ring buffers and the cgroup filter, for an extension's BPF object that writes into the same
  // ring buffer (tools/trace/pc_bpf_session.h). After load().
  int events_fd() const;
  int meta_events_fd() const;
  int cgroup_map_fd() const;

 private:
  parcagpu_trace_bpf *skel_ = nullptr;
  ring_buffer *rb_ = nullptr;
  std::vector<UsdtLink> links_;
  std::vector<bpf_link *> autograd_links_;
  bpf_link *exit_link_ = nullptr;  // forget_stack_end at sched_process_exit (with stack copies)
  bool pc_probes_ = false;
  bool nvtx_probes_ = false;
  bpf_link *nvtx_exit_link_ = nullptr;  // nvtx_thread_exit at sched_process_exit (--nvtx)
};

}  // namespace parcagpu::trace
