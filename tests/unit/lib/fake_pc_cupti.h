// A fake table of CUPTI's PC Sampling API for unit tests: every call recorded by name and
// context, a call made to fail by name, the stall reasons offered, the configuration set and the
// sampling period read back, and what Get Data reports. For pc_session_test.cc (PcSession) and
// pc_episodes_test.cc (PcEpisodes and its parts).
#pragma once

#include <cupti.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/cupti_api.h"

namespace parcagpu::fake_pc {

struct FakePc {
  std::vector<std::string> calls;
  std::vector<CUcontext> contexts;
  // Results per call name; absent: success.
  std::string failing;
  CUptiResult failure = CUPTI_ERROR_NOT_SUPPORTED;
  int failing_attribute = -1;  // Set: this attribute's status fails too
  bool period_status_fails = false;
  std::vector<std::pair<uint32_t, std::string>> reasons = {
      {3, "smsp__pcsamp_warps_issue_stalled_long_scoreboard"},
      {4, "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued"},
      {7, "smsp__pcsamp_warps_issue_stalled_selected"},
      {9, "smsp__pcsamp_sample_count"}};
  std::vector<CUpti_PCSamplingConfigurationInfo> configured;
  std::vector<uint32_t> configured_reasons;
  uint32_t period_in_force = 5;
  size_t pcs = 0;  // what Get Data reports
  CUpti_PCSamplingData *data_seen = nullptr;
  size_t total_seen = 0;  // totalNumPcs as Get Data found it
};
inline FakePc *g_fake = nullptr;

inline CUptiResult called(const char *name, CUcontext ctx) {
  g_fake->calls.push_back(name);
  g_fake->contexts.push_back(ctx);
  return g_fake->failing == name ? g_fake->failure : CUPTI_SUCCESS;
}

inline CUptiResult fake_num(CUpti_PCSamplingGetNumStallReasonsParams *p) {
  *p->numStallReasons = g_fake->reasons.size();
  return called("GetNumStallReasons", p->ctx);
}
inline CUptiResult fake_reasons(CUpti_PCSamplingGetStallReasonsParams *p) {
  for (size_t i = 0; i < p->numStallReasons; ++i) {
    p->stallReasonIndex[i] = g_fake->reasons[i].first;
    std::strcpy(p->stallReasons[i], g_fake->reasons[i].second.c_str());
  }
  return called("GetStallReasons", p->ctx);
}
inline CUptiResult fake_enable(CUpti_PCSamplingEnableParams *p) { return called("Enable", p->ctx); }
inline CUptiResult fake_disable(CUpti_PCSamplingDisableParams *p) {
  return called("Disable", p->ctx);
}
inline CUptiResult fake_start(CUpti_PCSamplingStartParams *p) { return called("Start", p->ctx); }
inline CUptiResult fake_stop(CUpti_PCSamplingStopParams *p) { return called("Stop", p->ctx); }
inline CUptiResult fake_get_data(CUpti_PCSamplingGetDataParams *p) {
  auto *d = static_cast<CUpti_PCSamplingData *>(p->pcSamplingData);
  g_fake->data_seen = d;
  g_fake->total_seen = d->totalNumPcs;
  d->totalNumPcs = g_fake->pcs;
  return called("GetData", p->ctx);
}
inline CUptiResult fake_set(CUpti_PCSamplingConfigurationInfoParams *p) {
  g_fake->configured.assign(p->pPCSamplingConfigurationInfo,
                            p->pPCSamplingConfigurationInfo + p->numAttributes);
  for (size_t i = 0; i < p->numAttributes; ++i) {
    auto &info = p->pPCSamplingConfigurationInfo[i];
    info.attributeStatus = static_cast<int>(info.attributeType) == g_fake->failing_attribute
                               ? CUPTI_ERROR_INVALID_PARAMETER
                               : CUPTI_SUCCESS;
    if (info.attributeType == CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON) {
      const auto &r = info.attributeData.stallReasonData;
      g_fake->configured_reasons.assign(r.pStallReasonIndex,
                                        r.pStallReasonIndex + r.stallReasonCount);
    }
  }
  return called("SetConfigurationAttribute", p->ctx);
}
inline CUptiResult fake_get(CUpti_PCSamplingConfigurationInfoParams *p) {
  auto &info = p->pPCSamplingConfigurationInfo[0];
  EXPECT_EQ(p->numAttributes, 1u);
  EXPECT_EQ(info.attributeType, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD);
  info.attributeData.samplingPeriodData.samplingPeriod = g_fake->period_in_force;
  info.attributeStatus =
      g_fake->period_status_fails ? CUPTI_ERROR_INVALID_PARAMETER : CUPTI_SUCCESS;
  return called("GetConfigurationAttribute", p->ctx);
}
inline CUptiResult fake_device(CUcontext ctx, uint32_t *device) {
  *device = 2;
  return called("GetDeviceId", ctx);
}

// Points api's PC Sampling entry points (and cuptiGetDeviceId) at the fakes, which record into
// `fake` (g_fake) until the test ends.
inline void install(CuptiApi &api, FakePc &fake) {
  g_fake = &fake;
  api.cuptiPCSamplingGetNumStallReasons = &fake_num;
  api.cuptiPCSamplingGetStallReasons = &fake_reasons;
  api.cuptiPCSamplingEnable = &fake_enable;
  api.cuptiPCSamplingDisable = &fake_disable;
  api.cuptiPCSamplingStart = &fake_start;
  api.cuptiPCSamplingStop = &fake_stop;
  api.cuptiPCSamplingGetData = &fake_get_data;
  api.cuptiPCSamplingSetConfigurationAttribute = &fake_set;
  api.cuptiPCSamplingGetConfigurationAttribute = &fake_get;
  api.cuptiGetDeviceId = &fake_device;
}

}  // namespace parcagpu::fake_pc
