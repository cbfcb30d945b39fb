// The BPF side of parcagpu-trace's PC sampling view (--pc): loads pc_view.bpf.c, attaches it to
// the PC sampling probes of LIB (and cuda_correlation), and feeds a PcProfile from its own ring
// buffer on a thread of its own, so the main loop of parcagpu-trace is untouched. Cubin bytes
// are read from /proc/PID/mem when cubin_loaded arrives, as the production consumer does.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pc_profile.h"

struct pc_view_bpf;
struct bpf_link;
struct ring_buffer;

namespace parcagpu::trace {

class PcSession {
 public:
  PcSession() = default;
  PcSession(const PcSession &) = delete;
  PcSession &operator=(const PcSession &) = delete;
  ~PcSession();

  // Loads, attaches the probes named in `present` and starts polling. False with *error.
  bool start(const std::string &lib, int pid, const std::vector<std::string> &present,
             uint32_t ringbuf_bytes, bool verbose, std::string *error);
  // Detaches, drains what is left and stops the thread.
  void stop();
  int attached() const { return static_cast<int>(links_.size()); }

  // The profile (after stop(), or under its lock).
  const PcProfile &profile() const { return profile_; }

 private:
  static int handle(void *ctx, void *data, size_t size);
  void on_event(const void *data, size_t size);
  void read_counters();

  pc_view_bpf *skel_ = nullptr;
  ring_buffer *rb_ = nullptr;
  std::vector<bpf_link *> links_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  bool verbose_ = false;
  std::mutex mu_;
  PcProfile profile_;
  uint64_t malformed_ = 0;
};

}  // namespace parcagpu::trace
