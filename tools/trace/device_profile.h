// GPU time and kernels by device: every kernel record read, and every kernel matched to its
// launch with its GPU time (end - start), per device and kernel name. The device is the kernel
// record's deviceId (include/parcagpu/abi.h, PARCAGPU_KREC_OFF_DEVICE_ID): the CUDA device ordinal
// as the process numbers its devices, so CUDA_VISIBLE_DEVICES renumbers it (processes that each
// see one GPU all report device 0; `pids` per device says how many processes a row adds up).
// What the "GPU time by device" section and gpu_time_by_device in the JSON show.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <vector>

#include "joiner.h"
#include "stacks.h"

namespace parcagpu::trace {

class DeviceProfile {
 public:
  // Every kernel record read (activity_batch), matched or not.
  void on_record(uint32_t pid, uint32_t device);
  // A kernel matched to its launch (Tracer::on_match).
  void on_match(uint32_t device, uint32_t kernel_name_id, uint64_t gpu_ns);

  // One row per device seen, by device ordinal; per device its kernels by GPU time, the top
  // `kernels_per_device` of them.
  std::vector<DeviceSummary> summarize(const NameTable &names, size_t kernels_per_device) const;

 private:
  struct Cell {
    uint64_t gpu_ns = 0, kernels = 0;
  };
  struct Device {
    uint64_t records = 0, kernels = 0, gpu_ns = 0;
    std::set<uint32_t> pids;
    std::map<uint32_t, Cell> by_kernel;  // kernel name id -> matched
  };
  std::map<uint32_t, Device> devices_;
};

}  // namespace parcagpu::trace
