// The mock CUDA driver, libcuda.so.1: the real driver entry points the library and applications
// query (init, version, devices, attributes, errors, current context), the devices, contexts and
// streams behind them, the injection loading of cuInit, and the bridge the mock CUPTI hooks into.
// Launches and graphs live in cuda_mock_launch.cc and cuda_mock_graph.cc.
#include <dlfcn.h>
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda_mock_internal.h"
#include "mock_cubin.h"

namespace mockcuda {
namespace {

std::atomic<const mockbridge::CuptiHooks *> g_hooks{nullptr};

// 0: not initialized, 1: cuInit running (injection being loaded), 2: initialized.
std::atomic<int> g_init_state{0};
thread_local bool t_initializing = false;

std::mutex g_mutex;     // creation of contexts and interning of kernels; never held across a hook
int g_num_devices = 0;  // 0: not decided yet (environment or mock_cuda_set_num_devices)
std::atomic<CUctx_st *> g_contexts[MOCK_CUDA_MAX_DEVICES];
std::atomic<uint32_t> g_next_context_id{1};
// Real CUPTI numbers streams from small values upwards (the H100's default stream was 13,
// docs/cupti-facts.md).
std::atomic<uint32_t> g_next_stream_id{13};
std::atomic<uint32_t> g_next_graph_id{1};

thread_local CUctx_st *t_current_context = nullptr;
// The calling thread's default streams (CU_STREAM_PER_THREAD), one per device, freed with the
// thread like real CUDA's.
struct PerThreadStreams {
  CUstream_st *streams[MOCK_CUDA_MAX_DEVICES] = {};
  ~PerThreadStreams() {
    for (CUstream_st *s : streams) delete_stream(s);
  }
};
thread_local PerThreadStreams t_per_thread_streams;
thread_local int t_api_depth = 0;

void warn(const char *fmt, const char *a, const char *b) {
  std::fprintf(stderr, "mock-cuda: warning: ");
  std::fprintf(stderr, fmt, a, b);
  std::fputc('\n', stderr);
}

int decide_num_devices_locked() {
  if (g_num_devices == 0) {
    g_num_devices = 1;
    if (const char *v = std::getenv("MOCK_CUDA_NUM_DEVICES"); v && *v) {
      char *end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (*end == '\0' && n >= 1 && n <= MOCK_CUDA_MAX_DEVICES)
        g_num_devices = static_cast<int>(n);
      else
        warn("MOCK_CUDA_NUM_DEVICES=%s is not a number in 1..16; using 1%s", v, "");
    }
  }
  return g_num_devices;
}

int num_devices() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return decide_num_devices_locked();
}

// What the real driver does with CUDA_INJECTION64_PATH at cuInit: load it, call its
// InitializeInjection once. noexcept: an exception cannot cross the real (C) driver either.
void load_injection() noexcept {
  const char *path = std::getenv("CUDA_INJECTION64_PATH");
  if (!path || !*path) return;
  void *handle = dlopen(path, RTLD_NOW);
  if (!handle) {
    const char *e = dlerror();
    warn("cannot load CUDA_INJECTION64_PATH=%s: %s", path, e ? e : "unknown error");
    return;
  }
  auto init = reinterpret_cast<int (*)(void)>(dlsym(handle, "InitializeInjection"));
  if (!init) {
    warn("CUDA_INJECTION64_PATH=%s has no InitializeInjection symbol%s", path, "");
    return;
  }
  init();
}

CUctx_st *context_for_device(int device) {
  CUctx_st *ctx = g_contexts[device].load(std::memory_order_acquire);
  if (ctx) return ctx;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    decide_num_devices_locked();
    ctx = g_contexts[device].load(std::memory_order_relaxed);
    if (!ctx) {
      ctx = new CUctx_st;
      ctx->id = g_next_context_id.fetch_add(1);
      ctx->device = device;
      ctx->legacy_stream = nullptr;
      ctx->legacy_stream = new_stream(ctx);
      g_contexts[device].store(ctx, std::memory_order_release);
    } else {
      return ctx;
    }
  }
  CUpti_ResourceData data{};
  data.context = ctx;
  domain_event(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, &data);
  return ctx;
}

// The attributes an H100 SXM5 80GB reports that profilers and the library may ask for.
struct DeviceAttribute {
  CUdevice_attribute attribute;
  int value;
};
constexpr DeviceAttribute kDeviceAttributes[] = {
    {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
    {CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
    {CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 2619000},
    {CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120},
    {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 52428800},
    {CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32},
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024},
    {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152},
    {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536},
    {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536},
    {CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536},
    {CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, 0x18},
    {CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0},
    {CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0},
    {CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, CU_COMPUTEMODE_DEFAULT},
    {CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1},
    {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
    {CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1},
    {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1},
    {CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED, 1},
    {CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 1},
    {CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 5},
};

bool initialized() { return g_init_state.load(std::memory_order_acquire) != 0; }

const char *error_name(CUresult e) {
  switch (e) {
#define MOCK_CU_ERROR(name, text) \
  case name:                      \
    return #name;
#include "cuda_mock_errors.inc"
#undef MOCK_CU_ERROR
    default:
      return nullptr;
  }
}

const char *error_string(CUresult e) {
  switch (e) {
#define MOCK_CU_ERROR(name, text) \
  case name:                      \
    return text;
#include "cuda_mock_errors.inc"
#undef MOCK_CU_ERROR
    default:
      return nullptr;
  }
}

// A query's checks, in the driver's order: its output (out_ok), cuInit.
CUresult query_error(bool out_ok) {
  if (!out_ok) return CUDA_ERROR_INVALID_VALUE;
  if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
  return CUDA_SUCCESS;
}

// A device query's checks, in the driver's order: an injected failure of the entry point
// (MOCK_CUDA_FAIL), its output (out_ok), cuInit, the device.
CUresult device_query_error(DriverEntry entry, bool out_ok, CUdevice dev) {
  if (const CUresult injected = injected_failure(entry); injected != CUDA_SUCCESS) return injected;
  if (const CUresult rc = query_error(out_ok)) return rc;
  if (dev < 0 || dev >= num_devices()) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

// cuGetErrorName / cuGetErrorString: the text `lookup` has for `error`, else INVALID_VALUE.
CUresult error_text(const char *(*lookup)(CUresult), CUresult error, const char **str) {
  if (!str) return CUDA_ERROR_INVALID_VALUE;
  *str = lookup(error);
  return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // namespace

const mockbridge::CuptiHooks *hooks() { return g_hooks.load(std::memory_order_acquire); }

void ensure_initialized() {
  if (g_init_state.load(std::memory_order_acquire) == 2 || t_initializing) return;
  int expected = 0;
  if (g_init_state.compare_exchange_strong(expected, 1)) {
    // The injection library may call back into the driver (cuInit included) from
    // InitializeInjection: this thread is initialized from here on.
    t_initializing = true;
    load_injection();
    t_initializing = false;
    g_init_state.store(2, std::memory_order_release);
    return;
  }
  while (g_init_state.load(std::memory_order_acquire) != 2) sched_yield();
}

CUctx_st *current_context() {
  if (!t_current_context) t_current_context = context_for_device(0);
  return t_current_context;
}

int device_count() { return num_devices(); }

CUctx_st *device_context(int device) { return context_for_device(device); }

CUstream_st *new_stream(CUctx_st *context) {
  auto *s = new CUstream_st;
  s->id = g_next_stream_id.fetch_add(1);
  s->context = context;
  return s;
}

void delete_stream(CUstream_st *stream) {
  if (!stream) return;
  if (CUgraph_st *capturing = stream->capture_graph.exchange(nullptr)) release_graph(capturing);
  stream->magic = 0;
  delete stream;
}

bool is_per_thread(CUstream stream) { return stream == CU_STREAM_PER_THREAD; }

CUstream_st *resolve_stream(CUctx_st *context, CUstream stream) {
  if (stream == nullptr || stream == CU_STREAM_LEGACY) return context->legacy_stream;
  if (stream == CU_STREAM_PER_THREAD) {
    CUstream_st *&s = t_per_thread_streams.streams[context->device];
    if (!s) s = new_stream(context);
    return s;
  }
  return stream->magic == CUstream_st::kMagic ? stream : nullptr;
}

uint32_t next_graph_id() { return g_next_graph_id.fetch_add(1); }

void domain_event(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, void *data) {
  if (const mockbridge::CuptiHooks *h = hooks()) h->domain_event(domain, cbid, data);
}

ApiScope::ApiScope(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const char *function_name,
                   const char *symbol_name, const void *params, CUctx_st *context,
                   void *return_value)
    : hooks_(hooks()) {
  if (t_api_depth++ == 0) Counters::add(stat::api_calls);
  frame_.data.correlationId = 0;
  if (!hooks_) return;
  frame_.domain = domain;
  frame_.cbid = cbid;
  frame_.data = CUpti_CallbackData{};
  frame_.data.functionName = function_name;
  frame_.data.functionParams = params;
  frame_.data.functionReturnValue = return_value;
  frame_.data.symbolName = symbol_name;
  frame_.data.context = context;
  frame_.data.contextUid = context ? context->id : 0;
  frame_.correlation_data = 0;
  frame_.outer = nullptr;
  hooks_->api_enter(&frame_);
}

ApiScope::~ApiScope() {
  --t_api_depth;
  if (hooks_) hooks_->api_exit(&frame_);
}

void module_event(CUctx_st *ctx, uint32_t cbid, char *image, size_t size) {
  CUpti_ModuleResourceData module{1, size, image};
  CUpti_ResourceData data{};
  data.context = ctx;
  data.resourceDescriptor = &module;
  domain_event(CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
}

}  // namespace mockcuda

using namespace mockcuda;

// ---- Real driver entry points ----

extern "C" {

CUresult cuInit(unsigned int flags) {
  MOCK_CUDA_FAULT_POINT(cuInit);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  ensure_initialized();
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version) {
  MOCK_CUDA_FAULT_POINT(cuDriverGetVersion);
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count) {
  MOCK_CUDA_FAULT_POINT(cuDeviceGetCount);
  if (const CUresult rc = query_error(count)) return rc;
  *count = num_devices();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (const CUresult rc = device_query_error(DriverEntry::cuDeviceGet, device, ordinal)) return rc;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  const CUresult rc = device_query_error(DriverEntry::cuDeviceGetName, name && len > 0, dev);
  if (rc != CUDA_SUCCESS) return rc;
  std::snprintf(name, static_cast<size_t>(len), "%s", "Mock NVIDIA H100");
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
  if (const CUresult rc = device_query_error(DriverEntry::cuDeviceTotalMem, bytes, dev)) return rc;
  *bytes = 85899345920ull;  // 80 GiB, as an H100 80GB HBM3
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attrib, CUdevice dev) {
  const CUresult rc = device_query_error(DriverEntry::cuDeviceGetAttribute, value, dev);
  if (rc != CUDA_SUCCESS) return rc;
  if (attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  *value = 0;  // attributes not listed: 0 (unsupported feature / not applicable)
  for (const DeviceAttribute &a : kDeviceAttributes)
    if (a.attribute == attrib) *value = a.value;
  if (attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) *value += dev;  // one bus per device
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx) {
  MOCK_CUDA_FAULT_POINT(cuCtxGetCurrent);
  if (const CUresult rc = query_error(pctx)) return rc;
  *pctx = t_current_context;  // NULL until the application makes one current, as in real CUDA
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device) {
  MOCK_CUDA_FAULT_POINT(cuCtxGetDevice);
  if (const CUresult rc = query_error(device)) return rc;
  if (!t_current_context) return CUDA_ERROR_INVALID_CONTEXT;
  *device = t_current_context->device;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char **str) {
  MOCK_CUDA_FAULT_POINT(cuGetErrorName);
  return error_text(error_name, error, str);
}

CUresult cuGetErrorString(CUresult error, const char **str) {
  MOCK_CUDA_FAULT_POINT(cuGetErrorString);
  return error_text(error_string, error, str);
}

// ---- Control API (mock_cuda.h): devices, contexts, streams, kernels ----

CUresult mock_cuda_set_num_devices(int n) {
  if (n < 1 || n > MOCK_CUDA_MAX_DEVICES) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto &c : g_contexts)
    if (c.load(std::memory_order_relaxed)) return CUDA_ERROR_INVALID_VALUE;
  g_num_devices = n;
  return CUDA_SUCCESS;
}

CUresult mock_cuda_set_device(int device) {
  ensure_initialized();
  if (device < 0 || device >= num_devices()) return CUDA_ERROR_INVALID_DEVICE;
  t_current_context = context_for_device(device);
  return CUDA_SUCCESS;
}

CUfunction mock_cuda_function(const char *kernel_name) {
  if (!kernel_name) return nullptr;
  // Leaked on purpose: kernel names are referenced by activity records for the process lifetime.
  static auto *functions = new std::unordered_map<std::string, CUfunc_st *>;
  std::lock_guard<std::mutex> lock(g_mutex);
  CUfunc_st *&f = (*functions)[kernel_name];
  if (!f) {
    f = new CUfunc_st;
    f->id = static_cast<uint32_t>(functions->size());
    f->name = strdup(kernel_name);
  }
  return f;
}

CUresult mock_cuda_load_module(void) {
  CUctx_st *ctx = current_context();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  size_t size = 0;
  const char *cubin = embedded_cubin(&size);
  char *copy = static_cast<char *>(std::malloc(size));
  std::memcpy(copy, cubin, size);
  {
    std::lock_guard<std::mutex> lock(ctx->more_modules_mu);
    ctx->more_module_images.push_back(copy);
  }
  module_event(ctx, CUPTI_CBID_RESOURCE_MODULE_LOADED, copy, size);
  return CUDA_SUCCESS;
}

CUresult mock_cuda_unload_modules(void) {
  ensure_initialized();
  for (auto &slot : g_contexts) {
    CUctx_st *ctx = slot.load(std::memory_order_acquire);
    if (!ctx) continue;
    std::vector<char *> images;
    {
      std::lock_guard<std::mutex> lock(ctx->more_modules_mu);
      images.swap(ctx->more_module_images);
    }
    if (ctx->module_loaded.load(std::memory_order_acquire))
      if (char *image = ctx->module_image.exchange(nullptr)) images.push_back(image);
    size_t size = 0;
    embedded_cubin(&size);
    for (char *image : images) {
      module_event(ctx, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING, image, size);
      // Gone, as the driver's copy is: a consumer that kept only the pointer reads garbage now.
      std::memset(image, 0xdd, size);
      std::free(image);
    }
    ctx->module_loaded.store(false, std::memory_order_release);
  }
  return CUDA_SUCCESS;
}

CUresult mock_cuda_stream_create(CUstream *stream) {
  if (!stream) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st *ctx = initialized_context();
  cudaStreamCreateWithFlags_v5000_params rt_params{reinterpret_cast<cudaStream_t *>(stream), 0};
  cuStreamCreate_params drv_params{stream, 0};
  NestedCall call(ctx, "cudaStreamCreateWithFlags",
                  CUPTI_RUNTIME_TRACE_CBID_cudaStreamCreateWithFlags_v5000, &rt_params,
                  "cuStreamCreate", CUPTI_DRIVER_TRACE_CBID_cuStreamCreate, &drv_params);
  CUstream_st *s = new_stream(ctx);
  *stream = s;
  CUpti_ResourceData data{};
  data.context = ctx;
  data.resourceHandle.stream = s;
  domain_event(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_STREAM_CREATED, &data);
  return CUDA_SUCCESS;
}

CUresult mock_cuda_stream_destroy(CUstream stream) {
  if (!stream || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD ||
      stream->magic != CUstream_st::kMagic)
    return CUDA_ERROR_INVALID_HANDLE;
  ensure_initialized();
  CUctx_st *ctx = stream->context;
  cudaStreamDestroy_v5050_params rt_params{stream};
  cuStreamDestroy_v2_params drv_params{stream};
  {
    NestedCall call(ctx, "cudaStreamDestroy", CUPTI_RUNTIME_TRACE_CBID_cudaStreamDestroy_v5050,
                    &rt_params, "cuStreamDestroy_v2", CUPTI_DRIVER_TRACE_CBID_cuStreamDestroy_v2,
                    &drv_params);
    CUpti_ResourceData data{};
    data.context = ctx;
    data.resourceHandle.stream = stream;
    domain_event(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING, &data);
  }
  delete_stream(stream);
  return CUDA_SUCCESS;
}

CUresult mock_cuda_device_synchronize(void) {
  CUctx_st *ctx = initialized_context();
  NestedCall call(ctx, "cudaDeviceSynchronize",
                  CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, nullptr, "cuCtxSynchronize",
                  CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, nullptr);
  CUpti_SynchronizeData data{ctx, nullptr};
  domain_event(CUPTI_CB_DOMAIN_SYNCHRONIZE, CUPTI_CBID_SYNCHRONIZE_CONTEXT_SYNCHRONIZED, &data);
  return CUDA_SUCCESS;
}

void mock_cuda_get_stats(MockCudaStats *out) {
  if (out) Counters::sum_into(out);
}

size_t mock_cuda_kernels_by_device(uint64_t *out, size_t capacity) {
  const int n = num_devices();
  for (int d = 0; d < n && static_cast<size_t>(d) < capacity; ++d)
    out[d] = Counters::sum(device_counter(d));
  return static_cast<size_t>(n);
}

int mock_cuda_cupti_attached(void) { return hooks() != nullptr; }

// ---- Bridge to the mock CUPTI (driver_cupti_bridge.h) ----

void mock_bridge_register_cupti(const mockbridge::CuptiHooks *h) {
  const mockbridge::CuptiHooks *old = g_hooks.exchange(h, std::memory_order_acq_rel);
  if (old && old != h)
    std::fprintf(stderr,
                 "mock-cuda: warning: a second mock libcupti registered itself; the last one "
                 "loaded receives the callbacks\n");
}

CUresult mock_bridge_context_ids(CUcontext context, uint32_t *context_id, uint32_t *device_id) {
  CUctx_st *ctx = context ? context : t_current_context;
  if (!ctx || ctx->magic != CUctx_st::kMagic) return CUDA_ERROR_INVALID_CONTEXT;
  if (context_id) *context_id = ctx->id;
  if (device_id) *device_id = static_cast<uint32_t>(ctx->device);
  return CUDA_SUCCESS;
}

CUresult mock_bridge_stream_id(CUcontext context, CUstream stream, int per_thread,
                               uint32_t *stream_id) {
  if (!stream_id) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st *ctx = context ? context : t_current_context;
  if (!ctx || ctx->magic != CUctx_st::kMagic) return CUDA_ERROR_INVALID_CONTEXT;
  // perThreadStream: a NULL stream means the per-thread default stream of the caller.
  CUstream s = (stream == nullptr && per_thread) ? CU_STREAM_PER_THREAD : stream;
  CUstream_st *st = resolve_stream(ctx, s);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  *stream_id = st->id;
  return CUDA_SUCCESS;
}

}  // extern "C"

// The last mock code to run at exit (see CuptiHooks::process_exit).
__attribute__((destructor)) static void mock_cuda_at_exit() {
  if (const mockbridge::CuptiHooks *h = hooks(); h && h->process_exit) h->process_exit();
}
