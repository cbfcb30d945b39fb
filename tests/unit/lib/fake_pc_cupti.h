// A fake PC Sampling API table: records the calls made (and on which context), fails the one
// named, offers a stall-reason list, keeps what configure set and reads back a sampling factor,
// and gives Get Data's records as scripted. A test points g_fake at its FakePc and the CuptiApi
// entries it needs at these functions (install() points them all). For pc_session_test.cc,
// pc_metadata_test.cc, pc_publish_test.cc, pc_episodes_test.cc (PcEpisodes and its parts) and
// fake_launch_cupti.h.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "base/cupti_api.h"

namespace parcagpu::fake_pc {

// One Get Data: the records it gives, how many CUPTI says remain, its counters, its result.
struct GetDataPass {
  size_t pcs = 0, remaining = 0;
  uint64_t dropped = 0, nonuser = 0;
  CUptiResult result = CUPTI_SUCCESS;
};

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
  size_t pcs = 0;                  // what Get Data reports, once `passes` is done
  std::deque<GetDataPass> passes;  // Get Data's script: a pass a call
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
  GetDataPass pass;
  pass.pcs = g_fake->pcs;
  if (!g_fake->passes.empty()) {
    pass = g_fake->passes.front();
    g_fake->passes.pop_front();
  }
  d->totalNumPcs = pass.pcs;
  d->remainingNumPcs = pass.remaining;
  d->droppedSamples = pass.dropped;
  d->nonUsrKernelsTotalSamples = pass.nonuser;
  const CUptiResult r = called("GetData", p->ctx);
  return r == CUPTI_SUCCESS ? pass.result : r;
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
