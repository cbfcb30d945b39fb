// Which kernels give PC sampling records when PC sampling is enabled only in episodes: a kernel
// first used before PC sampling was ever enabled, one first used inside a window, one first used
// while PC sampling was disabled between two episodes, one first used while enabled but not
// started. Standalone CUPTI client (no parcagpu). Prints "FACT firstuse ..." lines: records and
// samples per kernel in each episode, and CUPTI's non-user-kernel sample count.
//
// Build:  nvcc -O2 -std=c++17 -arch=sm_90 -o pc_firstuse_facts pc_firstuse_facts.cu -lcuda -lcupti
#include <map>
#include <string>
#include <vector>

#include "pc_facts.h"

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      printf("FACT cuda_error %s: %s\n", #x, cudaGetErrorString(e_));          \
      exit(2);                                                                 \
    }                                                                          \
  } while (0)

static float *g_f;
static CUcontext g_ctx;
static size_t g_nstall;
static std::vector<uint32_t> g_idx;
static CUpti_PCSamplingData g_cfg, g_out;

static void launch(int k) {
  switch (k) {
    case 0: fwork<0><<<528, 256>>>(g_f, 3000); break;
    case 1: fwork<1><<<528, 256>>>(g_f, 3000); break;
    case 2: fwork<2><<<528, 256>>>(g_f, 3000); break;
    case 3: fwork<3><<<528, 256>>>(g_f, 3000); break;
    case 4: fwork<4><<<528, 256>>>(g_f, 3000); break;
  }
  CK(cudaGetLastError());
}

static void enable_configure(const char *where) {
  CUpti_PCSamplingEnableParams ep = {CUpti_PCSamplingEnableParamsSize, nullptr, g_ctx};
  CUptiResult r = cuptiPCSamplingEnable(&ep);
  if (g_nstall == 0) {
    CUpti_PCSamplingGetNumStallReasonsParams np = {CUpti_PCSamplingGetNumStallReasonsParamsSize, nullptr, g_ctx, &g_nstall};
    cuptiPCSamplingGetNumStallReasons(&np);
    g_idx.resize(g_nstall);
    std::vector<char *> names(g_nstall);
    for (auto &n : names) n = (char *)calloc(CUPTI_STALL_REASON_STRING_SIZE, 1);
    CUpti_PCSamplingGetStallReasonsParams sp = {CUpti_PCSamplingGetStallReasonsParamsSize, nullptr, g_ctx, g_nstall, g_idx.data(), names.data()};
    cuptiPCSamplingGetStallReasons(&sp);
    alloc_buf(&g_cfg, 4096);
    alloc_buf(&g_out, 4096);
  }
  CUpti_PCSamplingConfigurationInfo inf[4] = {};
  inf[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
  inf[0].attributeData.stallReasonData.stallReasonCount = g_nstall;
  inf[0].attributeData.stallReasonData.pStallReasonIndex = g_idx.data();
  inf[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
  inf[1].attributeData.collectionModeData.collectionMode = CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED;
  inf[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
  inf[2].attributeData.enableStartStopControlData.enableStartStopControl = 1;
  inf[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
  inf[3].attributeData.samplingDataBufferData.samplingDataBuffer = &g_cfg;
  CUpti_PCSamplingConfigurationInfoParams p = {CUpti_PCSamplingConfigurationInfoParamsSize, nullptr, g_ctx, 4, inf};
  CUptiResult c = cuptiPCSamplingSetConfigurationAttribute(&p);
  printf("FACT firstuse_enable where=%s enable=%s configure=%s\n", where, rs(r), rs(c));
}

static void start() {
  CUpti_PCSamplingStartParams p = {CUpti_PCSamplingStartParamsSize, nullptr, g_ctx};
  CUptiResult r = cuptiPCSamplingStart(&p);
  if (r != CUPTI_SUCCESS) printf("FACT firstuse_start rc=%s\n", rs(r));
}
static void stop() {
  CUpti_PCSamplingStopParams p = {CUpti_PCSamplingStopParamsSize, nullptr, g_ctx};
  CUptiResult r = cuptiPCSamplingStop(&p);
  if (r != CUPTI_SUCCESS) printf("FACT firstuse_stop rc=%s\n", rs(r));
}
static void disable() {
  CUpti_PCSamplingDisableParams p = {CUpti_PCSamplingDisableParamsSize, nullptr, g_ctx};
  CUptiResult r = cuptiPCSamplingDisable(&p);
  if (r != CUPTI_SUCCESS) printf("FACT firstuse_disable rc=%s\n", rs(r));
}

// Get Data until empty; per kernel (by the K in its name) records and samples.
static void drain_print(const char *episode) {
  std::map<std::string, std::pair<size_t, unsigned long long>> by;
  unsigned long long nonusr = 0, total = 0;
  for (int g = 0; g < 1000; ++g) {
    g_out.totalNumPcs = g_out.remainingNumPcs = 0;
    g_out.totalSamples = g_out.nonUsrKernelsTotalSamples = g_out.droppedSamples = 0;
    CUpti_PCSamplingGetDataParams p = {CUpti_PCSamplingGetDataParamsSize, nullptr, g_ctx, &g_out};
    CUptiResult r = cuptiPCSamplingGetData(&p);
    if (r != CUPTI_SUCCESS) {
      printf("FACT firstuse_getdata rc=%s\n", rs(r));
      break;
    }
    nonusr += g_out.nonUsrKernelsTotalSamples;
    total += g_out.totalSamples;
    for (size_t i = 0; i < g_out.totalNumPcs && i < g_out.collectNumPcs; ++i) {
      const CUpti_PCSamplingPCData &d = g_out.pPcData[i];
      std::string fn = d.functionName ? d.functionName : "?";
      auto &e = by[fn];
      e.first++;
      for (size_t s = 0; s < d.stallReasonCount; ++s) e.second += d.stallReason[s].samples;
    }
    if (g_out.remainingNumPcs == 0) break;
  }
  printf("FACT firstuse_episode %s total=%llu nonusr=%llu", episode, total, nonusr);
  for (auto &kv : by) printf(" %s:records=%zu,samples=%llu", kv.first.c_str(), kv.second.first, kv.second.second);
  printf("\n");
  fflush(stdout);
}

int main() {
  CK(cudaFree(0));
  CK(cudaMalloc(&g_f, 1 << 20));
  cuCtxGetCurrent(&g_ctx);
  // fwork<0>: first used before PC sampling was ever enabled.
  launch(0);
  CK(cudaDeviceSynchronize());
  // Episode 1: fwork<1> first used inside the window; fwork<0> too.
  enable_configure("episode1");
  start();
  for (int i = 0; i < 2; ++i) { launch(0); launch(1); }
  CK(cudaDeviceSynchronize());
  stop();
  drain_print("1 (k0 used before any enable, k1 first used in this window)");
  disable();
  // Between episodes: fwork<2> first used while PC sampling is disabled.
  launch(2);
  CK(cudaDeviceSynchronize());
  // Episode 2: fwork<3> first used while enabled, not started; then everything in the window.
  enable_configure("episode2");
  launch(3);
  CK(cudaDeviceSynchronize());
  start();
  for (int i = 0; i < 2; ++i) for (int k = 0; k < 4; ++k) launch(k);
  CK(cudaDeviceSynchronize());
  stop();
  drain_print("2 (k2 first used between episodes, k3 first used enabled-not-started)");
  disable();
  // Episode 3: the same again, and fwork<4> first used in this window.
  enable_configure("episode3");
  start();
  for (int i = 0; i < 2; ++i) for (int k = 0; k < 5; ++k) launch(k);
  CK(cudaDeviceSynchronize());
  stop();
  drain_print("3 (k4 first used in this window)");
  disable();
  printf("FACT firstuse_done\n");
  return 0;
}
