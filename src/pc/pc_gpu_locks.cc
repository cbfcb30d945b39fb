#include "pc/pc_gpu_locks.h"

#include <cstdio>
#include <cstring>

#include "base/config.h"
#include "base/cupti_api.h"
#include "base/log.h"
#include "pc/pc_stats.h"

namespace parcagpu {

PcGpuLocks::PcGpuLocks(const CuptiApi &cupti, const CudaApi *cuda, const Config &config)
    : cupti_(cupti), cuda_(cuda), config_(config), locks_(config.pc_lock_dir) {}

std::string PcGpuLocks::gpu_name(CUcontext ctx) const {
  // The PCI address: the same GPU has it in every process, whatever CUDA_VISIBLE_DEVICES says.
  uint32_t ordinal = 0;
  int domain = 0, bus = 0, slot = 0;
  CUdevice dev = 0;
  if (!cuda_ || cupti_.cuptiGetDeviceId(ctx, &ordinal) != CUPTI_SUCCESS ||
      cuda_->cuDeviceGet(&dev, static_cast<int>(ordinal)) != CUDA_SUCCESS ||
      cuda_->cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev) !=
          CUDA_SUCCESS ||
      cuda_->cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev) != CUDA_SUCCESS ||
      cuda_->cuDeviceGetAttribute(&slot, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev) != CUDA_SUCCESS)
    return "any";
  char name[32];
  std::snprintf(name, sizeof name, "%04x:%02x:%02x", domain, bus, slot);
  return name;
}

bool PcGpuLocks::acquire(PcGpuLock &c, CUcontext ctx, uint64_t now, PcStats &stats) {
  if (c.locked) return true;
  if (now < c.retry_ns) return false;
  if (c.gpu.empty()) c.gpu = gpu_name(ctx);
  switch (locks_.try_acquire(c.gpu)) {
    case PcDeviceLocks::Result::kAcquired:
      c.locked = true;
      return true;
    case PcDeviceLocks::Result::kBusy:
      stats.put_off_for_other_process++;
      c.retry_ns = now + kOtherProcessRetryNs;
      if (!said_other_process_) {
        said_other_process_ = true;
        debug_log(
            "PC sampling put off: another process samples GPU %s (%s); tried again every "
            "%llu ms",
            c.gpu.c_str(), locks_.path(c.gpu).c_str(),
            static_cast<unsigned long long>(kOtherProcessRetryNs / 1000000));
      }
      return false;
    case PcDeviceLocks::Result::kUnavailable:
      keep_off(c, stats);
      return false;
  }
  return false;
}

// Without its lock a GPU is not sampled: another process sampling it at the same time would
// crash one of them (P27). A setting to fix, so said once without PARCAGPU_DEBUG; counted.
void PcGpuLocks::keep_off(PcGpuLock &c, PcStats &stats) {
  c.retry_ns = ~uint64_t{0};  // never asked again
  stats.contexts_without_lock++;
  if (said_no_lock_) return;
  said_no_lock_ = true;
  report_error(kErrConfig, "pc_sampling",
               "the GPU lock %s cannot be had (%s: %s; PARCAGPU_PC_LOCK_DIR=%s): PC sampling stays "
               "off for GPU %s, since two processes sampling one GPU crash one of them (kernel "
               "timing goes on)",
               locks_.path(c.gpu).c_str(), locks_.failed_call(),
               std::strerror(locks_.failed_errno()), config_.pc_lock_dir.c_str(), c.gpu.c_str());
}

void PcGpuLocks::release(PcGpuLock &c) {
  if (!c.locked) return;
  locks_.release(c.gpu);
  c.locked = false;
}

}  // namespace parcagpu
