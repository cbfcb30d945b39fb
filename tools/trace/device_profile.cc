#include "device_profile.h"

#include <algorithm>

namespace parcagpu::trace {

void DeviceProfile::on_record(uint32_t pid, uint32_t device) {
  Device &d = devices_[device];
  ++d.records;
  d.pids.insert(pid);
}

void DeviceProfile::on_match(uint32_t device, uint32_t kernel, uint64_t gpu_ns) {
  Device &d = devices_[device];
  ++d.kernels;
  d.gpu_ns += gpu_ns;
  Cell &c = d.by_kernel[kernel];
  ++c.kernels;
  c.gpu_ns += gpu_ns;
}

std::vector<DeviceSummary> DeviceProfile::summarize(const NameTable &names, size_t n) const {
  std::vector<DeviceSummary> out;
  for (const auto &[device, d] : devices_) {
    DeviceSummary s;
    s.device = device;
    s.kernel_records = d.records;
    s.kernels = d.kernels;
    s.gpu_ns = d.gpu_ns;
    s.pids = d.pids.size();
    s.kernel_names = d.by_kernel.size();
    s.by_kernel = top_kernels(d.by_kernel, names, n);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace parcagpu::trace
