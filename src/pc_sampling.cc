#include "pc_sampling.h"

#include "parcagpu/abi.h"
#include "usdt.h"

namespace parcagpu {

void PcSamplePublisher::publish_samples(const void **records, size_t count) {
  while (count > 0) {
    const uint32_t n = count > PARCAGPU_PC_SAMPLE_BATCH_MAX ? PARCAGPU_PC_SAMPLE_BATCH_MAX
                                                            : static_cast<uint32_t>(count);
    usdt::pc_sample_batch(records, n);
    records += n;
    count -= n;
  }
}

void PcSamplePublisher::publish_stall_reasons(const char *names, uint32_t count) {
  usdt::stall_reason_map(names, count);
}

void PcSamplePublisher::publish_cubin_loaded(uint64_t crc, const char *cubin, uint64_t size) {
  usdt::cubin_loaded(crc, cubin, size);
}

void PcSamplePublisher::publish_cubin_unloaded(uint64_t crc) { usdt::cubin_unloaded(crc); }

}  // namespace parcagpu
