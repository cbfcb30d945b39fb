// What PC sampling's consumers need besides the samples: stall_reason_map once PC sampling is
// configured, gpu_config per device with the sampling factor read back from CUPTI (the one in
// force; never before, never 0), cubins from process start (CubinRegistry); all fired again a
// moment after their semaphore count rises (PcSampler::fire_metadata, kAttachSettleNs,
// consumers.h), and every kMetadataRefreshNs while consumers listen: the kernel raises a USDT
// semaphore only when the first uprobe on that probe is installed in the process, so a consumer
// that attaches while another is attached raises nothing (seen here, kernel 6.18) and would
// otherwise never get what was fired before it came.
//
// Its own mutex, taken briefly and never while waiting for other threads' launches, so firing
// metadata can't wait on PC sampling's launch gate. Makes no PC Sampling API call of its own: the
// stall-reason table is read through the session PcSampler configures.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "base/cupti_api.h"
#include "base/usdt.h"
#include "pc/pc_forward.h"

namespace parcagpu {

// The probes PcMetadata fires (the library's, or a unit test's recorders).
struct PcMetadataProbes {
  usdt::stall_reason_map_probe stall_reason_map = usdt::probe::stall_reason_map;
  usdt::gpu_config_probe gpu_config = usdt::probe::gpu_config;
  usdt::cubin_loaded_probe cubin_loaded = usdt::probe::cubin_loaded;  // its CubinRegistry's
};

class PcMetadata {
 public:
  // cuda may be null (no clock rates: gpu_config is not fired).
  PcMetadata(const CuptiApi &cupti, const CudaApi *cuda,
             const PcMetadataProbes &probes = PcMetadataProbes{});
  ~PcMetadata();

  CubinRegistry &cubins() { return *cubins_; }
  // Whether any metadata was fired yet (a consumer attaching now missed it).
  bool has_fired() const;
  // Every piece fired again, to the consumers it has now.
  void fire();
  // Fired again if kMetadataRefreshNs passed since the last time (the first call only sets the
  // clock). Any thread, lock-free until due.
  void refresh(uint64_t now_ns);

  // The stall reasons to configure, read through `session` the first time (said in the debug
  // log); a failed read is returned and nothing is kept.
  PcResult read_stall_reasons(PcSession &session);
  const StallReasonTable &stall() const { return *stall_; }
  // PC sampling was configured on `device` with `factor` in force: its gpu_config fired (the
  // first time the device is seen, with the driver's clock rate and SM count), and the stall
  // map the first time of all.
  void on_configured(uint32_t device, uint32_t factor);

 private:
  void fire_gpu_configs();  // under mu_
  void add_device(uint32_t device, uint32_t factor);

  const CudaApi *cuda_;
  const PcMetadataProbes probes_;
  const std::unique_ptr<CubinRegistry> cubins_;
  const std::unique_ptr<StallReasonTable> stall_;
  bool stall_map_fired_ = false;  // PcSampler's mutex
  mutable std::mutex mu_;         // stall_built_, configs_
  bool stall_built_ = false;
  struct DeviceConfig {
    uint32_t device, factor, clock_khz, sm_count;
  };
  std::vector<DeviceConfig> configs_;
  std::atomic<uint64_t> next_refresh_ns_{0};
};

}  // namespace parcagpu
