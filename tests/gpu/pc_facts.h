// What the PC sampling fact programs (pc_sampling_facts.cu, pc_episode_facts.cu,
// pc_firstuse_facts.cu, pc_twoctx_facts.cu) share: the clock,
// CUPTI's result names, kernels of known character, the launch record, the PC sampling buffers
// and calls (timed, and named in g_step for the watchdog while they run), the stall reasons and
// the base configuration. Standalone CUPTI clients: no parcagpu here.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pcsampling.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// Where the program is, for the watchdog: the last CUPTI call begun ("after_CALL" once it
// returned): a CUPTI call that never returns is a fact too.
static std::atomic<const char *> g_step{"init"};

static double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

static const char *rs(CUptiResult r) {
  const char *s = nullptr;
  cuptiGetResultString(r, &s);
  return s ? s : "?";
}

// ---------------------------------------------------------------- kernels of known character
__global__ void tiny(int *p) {
  if (threadIdx.x == 0 && p) p[blockIdx.x & 63] += 1;
}

// Streams a buffer: waits on memory.
__global__ void membound(const float4 *__restrict__ in, float4 *__restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float4 v = in[i];
    v.x = v.x * 1.5f + 1.0f;
    v.y = v.y * 1.5f + 1.0f;
    v.z = v.z * 1.5f + 1.0f;
    v.w = v.w * 1.5f + 1.0f;
    out[i] = v;
  }
}

// Dependent floating-point chains in registers (waits on arithmetic): the body of compute
// (pc_sampling_facts.cu) and gwork<K> (pc_episode_facts.cu).
__device__ __forceinline__ void arithmetic_chain(float *out, int iters, float seed) {
  float a = threadIdx.x * 0.001f + seed, b = blockIdx.x * 0.002f, c = 1.0f;
  for (int i = 0; i < iters; ++i) {
    a = fmaf(a, 1.000001f, b);
    b = fmaf(b, 0.999999f, c);
    c = __sinf(a) * 0.5f + c * 0.5f;
  }
  if (a + b + c == 12345.0f) out[threadIdx.x] = a + b + c;
}

// Compute-bound, one instance per K: kernels of the same shape with names of their own, to tell
// apart by when each was first launched (pc_firstuse_facts.cu, pc_twoctx_facts.cu).
template <int K>
__global__ void fwork(float *out, int iters) {
  float a = threadIdx.x * 0.001f + K, b = blockIdx.x * 0.002f, c = 1.0f;
  for (int i = 0; i < iters; ++i) {
    a = fmaf(a, 1.000001f, b);
    c = fmaf(c, a, 0.5f);
  }
  if (c == 12345.0f) out[blockIdx.x] = c;
}

__global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// A launch the callbacks saw.
struct Launch {
  uint32_t corr;
  int cbid;  // negative: driver API
  std::string name;
};

// ---------------------------------------------------------------- PC sampling
static size_t g_num_stall = 0;
static std::vector<uint32_t> g_stall_idx;
static CUpti_PCSamplingData g_cfg_buf, g_out_buf;

static void alloc_buf(CUpti_PCSamplingData *d, size_t pcs) {
  memset(d, 0, sizeof *d);
  d->size = sizeof(CUpti_PCSamplingData);
  d->collectNumPcs = pcs;
  d->pPcData = (CUpti_PCSamplingPCData *)calloc(pcs, sizeof(CUpti_PCSamplingPCData));
  for (size_t i = 0; i < pcs; ++i) {
    d->pPcData[i].size = sizeof(CUpti_PCSamplingPCData);
    d->pPcData[i].stallReason =
        (CUpti_PCSamplingStallReason *)calloc(64, sizeof(CUpti_PCSamplingStallReason));
  }
}

// cuptiPCSampling<What>(ctx), its time in *ms (when given), named in g_step.
template <typename Params>
static CUptiResult pc_call(const char *name, const char *after, CUptiResult (*call)(Params *),
                           size_t params_size, CUcontext ctx, double *ms) {
  g_step = name;
  double t0 = now_ms();
  Params p = {params_size, nullptr, ctx};
  CUptiResult r = call(&p);
  if (ms) *ms = now_ms() - t0;
  g_step = after;
  return r;
}
#define PC_CALL(What, ctx, ms)                                                    \
  pc_call("cuptiPCSampling" #What, "after_cuptiPCSampling" #What, cuptiPCSampling##What, \
          CUpti_PCSampling##What##ParamsSize, ctx, ms)
static CUptiResult pc_enable(CUcontext ctx, double *ms) { return PC_CALL(Enable, ctx, ms); }
static CUptiResult pc_disable(CUcontext ctx, double *ms) { return PC_CALL(Disable, ctx, ms); }
static CUptiResult pc_start(CUcontext ctx, double *ms) { return PC_CALL(Start, ctx, ms); }
static CUptiResult pc_stop(CUcontext ctx, double *ms) { return PC_CALL(Stop, ctx, ms); }

// The stall reasons into g_num_stall and g_stall_idx, their names returned; *num_rc and *names_rc
// the two calls' results.
static std::vector<std::string> query_stall_reasons(CUcontext ctx, CUptiResult *num_rc,
                                                    CUptiResult *names_rc) {
  CUpti_PCSamplingGetNumStallReasonsParams np = {CUpti_PCSamplingGetNumStallReasonsParamsSize,
                                                 nullptr, ctx, &g_num_stall};
  *num_rc = cuptiPCSamplingGetNumStallReasons(&np);
  g_stall_idx.resize(g_num_stall);
  std::vector<char *> names(g_num_stall);
  for (auto &n : names) n = (char *)calloc(CUPTI_STALL_REASON_STRING_SIZE, 1);
  CUpti_PCSamplingGetStallReasonsParams sp = {CUpti_PCSamplingGetStallReasonsParamsSize, nullptr,
                                              ctx, g_num_stall, g_stall_idx.data(), names.data()};
  *names_rc = cuptiPCSamplingGetStallReasons(&sp);
  return std::vector<std::string>(names.begin(), names.end());
}

// The configuration both programs start from: every stall reason, `mode`, start/stop control on,
// g_cfg_buf as the sampling data buffer; a program appends what else it sets.
static std::vector<CUpti_PCSamplingConfigurationInfo> base_config(
    CUpti_PCSamplingCollectionMode mode) {
  std::vector<CUpti_PCSamplingConfigurationInfo> infos;
  CUpti_PCSamplingConfigurationInfo i{};
  i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
  i.attributeData.stallReasonData.stallReasonCount = g_num_stall;
  i.attributeData.stallReasonData.pStallReasonIndex = g_stall_idx.data();
  infos.push_back(i);
  i = {};
  i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
  i.attributeData.collectionModeData.collectionMode = mode;
  infos.push_back(i);
  i = {};
  i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
  i.attributeData.enableStartStopControlData.enableStartStopControl = 1;
  infos.push_back(i);
  i = {};
  i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
  i.attributeData.samplingDataBufferData.samplingDataBuffer = &g_cfg_buf;
  infos.push_back(i);
  return infos;
}
