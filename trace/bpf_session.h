// The BPF side of parcagpu-trace seen from userland: load the skeleton, attach one USDT program
// per probe of provider "parcagpu", read the ring buffer and the per-CPU counters, detach.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "parcagpu_trace.h"

struct parcagpu_trace_bpf;
struct bpf_link;
struct ring_buffer;

namespace parcagpu::trace {

// The probes this tool handles, in attach order. cuda_correlation comes first so that detaching
// it first at exit (see BpfSession::detach) makes the library flush its last kernels.
// Adding a probe: a SEC("usdt") program of the same name in parcagpu_trace.bpf.c, its event in
// parcagpu_trace.h, a row here. Handled probes that LIB lacks are skipped (an older library).
const std::vector<const char *> &handled_probes();

class BpfSession {
 public:
  // Called for every ring-buffer event; non-zero stops the current poll.
  using Handler = int (*)(void *ctx, void *data, size_t size);

  BpfSession() = default;
  BpfSession(const BpfSession &) = delete;
  BpfSession &operator=(const BpfSession &) = delete;
  ~BpfSession();

  // libbpf messages: all of them when verbose, else none (the last warning is kept for errors).
  static void setup_libbpf_logging(bool verbose);
  static const std::string &last_libbpf_warning();

  // Opens and loads the programs. verbose_events: also send kernel_executed and per-batch
  // events. capture_stacks: graph_capture_launch events carry the user stack. On failure:
  // false, a one-line reason in *error, the errno in *err.
  bool load(bool verbose_events, bool capture_stacks, uint32_t ringbuf_bytes, std::string *error,
            int *err);

  // Attaches every handled probe named in `present` to `lib` (absolute path) for `pid`
  // (-1 = system-wide). Returns the number attached, or -1 with *error / *err set.
  int attach(const std::string &lib, int pid, const std::vector<std::string> &present,
             std::string *error, int *err);

  // Detaches one probe (no-op when not attached), or all of them.
  void detach(const char *probe);
  void detach_all();

  bool open_ringbuf(Handler handler, void *ctx, std::string *error);
  int poll(int timeout_ms);  // events handled, or a negative errno
  int consume();             // everything committed now; events handled or negative errno

  // The per-CPU counters summed over CPUs.
  void read_stats(uint64_t out[PT_STAT_MAX]) const;

 private:
  parcagpu_trace_bpf *skel_ = nullptr;
  ring_buffer *rb_ = nullptr;
  struct Attached {
    const char *probe;
    bpf_link *link;
  };
  std::vector<Attached> links_;
};

}  // namespace parcagpu::trace
