// An application thread's NVTX state, in initial-exec TLS (no guard, no __tls_get_addr): its
// batch (nvtx_batch.h), the batch again while it holds events (what the launch path checks), and
// the correlation ID of its last announced launch (what its NVTX records carry).
//
// Why the launch path looks here: a consumer reading the ring buffer in order must see the NVTX
// ranges that enclose a launch before the launch itself, so a thread's pending events are fired
// just before cuda_correlation announces a launch of that thread. With nothing pending that is
// one thread-local load, on announced launches only (AnnouncedLaunches::end).
#pragma once

#include <cstdint>

namespace parcagpu {

class NvtxBatch;

struct NvtxThread {
  NvtxBatch *batch;    // allocated at the thread's first NVTX event, freed at its exit
  NvtxBatch *pending;  // == batch while it holds events, else null
  uint32_t last_correlation_id;
  uint32_t tid;
};

// __thread, not thread_local: a trivially constructed variable read through no TLS wrapper.
extern __thread NvtxThread t_nvtx __attribute__((tls_model("initial-exec")));

// Fires this thread's pending events now (nvtx_collector.cc).
__attribute__((noinline, cold)) void nvtx_fire_pending();

// Called just before a launch of this thread is announced as `correlation_id`.
inline void nvtx_before_announce(uint32_t correlation_id) {
  if (__builtin_expect(t_nvtx.pending != nullptr, 0)) nvtx_fire_pending();
  t_nvtx.last_correlation_id = correlation_id;
}

}  // namespace parcagpu
