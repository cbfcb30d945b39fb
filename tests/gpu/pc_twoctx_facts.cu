// Which kernels of a second GPU give PC sampling records (issue 19: on two H100s/H200s the
// library got records from device 0 only). Two devices, one process, standalone CUPTI client (no
// parcagpu), kernel-serialized with start/stop control. Kernels fwork<K> on device 1, K by when
// it was first launched there:
//   k0 before PC sampling was ever enabled in the process;
//   k1 while enabled on device 0 only (device 1 not yet);
//   k2 while enabled on device 1 too, not started ("joined");
//   k3 while disabled everywhere, between episodes;
//   k4 inside device 1's own window (episode 2);
//   k5 inside device 1's window of episode 3, where device 1 is enabled first.
// Device 0 runs k0/k1 as a control. Prints "FACT twoctx ..." lines: records and samples per
// kernel name in each window, and CUPTI's non-user-kernel sample count.
//
// Build:  nvcc -O2 -std=c++17 -arch=sm_90 -o pc_twoctx_facts pc_twoctx_facts.cu -lcuda -lcupti
//         (plus -I/-L for CUPTI where the toolkit keeps it)
#define CHECK_PROGRAM "pc_twoctx_facts"
#include <map>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "pc_facts.h"

struct Dev {
  int id;
  CUcontext ctx;
  float *f;
  CUpti_PCSamplingData cfg, out;
  size_t nstall = 0;
  std::vector<uint32_t> idx;
};
static Dev g_dev[2];

static void use(Dev &d) { CHECK(cudaSetDevice(d.id)); }

static void launch(Dev &d, int k) {
  use(d);
  switch (k) {
    case 0: fwork<0><<<528, 256>>>(d.f, 3000); break;
    case 1: fwork<1><<<528, 256>>>(d.f, 3000); break;
    case 2: fwork<2><<<528, 256>>>(d.f, 3000); break;
    case 3: fwork<3><<<528, 256>>>(d.f, 3000); break;
    case 4: fwork<4><<<528, 256>>>(d.f, 3000); break;
    case 5: fwork<5><<<528, 256>>>(d.f, 3000); break;
  }
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
}

static void enable_configure(Dev &d, const char *where) {
  use(d);
  CUpti_PCSamplingEnableParams ep = {CUpti_PCSamplingEnableParamsSize, nullptr, d.ctx};
  CUptiResult r = cuptiPCSamplingEnable(&ep);
  if (d.nstall == 0) {
    CUpti_PCSamplingGetNumStallReasonsParams np = {CUpti_PCSamplingGetNumStallReasonsParamsSize, nullptr, d.ctx, &d.nstall};
    cuptiPCSamplingGetNumStallReasons(&np);
    d.idx.resize(d.nstall);
    std::vector<char *> names(d.nstall);
    for (auto &n : names) n = (char *)calloc(CUPTI_STALL_REASON_STRING_SIZE, 1);
    CUpti_PCSamplingGetStallReasonsParams sp = {CUpti_PCSamplingGetStallReasonsParamsSize, nullptr, d.ctx, d.nstall, d.idx.data(), names.data()};
    cuptiPCSamplingGetStallReasons(&sp);
    alloc_buf(&d.cfg, 4096);
    alloc_buf(&d.out, 4096);
  }
  CUpti_PCSamplingConfigurationInfo inf[4] = {};
  inf[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
  inf[0].attributeData.stallReasonData.stallReasonCount = d.nstall;
  inf[0].attributeData.stallReasonData.pStallReasonIndex = d.idx.data();
  inf[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
  inf[1].attributeData.collectionModeData.collectionMode = CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED;
  inf[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
  inf[2].attributeData.enableStartStopControlData.enableStartStopControl = 1;
  inf[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
  inf[3].attributeData.samplingDataBufferData.samplingDataBuffer = &d.cfg;
  CUpti_PCSamplingConfigurationInfoParams p = {CUpti_PCSamplingConfigurationInfoParamsSize, nullptr, d.ctx, 4, inf};
  CUptiResult c = cuptiPCSamplingSetConfigurationAttribute(&p);
  printf("FACT twoctx_enable where=%s device=%d enable=%s configure=%s\n", where, d.id, rs(r), rs(c));
}

static void Start(Dev &d) {
  use(d);
  if (CUptiResult r = pc_start(d.ctx, nullptr)) printf("FACT twoctx_start device=%d rc=%s\n", d.id, rs(r));
}
static void Stop(Dev &d) {
  use(d);
  if (CUptiResult r = pc_stop(d.ctx, nullptr)) printf("FACT twoctx_stop device=%d rc=%s\n", d.id, rs(r));
}
static void Disable(Dev &d) {
  use(d);
  if (CUptiResult r = pc_disable(d.ctx, nullptr)) printf("FACT twoctx_disable device=%d rc=%s\n", d.id, rs(r));
}

// Get Data until empty; per kernel name records and samples.
static void drain_print(Dev &d, const char *window) {
  use(d);
  std::map<std::string, std::pair<size_t, unsigned long long>> by;
  unsigned long long nonusr = 0, total = 0;
  for (int g = 0; g < 1000; ++g) {
    d.out.totalNumPcs = d.out.remainingNumPcs = 0;
    d.out.totalSamples = d.out.nonUsrKernelsTotalSamples = d.out.droppedSamples = 0;
    CUpti_PCSamplingGetDataParams p = {CUpti_PCSamplingGetDataParamsSize, nullptr, d.ctx, &d.out};
    CUptiResult r = cuptiPCSamplingGetData(&p);
    if (r != CUPTI_SUCCESS) {
      printf("FACT twoctx_getdata device=%d rc=%s\n", d.id, rs(r));
      break;
    }
    nonusr += d.out.nonUsrKernelsTotalSamples;
    total += d.out.totalSamples;
    for (size_t i = 0; i < d.out.totalNumPcs && i < d.out.collectNumPcs; ++i) {
      const CUpti_PCSamplingPCData &pc = d.out.pPcData[i];
      auto &e = by[pc.functionName ? pc.functionName : "?"];
      e.first++;
      for (size_t s = 0; s < pc.stallReasonCount; ++s) e.second += pc.stallReason[s].samples;
    }
    if (d.out.remainingNumPcs == 0) break;
  }
  printf("FACT twoctx_window %s device=%d total=%llu nonusr=%llu", window, d.id, total, nonusr);
  for (auto &kv : by) printf(" %s:records=%zu,samples=%llu", kv.first.c_str(), kv.second.first, kv.second.second);
  printf("\n");
  fflush(stdout);
}

int main() {
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  if (n < 2) {
    printf("FACT twoctx skipped: %d device(s)\n", n);
    return 0;
  }
  for (int i = 0; i < 2; ++i) {
    Dev &d = g_dev[i];
    d.id = i;
    use(d);
    CHECK(cudaFree(0));
    CHECK(cudaMalloc(&d.f, 1 << 20));
    cuCtxGetCurrent(&d.ctx);
  }
  Dev &d0 = g_dev[0], &d1 = g_dev[1];
  launch(d0, 0);
  launch(d1, 0);  // k0: before any enable
  // Episode 1: device 0 first (the process's first Enable), device 1 joins.
  enable_configure(d0, "episode1");
  launch(d1, 1);  // k1: enabled on device 0 only
  enable_configure(d1, "episode1-join");
  launch(d1, 2);  // k2: enabled on device 1, not started
  Start(d0);
  launch(d0, 0);
  launch(d0, 1);
  Stop(d0);
  drain_print(d0, "1-dev0 (control: k0 before any enable, k1 first used in this window)");
  Start(d1);
  launch(d1, 0);
  launch(d1, 1);
  launch(d1, 2);
  Stop(d1);
  drain_print(d1, "1-dev1 (k0 before any enable, k1 while only dev0 enabled, k2 while dev1 enabled)");
  Disable(d0);
  Disable(d1);
  launch(d1, 3);  // k3: disabled everywhere
  // Episode 2: device 1 alone.
  enable_configure(d1, "episode2");
  Start(d1);
  for (int k = 0; k <= 4; ++k) launch(d1, k);  // k4 first used in this window
  Stop(d1);
  drain_print(d1, "2-dev1 alone (k3 first used between episodes, k4 in this window)");
  Disable(d1);
  // Episode 3: device 1 enabled first, then device 0.
  enable_configure(d1, "episode3");
  enable_configure(d0, "episode3-join");
  Start(d1);
  for (int k = 0; k <= 5; ++k) launch(d1, k);  // k5 first used in this window
  Stop(d1);
  drain_print(d1, "3-dev1 enabled first (k5 first used in this window)");
  Start(d0);
  launch(d0, 0);
  launch(d0, 1);
  Stop(d0);
  drain_print(d0, "3-dev0 (control)");
  Disable(d1);
  Disable(d0);
  printf("FACT twoctx_done\n");
  return 0;
}
