#include "pc_publish.h"

#include "log.h"
#include "pc_launch_state.h"
#include "pc_records.h"
#include "pc_session.h"
#include "pc_stats.h"
#include "usdt.h"

namespace parcagpu {

PcPublisher::PcPublisher(const PcLaunchState &state)
    : state_(state), names_(std::make_unique<FunctionNames>()) {}

PcPublisher::~PcPublisher() = default;

bool PcPublisher::was_announced(const void *state, uint32_t correlation_id) {
  return static_cast<const PcLaunchState *>(state)->was_announced(correlation_id);
}

void PcPublisher::publish(PcRecordBuffer &buf, PcStats &stats) {
  const PcBatchTally t = buf.prepare(*names_, &PcPublisher::was_announced, &state_);
  stats.gpu_only += t.gpu_only;
  stats.gpu_only_samples += t.gpu_only_samples;
  if (t.records == 0) return;
  stats.records += t.records;
  stats.pairs += t.pairs;
  stats.samples += t.samples;
  stats.uncorrelated += t.uncorrelated;
  if (usdt::pc_sample_batch_consumers() != 0) {
    usdt::pc_sample_batch(buf.ptrs(), static_cast<uint32_t>(t.records));
    stats.batches++;
  } else {
    stats.unpublished += t.records;
  }
}

PcResult PcPublisher::drain(PcSession &session, PcStats &stats) {
  stats.drains++;
  for (int guard = 0; guard < 100000; ++guard) {
    const PcResult r = session.get_data();
    if (!r.ok()) return r;
    PcRecordBuffer &buf = session.data_buffer();
    const CUpti_PCSamplingData &d = *buf.data();
    // Expected, not an error: kernels first launched (graphs first uploaded) between episodes
    // never give records (docs/pc-sampling.md P19-P20). Counted for the totals; the
    // application's stderr is no place for it.
    if (d.nonUsrKernelsTotalSamples > 0 && stats.nonuser_samples == 0)
      debug_log(
          "PC samples of kernels CUPTI does not attribute (non-user kernels: first launched, "
          "or in a graph first uploaded, between episodes): counted as non-user samples, "
          "not published");
    stats.nonuser_samples += d.nonUsrKernelsTotalSamples;
    stats.dropped_samples += d.droppedSamples;
    if (d.totalNumPcs == 0) break;
    publish(buf, stats);
    if (d.remainingNumPcs == 0) break;
  }
  return {};
}

}  // namespace parcagpu
