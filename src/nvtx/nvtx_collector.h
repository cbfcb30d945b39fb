// NVTX ranges and marks, collected per thread and fired on the nvtx_event_batch probe; names of
// threads, devices and streams fired at once on nvtx_resource_name (docs/probe-abi.md, "NVTX").
// CUPTI calls on_callback for the NVTX cbids (include/parcagpu/cbid_table.h, kNvtxCallbacks),
// which the launch side enables only while either probe has a consumer: with none, the library
// does nothing per NVTX call.
//
// A thread's batch fires: when it is full (PARCAGPU_NVTX_BATCH_MAX events); before a launch of
// that thread is announced (nvtx_thread.h), so the ranges enclosing a launch reach the consumer
// before it; at an NVTX event when its oldest pending event is older than max_age (a thread that
// goes on marking but launches nothing); when the thread exits; and, for the thread that shuts the
// library down, at shutdown. Every event that is not delivered is counted and said once.
#pragma once

#include <pthread.h>

#include <cstdint>

namespace parcagpu {

class NvtxBatch;
struct NvtxDecoded;  // nvtx_decoder.h

struct NvtxStats {
  uint64_t events = 0;      // events taken into a batch
  uint64_t batches = 0;     // nvtx_event_batch firings
  uint64_t names = 0;       // nvtx_resource_name firings
  uint64_t unheard = 0;     // events in a batch fired after the consumer left: lost
  uint64_t no_batch = 0;    // events lost: no memory for the thread's batch
  uint64_t truncated = 0;   // messages cut to PARCAGPU_NVTX_MESSAGE_MAX bytes
  uint64_t unreadable = 0;  // messages not read (registered strings, unknown types): empty
};

// After this long an NVTX event fires its thread's batch (the consumer hears a quiet thread's
// ranges within about this, as long as it makes NVTX calls).
constexpr uint64_t kNvtxMaxAgeNs = 100'000'000;

class NvtxCollector {
 public:
  using Clock = uint64_t (*)();
  // clock: CLOCK_MONOTONIC in ns (the records' timestamps; bpf_ktime_get_ns's clock).
  explicit NvtxCollector(Clock clock, uint64_t max_age_ns = kNvtxMaxAgeNs);
  ~NvtxCollector();
  NvtxCollector(const NvtxCollector &) = delete;
  NvtxCollector &operator=(const NvtxCollector &) = delete;

  // A CUPTI_CB_DOMAIN_NVTX callback (data: CUpti_NvtxData). On the application's thread.
  void on_callback(uint32_t cbid, const void *data);
  // Fires the calling thread's pending events (shutdown).
  void fire_this_thread();
  NvtxStats stats() const;

 private:
  NvtxBatch *thread_batch();
  void take_event(const NvtxDecoded &d);
  void fire_name(const NvtxDecoded &d);

  const Clock clock_;
  const uint64_t max_age_ns_;
  // The key whose destructor fires and frees an exiting thread's batch (null: none to be had).
  const pthread_key_t *const exit_key_;
};

}  // namespace parcagpu
