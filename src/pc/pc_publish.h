// PC samples out to consumers: Get Data until CUPTI has no more (drain), and each buffer's
// records fired to pc_sample_batch consumers (publish), counted in PcStats. A record of a launch
// not announced in the window under way (PcLaunchState::was_announced) goes out with correlation
// ID 0, a GPU-only sample (pc_records.h). The one publish() every drain, episode end and teardown
// uses; PcEpisodes calls it under its mutex, with the launch gate held exclusively.
//
// The firing itself is not done there: a drain runs on an application thread with every other
// launching thread held, and the production agent's one 1 MiB ring buffer cannot take a buffer's
// records at once (a 1,024-record firing is 737 KB of it; the agent gives up the rest of a firing
// at the first record that does not fit: agent_ring_pacer.h). So publish() copies the records out
// of CUPTI's buffer (which the next Get Data reuses) into a queue, and a thread of ours fires them
// in slices of kPcFiringRecords, each when the agent's ring has room for it (AgentRingPacer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "base/usdt.h"
#include "pc/pc_forward.h"

namespace parcagpu {

// Records per pc_sample_batch firing: 128 are 92 KB of the agent's 1 MiB ring (712 bytes each,
// agent_ring_pacer.h), so a slice fits next to a burst of kernel records; the agent reads them as
// one of its 8 chunks of 128 (support/ebpf/cuda.ebpf.c, BPF_PC_BATCH_LIMIT).
inline constexpr size_t kPcFiringRecords = 128;
// Records waiting to be fired at most (576 bytes each with their stall reasons: 9 MiB). At the
// pacer's rate this is 1.4 s of firing; a drain that finds the queue fuller is not queued but
// counted (PcStats::unfired) and said once.
inline constexpr size_t kPcQueuedRecordsMax = 16384;

class PcPublisher {
 public:
  // coverage: told every function the records name (may be null). probe: where the records go.
  PcPublisher(const PcLaunchState &state, PcCoverage *coverage,
              usdt::pc_sample_batch_probe probe = usdt::probe::pc_sample_batch);
  ~PcPublisher();  // fires what is queued, then stops the thread

  // Queues what `buf` holds for pc_sample_batch consumers (or counts it unpublished).
  void publish(PcRecordBuffer &buf, PcStats &stats);
  // Get Data on `session` until CUPTI has no more, each batch published; the failed call, if one
  // failed (then PC sampling is to be turned off).
  PcResult drain(PcSession &session, PcStats &stats);
  // At exit: fires everything queued (paced, as ever) and stops the firing thread.
  void finish();
  // The firing thread's counts added to `stats` (batches, unpublished).
  void add_firing_stats(PcStats &stats) const;

 private:
  static bool was_announced(const void *state, uint32_t correlation_id);
  class Firer;

  const PcLaunchState &state_;
  PcCoverage *const coverage_;
  const usdt::pc_sample_batch_probe probe_;
  const std::unique_ptr<FunctionNames> names_;  // kernel names kept for consumers
  const std::unique_ptr<Firer> firer_;
};

}  // namespace parcagpu
