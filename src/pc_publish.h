// PC samples out to consumers: Get Data until CUPTI has no more (drain), and each buffer's
// records fired to pc_sample_batch consumers (publish), counted in PcStats. A record of a launch
// not announced in the window under way (PcLaunchState::was_announced) goes out with correlation
// ID 0, a GPU-only sample (pc_records.h). The one publish() every drain, episode end and teardown
// uses; PcEpisodes calls it under its mutex, with the launch gate held exclusively.
#pragma once

#include <cstdint>
#include <memory>

#include "pc_forward.h"

namespace parcagpu {

class PcPublisher {
 public:
  explicit PcPublisher(const PcLaunchState &state);
  ~PcPublisher();

  // Fires what `buf` holds to pc_sample_batch consumers (or counts it unpublished).
  void publish(PcRecordBuffer &buf, PcStats &stats);
  // Get Data on `session` until CUPTI has no more, each batch published; the failed call, if one
  // failed (then PC sampling is to be turned off).
  PcResult drain(PcSession &session, PcStats &stats);

 private:
  static bool was_announced(const void *state, uint32_t correlation_id);

  const PcLaunchState &state_;
  const std::unique_ptr<FunctionNames> names_;  // kernel names kept for consumers
};

}  // namespace parcagpu
