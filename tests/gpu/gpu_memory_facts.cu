// Where a CUPTI client's GPU memory goes (issue 27 item 3, docs/pc-sampling.md P31): a standalone
// CUPTI client (no parcagpu) does, step by step, what the library does (subscribe to launch
// callbacks, kernel activity, PC sampling enabled, configured, one window, disabled), with the
// activity and PC sampling buffer attributes given on the command line, and prints the process's
// GPU memory after each step as nvidia-smi counts it (what issue 27 compares) and as cuMemGetInfo
// sees the device.
//
// Build:  nvcc -O2 -std=c++17 -arch=sm_90 -o gpu_memory_facts gpu_memory_facts.cu -lcuda -lcupti
//              (plus -I/-L for CUPTI where the toolkit keeps it)
// Run:    gpu_memory_facts [KEY=VALUE ...]
//           callbacks=0|1       subscribe and enable the runtime and driver API domains (1)
//           activity=0|1        kernel activity (CONCURRENT_KERNEL) enabled before CUDA starts (1)
//           act_pinned=0|1      CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED (unset)
//           act_buf=BYTES       CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE (unset: ~3 MB)
//           act_prealloc=N      CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE (unset: 3)
//           pc=0|1              PC sampling enabled, configured, one window, disabled (1)
//           pc_hw_mb=N          hardware buffer size (unset: CUPTI's 512 MB)
//           pc_scratch_kb=N     scratch buffer size (unset: CUPTI's 1 MB)
//           pc_mode=serial|continuous   collection mode (serial: kernel-serialized)
//           kernels=N           N distinct kernels (of 256) first launched, after the context
//                               step: before PC sampling is enabled, or with pc_first=1 while it
//                               is (as the library's learning episode does) (0)
//           module=PATH         big_module.cubin (big_module.cu, ~8 MiB of code in 128 kernels):
//                               loaded with cuModuleLoad and its first kernel launched, later
//                               its second launched and every other got; the GPU memory at each
//                               step says how much of it was loaded (P34)
//           module_when=before|after   the module loaded and its first kernel launched before
//                               PC sampling's Enable (the rest after its Disable) or all of it
//                               after the Disable (after)
// Output: "FACT gpu_memory <args> step=S smi_mib=N device_used_mib=N" per step, then
//         "FACT gpu_memory_done".
#define CHECK_PROGRAM "gpu_memory_facts"
#include "cuda_check.h"
#include "pc_facts.h"

#include <unistd.h>

#include <array>
#include <map>
#include <utility>

template <int K>
__global__ void distinct(float *out, int iters) {
  float a = threadIdx.x + K;
  for (int i = 0; i < iters; ++i) a = fmaf(a, 1.000001f, 0.5f);
  if (a == 12345.0f) out[threadIdx.x] = a;
}
using Kernel = void (*)(float *, int);
template <int... K>
static constexpr std::array<Kernel, sizeof...(K)> kernel_table(std::integer_sequence<int, K...>) {
  return {&distinct<K>...};
}
static const auto kDistinct = kernel_table(std::make_integer_sequence<int, 256>{});

static void launch_distinct(long n, float *f) {
  for (long i = 0; i < n && i < long(kDistinct.size()); ++i) kDistinct[i]<<<1, 32>>>(f, 10);
  CHECK(cudaDeviceSynchronize());
}

static std::map<std::string, std::string> g_args;
static std::string g_argline;

static long arg(const char *key, long fallback) {
  auto it = g_args.find(key);
  return it == g_args.end() ? fallback : std::atol(it->second.c_str());
}
static bool has(const char *key) { return g_args.count(key) != 0; }

// This process's used GPU memory as nvidia-smi lists it (-1 when it lists none).
static long smi_mib() {
  FILE *p = popen("nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits",
                  "r");
  if (!p) return -1;
  long mib = -1, pid = 0, used = 0;
  while (fscanf(p, "%ld, %ld", &pid, &used) == 2)
    if (pid == getpid()) mib = used;
  pclose(p);
  return mib;
}

static void report(const char *step) {
  size_t free_b = 0, total_b = 0;
  cuMemGetInfo(&free_b, &total_b);
  printf("FACT gpu_memory%s step=%s smi_mib=%ld device_used_mib=%zu\n", g_argline.c_str(), step,
         smi_mib(), (total_b - free_b) >> 20);
  fflush(stdout);
}

// big_module.cu's kernels: big_ABC for A in 1..2, B and C in 0..7. Loads the module and
// launches its first kernel (load_big_module), then launches its second and gets every other
// (big_module_rest), reporting the GPU memory after each step.
static CUmodule g_big = nullptr;
static float *g_big_out = nullptr;

static void launch_big(const char *name, const char *step) {
  CUfunction fn = nullptr;
  CHECK_DRV(cuModuleGetFunction(&fn, g_big, name));
  void *args[] = {&g_big_out};
  CHECK_DRV(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
  CHECK(cudaDeviceSynchronize());
  report(step);
}

static void load_big_module(const std::string &path) {
  CHECK(cudaMalloc(&g_big_out, 4096));
  CHECK_DRV(cuModuleLoad(&g_big, path.c_str()));
  report("module_loaded");
  launch_big("big_100", "module_first_kernel");
}

static void big_module_rest() {
  launch_big("big_101", "module_second_kernel");
  for (int a = 1; a <= 2; ++a)
    for (int b = 0; b < 8; ++b)
      for (int c = 0; c < 8; ++c) {
        char name[16];
        snprintf(name, sizeof name, "big_%d%d%d", a, b, c);
        CUfunction fn = nullptr;
        CHECK_DRV(cuModuleGetFunction(&fn, g_big, name));
      }
  report("module_all_kernels");
}

static void CUPTIAPI on_callback(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *) {}
static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
  *size = 1 << 20;
  *buf = static_cast<uint8_t *>(aligned_alloc(8, *size));
  *max_records = 0;
}
static void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t *buf, size_t, size_t) {
  free(buf);
}

// The attribute's value as CUPTI takes it: a uint8_t for HOST_PINNED, a size_t for the others.
static void set_activity_attr(CUpti_ActivityAttribute attr, const char *key, size_t value) {
  uint8_t byte = static_cast<uint8_t>(value);
  const bool is_byte = attr == CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED;
  size_t size = is_byte ? sizeof byte : sizeof value;
  CUptiResult r = cuptiActivitySetAttribute(attr, &size, is_byte ? static_cast<void *>(&byte)
                                                                 : static_cast<void *>(&value));
  printf("FACT gpu_memory_attribute %s=%zu rc=%s\n", key, value, rs(r));
}

static void pc_configure(CUcontext ctx) {
  CUptiResult num_rc, names_rc;
  query_stall_reasons(ctx, &num_rc, &names_rc);
  alloc_buf(&g_cfg_buf, 512);
  auto infos = base_config(g_args["pc_mode"] == "continuous"
                               ? CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS
                               : CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED);
  CUpti_PCSamplingConfigurationInfo i{};
  if (has("pc_hw_mb")) {
    i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE;
    i.attributeData.hardwareBufferSizeData.hardwareBufferSize = size_t(arg("pc_hw_mb", 0)) << 20;
    infos.push_back(i);
  }
  if (has("pc_scratch_kb")) {
    i = {};
    i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE;
    i.attributeData.scratchBufferSizeData.scratchBufferSize = size_t(arg("pc_scratch_kb", 0))
                                                              << 10;
    infos.push_back(i);
  }
  CUpti_PCSamplingConfigurationInfoParams p{CUpti_PCSamplingConfigurationInfoParamsSize, nullptr,
                                            ctx, infos.size(), infos.data()};
  CUptiResult r = cuptiPCSamplingSetConfigurationAttribute(&p);
  printf("FACT gpu_memory_pc_configure rc=%s stall_reasons=%zu\n", rs(r), g_num_stall);
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    size_t eq = a.find('=');
    if (eq == std::string::npos) continue;
    g_args[a.substr(0, eq)] = a.substr(eq + 1);
    g_argline += " " + a;
  }
  if (has("act_pinned"))
    set_activity_attr(CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, "act_pinned",
                      arg("act_pinned", 0));
  if (has("act_buf"))
    set_activity_attr(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, "act_buf", arg("act_buf", 0));
  if (has("act_prealloc"))
    set_activity_attr(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, "act_prealloc",
                      arg("act_prealloc", 0));
  CUpti_SubscriberHandle sub{};
  if (arg("callbacks", 1)) {
    cuptiSubscribe(&sub, on_callback, nullptr);
    cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API);
    cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
  }
  if (arg("activity", 1)) {
    cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  }
  CHECK(cudaFree(nullptr));
  int *d = nullptr;
  CHECK(cudaMalloc(&d, 4096));
  tiny<<<1, 32>>>(d);
  CHECK(cudaDeviceSynchronize());
  report("context");
  for (int i = 0; i < 1000; ++i) tiny<<<1, 32>>>(d);
  CHECK(cudaDeviceSynchronize());
  cuptiActivityFlushAll(1);
  report("kernels");
  float *f = nullptr;
  CHECK(cudaMalloc(&f, 4096));
  const long distinct_kernels = arg("kernels", 0);
  const bool first_in_pc = arg("pc_first", 0) && arg("pc", 1);
  const bool module_before = has("module") && g_args["module_when"] == "before";
  if (module_before) load_big_module(g_args["module"]);
  if (!first_in_pc && distinct_kernels) {
    launch_distinct(distinct_kernels, f);
    report("distinct_kernels");
  }
  if (arg("pc", 1)) {
    CUcontext ctx = nullptr;
    CHECK_DRV(cuCtxGetCurrent(&ctx));
    printf("FACT gpu_memory_pc_enable rc=%s\n", rs(pc_enable(ctx, nullptr)));
    report("pc_enabled");
    pc_configure(ctx);
    report("pc_configured");
    if (first_in_pc) {
      launch_distinct(distinct_kernels, f);
      report("distinct_kernels_while_enabled");
    }
    pc_start(ctx, nullptr);
    spin<<<132, 128>>>(2000000);
    CHECK(cudaDeviceSynchronize());
    pc_stop(ctx, nullptr);
    alloc_buf(&g_out_buf, 4096);
    CUpti_PCSamplingGetDataParams gp{CUpti_PCSamplingGetDataParamsSize, nullptr, ctx, &g_out_buf};
    cuptiPCSamplingGetData(&gp);
    report("pc_window");
    pc_disable(ctx, nullptr);
    report("pc_disabled");
    for (int i = 0; i < 1000; ++i) tiny<<<1, 32>>>(d);
    CHECK(cudaDeviceSynchronize());
    report("after_episode");
  }
  if (has("module") && !module_before) load_big_module(g_args["module"]);
  if (has("module")) big_module_rest();
  printf("FACT gpu_memory_done%s\n", g_argline.c_str());
  return 0;
}
