// Publishing side of PC sampling (CUPTI's PC sampling API): the probes pc_sample_batch,
// stall_reason_map, cubin_loaded and cubin_unloaded are part of the consumer ABI now, so their
// notes and semaphores exist in the library; the sampler that feeds them is a later issue.
#pragma once

#include <cstddef>
#include <cstdint>

namespace parcagpu {

class PcSamplePublisher {
 public:
  // records: CUpti_PCSamplingPCData pointers; fired in slices of PARCAGPU_PC_SAMPLE_BATCH_MAX.
  void publish_samples(const void **records, size_t count);
  // names: PARCAGPU_STALL_REASON_MAX names of PARCAGPU_STALL_REASON_NAME_LEN bytes.
  void publish_stall_reasons(const char *names, uint32_t count);
  void publish_cubin_loaded(uint64_t crc, const char *cubin, uint64_t size);
  void publish_cubin_unloaded(uint64_t crc);
};

}  // namespace parcagpu
