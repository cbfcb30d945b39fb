// Which GPUs this process may sample: PC sampling in two processes on one GPU crashes one of them
// (docs/pc-sampling.md P27), so each context's GPU lock file (PcDeviceLocks, in
// PARCAGPU_PC_LOCK_DIR) is taken before its Enable and given back after its Disable. A lock
// another process holds is asked for again kOtherProcessRetryNs later; one that cannot be had at
// all keeps that GPU off for good. Both said once and counted in PcStats. Under PcEpisodes' mutex.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "pc/pc_device_lock.h"
#include "pc/pc_forward.h"

namespace parcagpu {

// One context's GPU lock.
struct PcGpuLock {
  std::string gpu;        // its GPU's name for PcDeviceLocks ("" until first asked)
  bool locked = false;    // this process holds that GPU's lock
  uint64_t retry_ns = 0;  // the lock was busy (or cannot be had): not asked before this
};

class PcGpuLocks {
 public:
  // How often a process asks again for a GPU another process samples.
  static constexpr uint64_t kOtherProcessRetryNs = 50'000'000;

  PcGpuLocks(const CuptiApi &cupti, const CudaApi *cuda, const Config &config);
  // The lock of ctx's GPU, taken (true), or not now (false: another process samples that GPU,
  // or its lock cannot be had).
  bool acquire(PcGpuLock &lock, CUcontext ctx, uint64_t now_ns, PcStats &stats);
  void release(PcGpuLock &lock);

 private:
  // The PCI address of ctx's GPU ("any" where it cannot be read).
  std::string gpu_name(CUcontext ctx) const;
  void keep_off(PcGpuLock &lock, PcStats &stats);

  const CuptiApi &cupti_;
  const CudaApi *cuda_;
  const Config &config_;
  PcDeviceLocks locks_;  // in config_.pc_lock_dir
  bool said_other_process_ = false, said_no_lock_ = false;
};

}  // namespace parcagpu
