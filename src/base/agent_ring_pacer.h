// Paces the probe firings whose events fill the production agent's one ring buffer.
//
// Why. The agent (Parca's, parca-dev/opentelemetry-ebpf-profiler) copies every event of every
// probe it reads but cuda_correlation into one BPF ring buffer, "cupti_events", of 1 MiB by
// default (support/ebpf/cuda.ebpf.c; tracer/tracer.go scales it by parca-agent's
// --bpf-cupti-event-scale-factor, 0 unless set). Each PC record of a pc_sample_batch firing
// becomes one 712-byte event, each kernel record of an activity_batch firing one of 304 bytes, and
// the agent gives up the REST of a pc_sample_batch firing at the first event that finds the ring
// full. A firing of 1,024 PC records is 737 KB of the ring; two back to back, or one next to a
// burst of kernel records, do not fit while the agent drains (H200, a PyTorch graph replay: 593 of
// 17,516 PC records lost in 40 s; issue 42). So what is fired into that ring is paced here: a token
// bucket of ring bytes, a burst of a quarter of the ring, refilled at a rate the agent's reader
// keeps up with. PC records (PcPublisher, pc_publish.h: its own thread, never the launch path) wait
// for the bucket; kernel records (activity_batch, on the thread CUPTI hands a buffer back on,
// never the launch path) may run it into a debt of half the ring first, so that PC firings make
// room for them and a flush's burst seldom waits. What the ring holds at once then stays under a
// quarter of it (the burst) plus half (the debt) plus one firing, for a reader at the rate.
//
// No CUPTI, no clock of its own (the caller passes the time): unit-tested in
// tests/unit/lib/agent_ring_pacer_test.cc.
#pragma once

#include <cstdint>
#include <mutex>

namespace parcagpu {

// The agent's ring and the room its events take in it: a BPF ring-buffer record is the event
// rounded up to 8 bytes plus an 8-byte header.
inline constexpr uint64_t kAgentRingBytes = 1u << 20;
inline constexpr uint64_t kAgentPcEventBytes = 712 + 8;
inline constexpr uint64_t kAgentKernelEventBytes = 304 + 8;

class AgentRingPacer {
 public:
  // What may go into the ring at once: a quarter of it, so that a burst of kernel records and a
  // PC slice still fit next to what the agent has not read yet.
  static constexpr uint64_t kBurstBytes = kAgentRingBytes / 4;
  // What goes in per second after the burst: 8 MiB/s, about 11,600 PC records a second (700,000 a
  // minute; the H200 graph replay of issue 42 fired 26,000 a minute) or 27,000 kernel records. The
  // agent's reader (one goroutine) must read this fast for its ring never to fill: 86 us per PC
  // event, an assumption not measured on the agent; the tests read at exactly this rate
  // (harness.AGENT_READ_BYTES_PER_S).
  static constexpr uint64_t kBytesPerSecond = 8u << 20;

  // The debt kernel records may run the bucket into before they wait: half the ring (a window of
  // PC sampling announces every launch, 32 graph launches of 200 kernels are 2 MB of records).
  static constexpr uint64_t kKernelDebtBytes = kAgentRingBytes / 2;

  // Takes `bytes` now, into debt if need be.
  void take(uint64_t bytes, uint64_t now_ns);
  // Nanoseconds to wait before `bytes` may be taken leaving a debt of at most `may_owe` bytes
  // (PC records: 0; kernel records: kKernelDebtBytes); 0: now.
  uint64_t wait_ns(uint64_t bytes, uint64_t now_ns, uint64_t may_owe = 0);

  // The one pacer of the process: every firing into the agent's ring shares it.
  static AgentRingPacer &instance();

 private:
  void refill(uint64_t now_ns);  // under mu_

  std::mutex mu_;
  int64_t tokens_ = static_cast<int64_t>(kBurstBytes);  // bytes; negative: debt
  uint64_t last_ns_ = 0;
};

}  // namespace parcagpu
