#include "pc/pc_session.h"

#include <cstdio>

namespace parcagpu {

namespace {

// One PC Sampling API call on its parameters: a failure names the call.
template <typename Params>
PcResult call(CUptiResult (*fn)(Params *), Params params, const char *name) {
  const CUptiResult r = fn(&params);
  if (r != CUPTI_SUCCESS) return {r, name};
  return {};
}

}  // namespace

PcResult PcSession::read_stall_reasons(StallReasonTable *table) {
  size_t count = 0;
  CUpti_PCSamplingGetNumStallReasonsParams np{CUpti_PCSamplingGetNumStallReasonsParamsSize, nullptr,
                                              ctx_, &count};
  CUptiResult r = cupti_.cuptiPCSamplingGetNumStallReasons(&np);
  if (r != CUPTI_SUCCESS) return {r, "cuptiPCSamplingGetNumStallReasons"};
  std::vector<uint32_t> indices(count);
  std::vector<std::unique_ptr<char[]>> storage(count);
  std::vector<char *> names(count);
  for (size_t i = 0; i < count; ++i) {
    storage[i].reset(new char[CUPTI_STALL_REASON_STRING_SIZE]());
    names[i] = storage[i].get();
  }
  CUpti_PCSamplingGetStallReasonsParams sp{CUpti_PCSamplingGetStallReasonsParamsSize,
                                           nullptr,
                                           ctx_,
                                           count,
                                           indices.data(),
                                           names.data()};
  r = cupti_.cuptiPCSamplingGetStallReasons(&sp);
  if (r != CUPTI_SUCCESS) return {r, "cuptiPCSamplingGetStallReasons"};
  table->build(count, indices.data(), names.data());
  if (table->empty())
    return {CUPTI_ERROR_NOT_SUPPORTED, "cuptiPCSamplingGetStallReasons (no usable stall reason)"};
  return {};
}

PcResult PcSession::enable() {
  return call(cupti_.cuptiPCSamplingEnable,
              CUpti_PCSamplingEnableParams{CUpti_PCSamplingEnableParamsSize, nullptr, ctx_},
              "cuptiPCSamplingEnable");
}

PcResult PcSession::configure(const std::vector<uint32_t> &stall_reasons, const Settings &settings,
                              uint32_t *factor) {
  if (!disable_buf_) {
    disable_buf_ = std::make_unique<PcRecordBuffer>(batch_);
    data_buf_ = std::make_unique<PcRecordBuffer>(batch_);
  }
  std::vector<CUpti_PCSamplingConfigurationInfo> infos;
  auto add = [&](CUpti_PCSamplingConfigurationAttributeType type) -> auto & {
    infos.emplace_back();
    infos.back().attributeType = type;
    return infos.back().attributeData;
  };
  auto &sr = add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON);
  sr.stallReasonData.stallReasonCount = stall_reasons.size();
  sr.stallReasonData.pStallReasonIndex = const_cast<uint32_t *>(stall_reasons.data());
  add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE).collectionModeData.collectionMode =
      CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED;
  add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL)
      .enableStartStopControlData.enableStartStopControl = 1;
  disable_buf_->reset();
  add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER)
      .samplingDataBufferData.samplingDataBuffer = disable_buf_->data();
  if (settings.sampling_factor)
    add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD)
        .samplingPeriodData.samplingPeriod = settings.sampling_factor;
  if (settings.hw_buffer_mb)
    add(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE)
        .hardwareBufferSizeData.hardwareBufferSize = size_t{settings.hw_buffer_mb} << 20;
  CUpti_PCSamplingConfigurationInfoParams params{CUpti_PCSamplingConfigurationInfoParamsSize,
                                                 nullptr, ctx_, infos.size(), infos.data()};
  CUptiResult r = cupti_.cuptiPCSamplingSetConfigurationAttribute(&params);
  if (r != CUPTI_SUCCESS) {
    std::snprintf(failed_call_, sizeof failed_call_, "cuptiPCSamplingSetConfigurationAttribute");
    for (const auto &i : infos)
      if (i.attributeStatus != CUPTI_SUCCESS) {
        std::snprintf(failed_call_, sizeof failed_call_,
                      "cuptiPCSamplingSetConfigurationAttribute (attribute %d)",
                      static_cast<int>(i.attributeType));
        break;
      }
    return {r, failed_call_};
  }
  // The sampling period in force, as CUPTI reports it: what gpu_config says.
  CUpti_PCSamplingConfigurationInfo period{};
  period.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
  CUpti_PCSamplingConfigurationInfoParams get{CUpti_PCSamplingConfigurationInfoParamsSize, nullptr,
                                              ctx_, 1, &period};
  r = cupti_.cuptiPCSamplingGetConfigurationAttribute(&get);
  if (r != CUPTI_SUCCESS || period.attributeStatus != CUPTI_SUCCESS)
    return {r != CUPTI_SUCCESS ? r : period.attributeStatus,
            "cuptiPCSamplingGetConfigurationAttribute (sampling period)"};
  *factor = period.attributeData.samplingPeriodData.samplingPeriod;
  return {};
}

PcResult PcSession::start() {
  return call(cupti_.cuptiPCSamplingStart,
              CUpti_PCSamplingStartParams{CUpti_PCSamplingStartParamsSize, nullptr, ctx_},
              "cuptiPCSamplingStart");
}

PcResult PcSession::stop() {
  return call(cupti_.cuptiPCSamplingStop,
              CUpti_PCSamplingStopParams{CUpti_PCSamplingStopParamsSize, nullptr, ctx_},
              "cuptiPCSamplingStop");
}

PcResult PcSession::get_data() {
  PcRecordBuffer &buf = *data_buf_;
  buf.reset();
  return call(
      cupti_.cuptiPCSamplingGetData,
      CUpti_PCSamplingGetDataParams{CUpti_PCSamplingGetDataParamsSize, nullptr, ctx_, buf.data()},
      "cuptiPCSamplingGetData");
}

PcResult PcSession::disable() {
  return call(cupti_.cuptiPCSamplingDisable,
              CUpti_PCSamplingDisableParams{CUpti_PCSamplingDisableParamsSize, nullptr, ctx_},
              "cuptiPCSamplingDisable");
}

uint32_t PcSession::device_id() const {
  uint32_t device = 0;
  if (cupti_.cuptiGetDeviceId(ctx_, &device) != CUPTI_SUCCESS) device = 0;
  return device;
}

}  // namespace parcagpu
