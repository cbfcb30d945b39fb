// CUPTI's PC Sampling API on one context: the calls alone, in the order PcSampler makes them
// (pc_sampling.h): read the stall reasons, enable, configure (and read back the sampling factor
// in force), start, stop, get data, disable. No threads, no gate, no scheduling, no probes: the
// caller decides when, on which thread, and what a failure means (for PcSampler: PC sampling off
// for the process).
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "base/cupti_api.h"
#include "pc/pc_records.h"

namespace parcagpu {

// The outcome of a call: CUPTI's result and, when it failed, which call (with detail) failed.
struct PcResult {
  CUptiResult result = CUPTI_SUCCESS;
  const char *call = "";  // static storage, or the session's (valid until its next failure)
  bool ok() const { return result == CUPTI_SUCCESS; }
};

class PcSession {
 public:
  // What configure sets beyond the fixed attributes; 0: CUPTI's default.
  struct Settings {
    uint32_t sampling_factor = 0;
    uint32_t hw_buffer_mb = 0;
  };

  // `batch`: records per Get Data (the buffers' capacity, made at the first configure).
  PcSession(const CuptiApi &cupti, CUcontext ctx, size_t batch)
      : cupti_(cupti), ctx_(ctx), batch_(batch) {}
  PcSession(const PcSession &) = delete;
  PcSession &operator=(const PcSession &) = delete;
  CUcontext ctx() const { return ctx_; }

  // The stall reasons CUPTI offers on this context, as a table (cuptiPCSamplingGetNumStallReasons,
  // cuptiPCSamplingGetStallReasons). A table with no usable reason is a failure (NOT_SUPPORTED).
  PcResult read_stall_reasons(StallReasonTable *table);
  PcResult enable();
  // Kernel-serialized collection with start/stop control, the given stall reasons, the buffer
  // Disable fills (disable_buffer()) and the settings; then the sampling factor in force, as
  // CUPTI reports it, into *factor.
  PcResult configure(const std::vector<uint32_t> &stall_reasons, const Settings &settings,
                     uint32_t *factor);
  PcResult start();
  PcResult stop();
  // One Get Data into data_buffer() (reset first).
  PcResult get_data();
  PcResult disable();
  // The device of the context (0 where CUPTI can't tell).
  uint32_t device_id() const;

  // What get_data filled, and what Disable put what was left into. Exist after configure.
  PcRecordBuffer &data_buffer() { return *data_buf_; }
  PcRecordBuffer &disable_buffer() { return *disable_buf_; }

 private:
  const CuptiApi &cupti_;
  const CUcontext ctx_;
  const size_t batch_;
  std::unique_ptr<PcRecordBuffer> disable_buf_;  // CUPTI's, filled at Disable
  std::unique_ptr<PcRecordBuffer> data_buf_;     // Get Data's
  char failed_call_[96] = "";                    // a failed call named with detail
};

}  // namespace parcagpu
