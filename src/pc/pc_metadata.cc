#include "pc/pc_metadata.h"

#include "base/log.h"
#include "pc/pc_records.h"
#include "pc/pc_session.h"
#include "trackers/cubin_registry.h"

namespace parcagpu {
namespace {

// Metadata is fired again this often while consumers listen (see pc_metadata.h).
constexpr uint64_t kMetadataRefreshNs = 30'000'000'000;

}  // namespace

PcMetadata::PcMetadata(const CuptiApi &cupti, const CudaApi *cuda, const PcMetadataProbes &probes)
    : cuda_(cuda),
      probes_(probes),
      cubins_(std::make_unique<CubinRegistry>(cupti, probes.cubin_loaded)),
      stall_(std::make_unique<StallReasonTable>()) {}

PcMetadata::~PcMetadata() = default;

bool PcMetadata::has_fired() const {
  if (cubins_->stats().live > 0) return true;
  std::lock_guard<std::mutex> lock(mu_);
  return stall_built_ || !configs_.empty();
}

void PcMetadata::refresh(uint64_t now) {
  uint64_t due = next_refresh_ns_.load(std::memory_order_relaxed);
  if (now < due) return;
  if (!next_refresh_ns_.compare_exchange_strong(due, now + kMetadataRefreshNs)) return;
  if (due == 0) return;  // the first call only sets the clock: everything was just fired
  fire();
}

void PcMetadata::fire() {
  if (probes_.cubin_loaded.consumers()) cubins_->refire();
  std::lock_guard<std::mutex> lock(mu_);
  if (stall_built_ && probes_.stall_reason_map.consumers())
    probes_.stall_reason_map.fire(stall_->blob(), PARCAGPU_STALL_REASON_MAX);
  if (probes_.gpu_config.consumers()) fire_gpu_configs();
}

void PcMetadata::fire_gpu_configs() {
  for (const DeviceConfig &d : configs_)
    probes_.gpu_config.fire(d.device, d.factor, d.clock_khz, d.sm_count);
}

PcResult PcMetadata::read_stall_reasons(PcSession &session) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stall_built_) return {};
  }
  StallReasonTable table;
  const PcResult r = session.read_stall_reasons(&table);
  if (!r.ok()) return r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    *stall_ = table;
    stall_built_ = true;
  }
  debug_log("PC sampling: %zu stall reasons offered, %zu collected, %zu with an index past %d",
            stall_->offered(), stall_->collected().size(), stall_->unusable(),
            PARCAGPU_STALL_REASON_MAX);
  return r;
}

void PcMetadata::on_configured(uint32_t device, uint32_t factor) {
  bool known = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const DeviceConfig &d : configs_) known |= d.device == device;
  }
  if (!known) add_device(device, factor);
  if (!stall_map_fired_) {
    stall_map_fired_ = true;
    probes_.stall_reason_map.fire(stall_->blob(), PARCAGPU_STALL_REASON_MAX);
  }
}

void PcMetadata::add_device(uint32_t device, uint32_t factor) {
  int clock_khz = 0, sms = 0;
  CUdevice dev = 0;
  if (cuda_) {
    // Device facts from the driver; a failing query is said once (gpu_config is then not fired
    // for want of a clock rate, or carries 0 SMs).
    static RepeatedError device_query_failed("gpu_config", "device queries failed");
    CUresult r = cuda_->cuDeviceGet(&dev, static_cast<int>(device));
    if (r == CUDA_SUCCESS)
      r = cuda_->cuDeviceGetAttribute(&clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev);
    if (r == CUDA_SUCCESS)
      r = cuda_->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    if (r != CUDA_SUCCESS)
      device_query_failed.report(kErrDriver,
                                 "cuDeviceGet/cuDeviceGetAttribute failed for device %u "
                                 "(CUresult %d): its gpu_config is not fired or incomplete",
                                 device, static_cast<int>(r));
  }
  if (clock_khz <= 0) {
    debug_log("no clock rate for device %u (libcuda missing?): gpu_config not fired", device);
    return;
  }
  uint32_t first_clock_khz = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!configs_.empty()) first_clock_khz = configs_.front().clock_khz;
    configs_.push_back(
        {device, factor, static_cast<uint32_t>(clock_khz), static_cast<uint32_t>(sms)});
  }
  // The agent keeps one gpu_config per process (interpreter/gpu/config.go): the factor is the
  // same on every device (PcEpisodes::configure), a clock rate cannot be.
  static RepeatedError clock_differs("gpu_config", "devices of another clock rate");
  if (first_clock_khz != 0 && first_clock_khz != static_cast<uint32_t>(clock_khz))
    clock_differs.report(kErrDataLost,
                         "device %u runs at %d kHz, the process's first device at %u kHz: the "
                         "agent keeps one gpu_config per process and scales one device's PC "
                         "samples by the other's clock",
                         device, clock_khz, first_clock_khz);
  // Now the factor is in force: the first gpu_config a consumer keeps is right.
  probes_.gpu_config.fire(device, factor, static_cast<uint32_t>(clock_khz),
                          static_cast<uint32_t>(sms));
  debug_log("gpu_config device %u: sampling factor %u, %d kHz, %d SMs", device, factor, clock_khz,
            sms);
}

}  // namespace parcagpu
