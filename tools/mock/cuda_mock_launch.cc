// Launches on the mock driver: every launch cbid of CUDA 13 (eager and graph), with the callback
// nesting, parameter structs and kernel executions real CUDA produces (docs/cupti-facts.md), and
// the per-cbid launch statistics.
#include "cuda_mock_internal.h"  // first: it includes cuda.h with the driver's exports visible

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <chrono>
#include <thread>
#include <vector>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <cupti_activity.h>

#include "mock_cubin.h"

namespace mockcuda {
namespace {

// The parameters of __cudaLaunchKernel (crt/device_functions.h): CUDA 13's headers declare the
// function but ship no *_params struct for it, so the mock lays one out from the prototype.
struct cudaLaunchKernel_v13000_params_mock {
  cudaKernel_t kernel;
  dim3 gridDim;
  dim3 blockDim;
  void **args;
  size_t sharedMem;
  cudaStream_t stream;
};

// Runtime APIs removed from CUDA 13's headers whose cbids CUPTI still defines: their parameter
// structs as generated_cudart_removed_meta.h lays them out (that header does not compile on its
// own, it includes a cudart_removed.h the toolkit does not ship).
struct cudaLaunch_v3020_params_mock {
  const void *func;
};
struct cudaLaunch_ptsz_v7000_params_mock {
  const void *func;
};
struct cudaLaunchCooperativeKernelMultiDevice_v9000_params_mock {
  struct cudaLaunchParams_mock *launchParamsList;
  unsigned int numDevices;
  unsigned int flags;
};
// struct cudaLaunchParams left the CUDA 13 headers with the API; same layout as CUDA 12's.
struct cudaLaunchParams_mock {
  void *func;
  dim3 gridDim;
  dim3 blockDim;
  void **args;
  size_t sharedMem;
  cudaStream_t stream;
};

// Each launch API's kind of parameter struct (Params): X(name, builder, struct), the builder
// (kParamsBuilders) a template on the struct it builds.
#define LAUNCH_PARAMS(X)                                                                           \
  X(CuLaunch, function_params, cuLaunch_params)                                                    \
  X(CuLaunchGrid, cu_grid_params, cuLaunchGrid_params)                                             \
  X(CuLaunchGridAsync, cu_grid_async_params, cuLaunchGridAsync_params)                             \
  X(CuLaunchKernel, cu_kernel_params, cuLaunchKernel_params)                                       \
  X(CuLaunchKernelPtsz, cu_kernel_params, cuLaunchKernel_ptsz_params)                              \
  X(CuLaunchKernelEx, cu_ex_params, cuLaunchKernelEx_params)                                       \
  X(CuLaunchKernelExPtsz, cu_ex_params, cuLaunchKernelEx_ptsz_params)                              \
  X(CuLaunchCooperative, cu_kernel_params, cuLaunchCooperativeKernel_params)                       \
  X(CuLaunchCooperativePtsz, cu_kernel_params, cuLaunchCooperativeKernel_ptsz_params)              \
  X(CuLaunchCooperativeMulti, cu_multi_params, cuLaunchCooperativeKernelMultiDevice_params)        \
  X(CuGraphLaunch, cu_graph_params, cuGraphLaunch_params)                                          \
  X(CuGraphLaunchPtsz, cu_graph_params, cuGraphLaunch_ptsz_params)                                 \
  X(CudaLaunch, function_params, cudaLaunch_v3020_params_mock)                                     \
  X(CudaLaunchPtsz, function_params, cudaLaunch_ptsz_v7000_params_mock)                            \
  X(CudaLaunchKernel, cuda_kernel_params, cudaLaunchKernel_v7000_params)                           \
  X(CudaLaunchKernelPtsz, cuda_kernel_params, cudaLaunchKernel_ptsz_v7000_params)                  \
  X(CudaLaunchKernelExC, cuda_ex_params, cudaLaunchKernelExC_v11060_params)                        \
  X(CudaLaunchKernelExCPtsz, cuda_ex_params, cudaLaunchKernelExC_ptsz_v11060_params)               \
  X(CudaLaunchCooperative, cuda_kernel_params, cudaLaunchCooperativeKernel_v9000_params)           \
  X(CudaLaunchCooperativePtsz, cuda_kernel_params, cudaLaunchCooperativeKernel_ptsz_v9000_params)  \
  X(CudaLaunchCooperativeMulti, cuda_multi_params, cudaLaunchCooperativeKernelMultiDevice_v9000_params_mock) \
  X(CudaLaunchKernelV13000, cuda_v13000_params, cudaLaunchKernel_v13000_params_mock)               \
  X(CudaLaunchKernelV13000Ptsz, cuda_v13000_params, cudaLaunchKernel_v13000_params_mock)           \
  X(CudaGraphLaunch, cuda_graph_params, cudaGraphLaunch_v10000_params)                             \
  X(CudaGraphLaunchPtsz, cuda_graph_params, cudaGraphLaunch_ptsz_v10000_params)

enum class Params : uint8_t {
#define PARAMS_ENUMERATOR(name, builder, type) name,
  LAUNCH_PARAMS(PARAMS_ENUMERATOR)
#undef PARAMS_ENUMERATOR
};

struct LaunchApi {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  const char *name;  // functionName of its callbacks
  MockLaunchKind kind;
  CUpti_CallbackId nested_driver_cbid;  // runtime APIs: the driver call underneath
  uint8_t launch_type;                  // CUpti_ActivityLaunchType of its kernels
  Params params;
};

constexpr uint8_t kRegular = CUPTI_ACTIVITY_LAUNCH_TYPE_REGULAR;
constexpr uint8_t kCoop = CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE;
constexpr uint8_t kCoopMulti = CUPTI_ACTIVITY_LAUNCH_TYPE_COOPERATIVE_MULTI_DEVICE;

// Every launch API of CUDA 13 that the CUPTI callback API reports; the driver cbid under each
// runtime one is what real CUDA nests (docs/cupti-facts.md, facts 1 and 2; the rest by
// analogy).
constexpr LaunchApi kLaunchApis[] = {
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunch, "cuLaunch", MOCK_LAUNCH_EAGER, 0, kRegular,
     Params::CuLaunch},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid, "cuLaunchGrid", MOCK_LAUNCH_EAGER, 0, kRegular,
     Params::CuLaunchGrid},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync, "cuLaunchGridAsync", MOCK_LAUNCH_EAGER, 0,
     kRegular, Params::CuLaunchGridAsync},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel", MOCK_LAUNCH_EAGER, 0, kRegular,
     Params::CuLaunchKernel},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, "cuLaunchKernel_ptsz", MOCK_LAUNCH_EAGER, 0,
     kRegular, Params::CuLaunchKernelPtsz},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx", MOCK_LAUNCH_EAGER, 0,
     kRegular, Params::CuLaunchKernelEx},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, "cuLaunchKernelEx_ptsz",
     MOCK_LAUNCH_EAGER, 0, kRegular, Params::CuLaunchKernelExPtsz},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel",
     MOCK_LAUNCH_EAGER, 0, kCoop, Params::CuLaunchCooperative},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, "cuLaunchCooperativeKernel_ptsz",
     MOCK_LAUNCH_EAGER, 0, kCoop, Params::CuLaunchCooperativePtsz},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
     "cuLaunchCooperativeKernelMultiDevice", MOCK_LAUNCH_EAGER, 0, kCoopMulti,
     Params::CuLaunchCooperativeMulti},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch", MOCK_LAUNCH_GRAPH, 0, kRegular,
     Params::CuGraphLaunch},
    {kDrv, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, "cuGraphLaunch_ptsz", MOCK_LAUNCH_GRAPH, 0,
     kRegular, Params::CuGraphLaunchPtsz},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020, "cudaLaunch", MOCK_LAUNCH_EAGER,
     CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, kRegular, Params::CudaLaunch},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000, "cudaLaunch_ptsz", MOCK_LAUNCH_EAGER,
     CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, kRegular, Params::CudaLaunchPtsz},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel", MOCK_LAUNCH_EAGER,
     CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, kRegular, Params::CudaLaunchKernel},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, "cudaLaunchKernel_ptsz",
     MOCK_LAUNCH_EAGER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, kRegular,
     Params::CudaLaunchKernelPtsz},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, "cudaLaunchKernelExC",
     MOCK_LAUNCH_EAGER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, kRegular,
     Params::CudaLaunchKernelExC},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060, "cudaLaunchKernelExC_ptsz",
     MOCK_LAUNCH_EAGER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, kRegular,
     Params::CudaLaunchKernelExCPtsz},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, "cudaLaunchCooperativeKernel",
     MOCK_LAUNCH_EAGER, CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, kCoop,
     Params::CudaLaunchCooperative},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
     "cudaLaunchCooperativeKernel_ptsz", MOCK_LAUNCH_EAGER,
     CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, kCoop,
     Params::CudaLaunchCooperativePtsz},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
     "cudaLaunchCooperativeKernelMultiDevice", MOCK_LAUNCH_EAGER,
     CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice, kCoopMulti,
     Params::CudaLaunchCooperativeMulti},
    {kRt, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, "__cudaLaunchKernel",
     MOCK_LAUNCH_EAGER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, kRegular,
     Params::CudaLaunchKernelV13000},
    {kRt, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000, "__cudaLaunchKernel_ptsz",
     MOCK_LAUNCH_EAGER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, kRegular,
     Params::CudaLaunchKernelV13000Ptsz},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch", MOCK_LAUNCH_GRAPH,
     CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, kRegular, Params::CudaGraphLaunch},
    {kRt, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000, "cudaGraphLaunch_ptsz",
     MOCK_LAUNCH_GRAPH, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, kRegular,
     Params::CudaGraphLaunchPtsz},
};
constexpr size_t kNumLaunchApis = sizeof(kLaunchApis) / sizeof(kLaunchApis[0]);
static_assert(kNumLaunchApis <= kMaxLaunchApis);

// Index by cbid, built once: the launch path looks its API up on every call.
struct LaunchApiLookup {
  int8_t driver[CUPTI_DRIVER_TRACE_CBID_SIZE];
  int8_t runtime[CUPTI_RUNTIME_TRACE_CBID_SIZE];
  LaunchApiLookup() {
    std::fill(std::begin(driver), std::end(driver), -1);
    std::fill(std::begin(runtime), std::end(runtime), -1);
    for (size_t i = 0; i < kNumLaunchApis; ++i)
      (kLaunchApis[i].domain == kDrv ? driver : runtime)[kLaunchApis[i].cbid] =
          static_cast<int8_t>(i);
  }
};

int find_launch_api(uint32_t domain, uint32_t cbid) {
  static const LaunchApiLookup lookup;
  if (domain == kDrv && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE) return lookup.driver[cbid];
  if (domain == kRt && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE) return lookup.runtime[cbid];
  return -1;
}

struct Shape {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared_mem;
};

Shape shape_for(const LaunchApi &api) {
  switch (api.params) {
    case Params::CuLaunch:
      return {{1, 1, 1}, {128, 1, 1}, 0};  // cuLaunch: a 1x1 grid
    case Params::CuLaunchGrid:
    case Params::CuLaunchGridAsync:
      return {{64, 2, 1}, {128, 1, 1}, 0};
    default:
      break;
  }
  if (api.launch_type != kRegular) return {{132, 1, 1}, {256, 1, 1}, 0};  // one block per SM
  return {{128, 1, 1}, {256, 1, 1}, 1024};
}

// Room for any one *_params struct, built in place for the callback's functionParams.
struct alignas(16) ParamStorage {
  unsigned char bytes[256];
  template <typename T>
  T *make() {
    static_assert(sizeof(T) <= sizeof(bytes));
    return new (bytes) T{};
  }
};

template <typename T>
const void *emplace_params(ParamStorage *storage, const T &value) {
  T *p = storage->make<T>();
  *p = value;
  return p;
}

// What a launch hands the driver, kept alive for the whole callback window.
struct LaunchArgs {
  CUfunc_st *function;
  CUgraphExec_st *exec;
  CUstream stream;  // as the application passed it
  Shape shape;
  void *kernel_args[1];
  int kernel_arg_value;
  CUlaunchConfig cu_config;
  cudaLaunchConfig_t rt_config;
  // cu/cudaLaunchCooperativeKernelMultiDevice: one entry per device, each on its device's
  // default stream, the launching thread's own first: the same kernel runs on every mock GPU.
  unsigned int multi_devices;
  CUDA_LAUNCH_PARAMS cu_multi[MOCK_CUDA_MAX_DEVICES];
  cudaLaunchParams_mock rt_multi[MOCK_CUDA_MAX_DEVICES];
  CUstream_st *multi_streams[MOCK_CUDA_MAX_DEVICES];
};

void init_args(LaunchArgs *a, CUfunc_st *f, CUgraphExec_st *exec, CUstream stream,
               const Shape &shape) {
  std::memset(static_cast<void *>(a), 0, sizeof(*a));
  a->function = f;
  a->exec = exec;
  a->stream = stream;
  a->shape = shape;
  a->kernel_args[0] = &a->kernel_arg_value;
  const Shape &s = shape;
  a->cu_config = CUlaunchConfig{s.grid[0],  s.grid[1],    s.grid[2], s.block[0], s.block[1],
                                s.block[2], s.shared_mem, stream,    nullptr,    0};
  a->rt_config.gridDim = dim3(s.grid[0], s.grid[1], s.grid[2]);
  a->rt_config.blockDim = dim3(s.block[0], s.block[1], s.block[2]);
  a->rt_config.dynamicSmemBytes = s.shared_mem;
  a->rt_config.stream = stream;
  a->multi_devices = 1;
  a->cu_multi[0].function = f;
  a->cu_multi[0].gridDimX = s.grid[0];
  a->cu_multi[0].gridDimY = s.grid[1];
  a->cu_multi[0].gridDimZ = s.grid[2];
  a->cu_multi[0].blockDimX = s.block[0];
  a->cu_multi[0].blockDimY = s.block[1];
  a->cu_multi[0].blockDimZ = s.block[2];
  a->cu_multi[0].sharedMemBytes = s.shared_mem;
  a->cu_multi[0].hStream = stream;
  a->cu_multi[0].kernelParams = a->kernel_args;
  a->rt_multi[0].func = f;
  a->rt_multi[0].gridDim = a->rt_config.gridDim;
  a->rt_multi[0].blockDim = a->rt_config.blockDim;
  a->rt_multi[0].args = a->kernel_args;
  a->rt_multi[0].sharedMem = s.shared_mem;
  a->rt_multi[0].stream = stream;
}

// A multi-device cooperative launch from `ctx`: an entry for each other mock GPU too, on its
// default stream.
void add_other_devices(LaunchArgs *a, const CUctx_st *ctx) {
  for (int d = 0; d < device_count(); ++d) {
    if (d == ctx->device) continue;
    CUstream_st *st = device_context(d)->legacy_stream;
    const unsigned int i = a->multi_devices++;
    a->cu_multi[i] = a->cu_multi[0];
    a->cu_multi[i].hStream = reinterpret_cast<CUstream>(st);
    a->rt_multi[i] = a->rt_multi[0];
    a->rt_multi[i].stream = reinterpret_cast<cudaStream_t>(st);
    a->multi_streams[i] = st;
  }
}

template <typename T>
void fill_cu_launch_kernel(T *p, LaunchArgs *a) {
  p->f = a->function;
  p->gridDimX = a->shape.grid[0];
  p->gridDimY = a->shape.grid[1];
  p->gridDimZ = a->shape.grid[2];
  p->blockDimX = a->shape.block[0];
  p->blockDimY = a->shape.block[1];
  p->blockDimZ = a->shape.block[2];
  p->sharedMemBytes = a->shape.shared_mem;
  p->hStream = a->stream;
  p->kernelParams = a->kernel_args;
}

template <typename T>
void fill_cuda_launch_kernel(T *p, LaunchArgs *a) {
  p->gridDim = a->rt_config.gridDim;
  p->blockDim = a->rt_config.blockDim;
  p->args = a->kernel_args;
  p->sharedMem = a->shape.shared_mem;
  p->stream = a->stream;
}

// The *_params of each kind of launch API, built in `storage` from the launch's arguments.
using ParamsBuilder = const void *(*)(LaunchArgs *a, ParamStorage *storage);

// Those whose only argument is the function (cuLaunch, cudaLaunch).
template <typename T>
const void *function_params(LaunchArgs *a, ParamStorage *storage) {
  return emplace_params(storage, T{a->function});
}

// A driver kernel launch's (cuLaunchKernel and its kin).
template <typename T>
const void *cu_kernel_params(LaunchArgs *a, ParamStorage *storage) {
  T *p = storage->make<T>();
  fill_cu_launch_kernel(p, a);
  return p;
}

// A runtime kernel launch's (cudaLaunchKernel and its kin).
template <typename T>
const void *cuda_kernel_params(LaunchArgs *a, ParamStorage *storage) {
  T *p = storage->make<T>();
  p->func = a->function;
  fill_cuda_launch_kernel(p, a);
  return p;
}

// cuLaunchKernelEx's and cudaLaunchKernelExC's: a launch configuration.
template <typename T>
const void *cu_ex_params(LaunchArgs *a, ParamStorage *storage) {
  return emplace_params(storage, T{&a->cu_config, a->function, a->kernel_args, nullptr});
}
template <typename T>
const void *cuda_ex_params(LaunchArgs *a, ParamStorage *storage) {
  return emplace_params(storage, T{&a->rt_config, a->function, a->kernel_args});
}

// cuGraphLaunch's and cudaGraphLaunch's: the executable graph and the stream.
template <typename T>
const void *cu_graph_params(LaunchArgs *a, ParamStorage *storage) {
  return emplace_params(storage, T{a->exec, a->stream});
}
template <typename T>
const void *cuda_graph_params(LaunchArgs *a, ParamStorage *storage) {
  return emplace_params(storage, T{reinterpret_cast<cudaGraphExec_t>(a->exec), a->stream});
}

// cuLaunchGrid's and cuLaunchGridAsync's: the grid's width and height.
template <typename T>
const void *cu_grid_params(LaunchArgs *a, ParamStorage *storage) {
  T *p = storage->make<T>();
  *p = {a->function, static_cast<int>(a->shape.grid[0]), static_cast<int>(a->shape.grid[1])};
  return p;
}
template <typename T>
const void *cu_grid_async_params(LaunchArgs *a, ParamStorage *storage) {
  T *p = storage->make<T>();
  *p = {a->function, static_cast<int>(a->shape.grid[0]), static_cast<int>(a->shape.grid[1]),
        a->stream};
  return p;
}
// The multi-device cooperative launches': one entry per device.
template <typename T>
const void *cu_multi_params(LaunchArgs *a, ParamStorage *storage) {
  return emplace_params(storage, T{a->cu_multi, a->multi_devices, 0});
}
template <typename T>
const void *cuda_multi_params(LaunchArgs *a, ParamStorage *storage) {
  T *p = storage->make<T>();
  p->launchParamsList = a->rt_multi;
  p->numDevices = a->multi_devices;
  return p;
}
// CUDA 13's cudaLaunchKernel (and _ptsz): a cudaKernel_t in place of the function.
template <typename T>
const void *cuda_v13000_params(LaunchArgs *a, ParamStorage *storage) {
  T *p = storage->make<T>();
  p->kernel = reinterpret_cast<cudaKernel_t>(a->function);
  fill_cuda_launch_kernel(p, a);
  return p;
}

// The builder of each Params (LAUNCH_PARAMS), in the enum's order.
constexpr ParamsBuilder kParamsBuilders[] = {
#define PARAMS_BUILDER(name, builder, type) &builder<type>,
    LAUNCH_PARAMS(PARAMS_BUILDER)
#undef PARAMS_BUILDER
};

// The real parameter struct of `api`'s callbacks, built in `storage`.
const void *build_params(const LaunchApi &api, LaunchArgs *a, ParamStorage *storage) {
  return kParamsBuilders[static_cast<size_t>(api.params)](a, storage);
}

std::atomic<uint64_t> g_queue_limit_ns{0};

// A full queue blocks the launch inside its driver call until the stream has room.
void wait_for_queue_room(CUstream_st *st) {
  const uint64_t limit = g_queue_limit_ns.load(std::memory_order_relaxed);
  if (!limit) return;
  for (;;) {
    const uint64_t busy = st->busy_until.load(std::memory_order_relaxed);
    const uint64_t now = mockbridge::now_ns();
    if (busy <= now + limit) return;
    std::this_thread::sleep_for(std::chrono::nanoseconds(busy - now - limit));
  }
}

std::atomic<MockLaunchHook> g_launch_hook{nullptr};
std::atomic<void *> g_launch_hook_arg{nullptr};

void launch_point(MockLaunchPoint point, const LaunchApi &api, uint32_t correlation_id) {
  if (MockLaunchHook hook = g_launch_hook.load(std::memory_order_acquire))
    hook(point, api.domain, api.cbid, correlation_id, g_launch_hook_arg.load());
}

// MODULE_LOADED at a context's first launch, with the real cubin of tools/mock/pc_kernels.cu.
// Like the H100's driver (docs/pc-sampling.md), the pointer is the driver's own heap copy, not
// inside any loaded object, and it is freed when the module is unloaded: whoever needs the bytes
// later keeps a copy.
void module_loaded_once(CUctx_st *ctx) {
  if (ctx->module_loaded.load(std::memory_order_relaxed) || ctx->module_loaded.exchange(true))
    return;
  size_t size = 0;
  const char *cubin = embedded_cubin(&size);
  char *copy = static_cast<char *>(std::malloc(size));
  std::memcpy(copy, cubin, size);
  ctx->module_image.store(copy, std::memory_order_release);
  module_event(ctx, CUPTI_CBID_RESOURCE_MODULE_LOADED, copy, size);
}

// What a launch call decided inside its driver call.
struct Launched {
  uint32_t correlation_id = 0;
  uint32_t collect_kind = 0;  // what the mock CUPTI collects of its kernels
  bool captured = false;      // by a stream capture: nothing runs
};

// One launch call as real CUDA makes it: `api`'s scope, the driver call a runtime launch makes
// beneath it, and the launch hook's points between them. Inside the driver call: the lazy
// module load, then capture() (whatever the launch does there; says whether a stream capture took
// it), then whether its records are collected is decided, then inside_last(launched).
template <typename Capture, typename InsideLast>
Launched launch_call(const LaunchApi &api, LaunchArgs *args, CUctx_st *ctx, const char *symbol,
                     Capture capture, InsideLast inside_last) {
  Launched l;
  ParamStorage outer_params, inner_params;
  int outer_rc = 0, inner_rc = 0;
  ApiScope outer(api.domain, api.cbid, api.name, symbol, build_params(api, args, &outer_params),
                 ctx, &outer_rc);
  launch_point(MOCK_LAUNCH_POINT_AFTER_OUTER_ENTER, api, outer.correlation_id());
  std::optional<ApiScope> inner;
  if (api.nested_driver_cbid) {
    const LaunchApi &drv = kLaunchApis[find_launch_api(kDrv, api.nested_driver_cbid)];
    inner.emplace(drv.domain, drv.cbid, drv.name, symbol, build_params(drv, args, &inner_params),
                  ctx, &inner_rc);
    launch_point(MOCK_LAUNCH_POINT_AFTER_DRIVER_ENTER, api, outer.correlation_id());
  }
  module_loaded_once(ctx);  // a graph's kernels need their module as much as eager ones
  l.captured = capture();
  // Whether its record is collected is decided now, inside the launch call.
  if (const auto *h = hooks()) l.collect_kind = h->kernel_activity_enabled(ctx->id);
  l.correlation_id = outer.correlation_id();
  inside_last(l);
  if (inner) {
    inner.reset();  // the driver EXIT
    launch_point(MOCK_LAUNCH_POINT_AFTER_DRIVER_EXIT, api, l.correlation_id);
  }
  return l;
}

// The launch API `domain`/`cbid` if it is one of `kind`, else -1.
int launch_api_of_kind(uint32_t domain, uint32_t cbid, MockLaunchKind kind) {
  const int index = find_launch_api(domain, cbid);
  return index >= 0 && kLaunchApis[index].kind == kind ? index : -1;
}

// What every launch checks first, in the driver's order: the API is one of `kind` (else
// CUDA_ERROR_INVALID_VALUE), handle_ok() (else CUDA_ERROR_INVALID_HANDLE), the stream resolves.
struct LaunchStart {
  CUresult error;
  int index;  // into kLaunchApis
  const LaunchApi *api;
  CUstream_st *stream;
  CUctx_st *context;
};
template <typename HandleOk>
LaunchStart start_launch(uint32_t domain, uint32_t cbid, MockLaunchKind kind, HandleOk handle_ok,
                         CUstream stream) {
  const int index = launch_api_of_kind(domain, cbid, kind);
  if (index < 0) return {CUDA_ERROR_INVALID_VALUE, index, nullptr, nullptr, nullptr};
  if (!handle_ok()) return {CUDA_ERROR_INVALID_HANDLE, index, nullptr, nullptr, nullptr};
  CUstream_st *st = resolve_stream(initialized_context(), stream);
  if (!st) return {CUDA_ERROR_INVALID_HANDLE, index, nullptr, nullptr, nullptr};
  return {CUDA_SUCCESS, index, &kLaunchApis[index], st, st->context};
}

// A launch a stream capture took: counted, nothing runs.
CUresult count_captured(int index) {
  Counters::add(stat::captured_launches);
  Counters::add(cbid_counter(index, kCbidCaptured));
  return CUDA_SUCCESS;
}

// A deterministic, plausible kernel duration: ~0.8 to 2.5 us, like those seen on the H100.
uint64_t duration_ns(uint32_t correlation_id, uint64_t graph_node_id, uint32_t function_id) {
  uint64_t x = correlation_id * 0x9e3779b97f4a7c15ull + graph_node_id * 0xbf58476d1ce4e5b9ull +
               function_id * 0x94d049bb133111ebull;
  x ^= x >> 31;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return 800 + x % 1700;
}

// Where one kernel lands on its stream's timeline (start = end = 0: not timed).
struct Planned {
  int64_t grid_id;
  uint64_t start, end;
};

// Puts one kernel on its stream's timeline.
Planned plan_kernel(CUctx_st *ctx, CUstream_st *stream, CUfunc_st *f, uint32_t correlation_id,
                    uint64_t graph_node_id, uint32_t collect_kind) {
  Planned run{};
  run.grid_id = ctx->next_grid_id.fetch_add(1, std::memory_order_relaxed);
  // MOCK_CUDA_KERNEL_NS: every kernel without a duration of its own runs that long (tests that
  // need kernels still running when their launch call returns).
  static const uint64_t kEveryKernelNs = [] {
    const char *v = std::getenv("MOCK_CUDA_KERNEL_NS");
    return v ? std::strtoull(v, nullptr, 10) : 0ull;
  }();
  uint64_t set_duration = f->duration_ns.load(std::memory_order_relaxed);
  if (set_duration == 0) set_duration = kEveryKernelNs;
  // The timeline is kept for kernels of a set duration even when no record is collected: their
  // queue can fill and block launches (mock_cuda_set_queue_limit) and be waited for.
  if (collect_kind || set_duration) {
    // Kernels of one stream run back to back, after a launch latency of about a microsecond.
    const uint64_t duration =
        set_duration ? set_duration : duration_ns(correlation_id, graph_node_id ^ run.grid_id, f->id);
    const uint64_t ready = mockbridge::now_ns() + 1000;
    uint64_t busy = stream->busy_until.load(std::memory_order_relaxed);
    do {
      run.start = std::max(ready, busy);
    } while (!stream->busy_until.compare_exchange_weak(busy, run.start + duration,
                                                       std::memory_order_relaxed));
    run.end = run.start + duration;
  }
  return run;
}

// The mock GPU runs one kernel: it tells CUPTI, which writes the activity record if asked to.
// `planned`: its place on the timeline, taken inside the launch call (graph launches); else
// taken now.
void run_kernel(const mockbridge::CuptiHooks *h, CUctx_st *ctx, CUstream_st *stream, CUfunc_st *f,
                uint32_t correlation_id, uint32_t graph_id, uint64_t graph_node_id,
                uint8_t launch_type, const Shape &shape, uint32_t collect_kind,
                const Planned *planned = nullptr) {
  Counters::add(stat::kernels_run);
  Counters::add(device_counter(ctx->device));
  if (!h) return;
  const Planned p = planned ? *planned
                            : plan_kernel(ctx, stream, f, correlation_id, graph_node_id, collect_kind);
  mockbridge::KernelRun run;
  run.grid_id = p.grid_id;
  run.start = p.start;
  run.end = p.end;
  run.collect_kind = collect_kind;
  run.graph_node_id = graph_node_id;
  run.name = f->name;
  run.device_id = static_cast<uint32_t>(ctx->device);
  run.context_id = ctx->id;
  run.stream_id = stream->id;
  run.correlation_id = correlation_id;
  run.graph_id = graph_id;
  for (int i = 0; i < 3; ++i) {
    run.grid[i] = static_cast<int32_t>(shape.grid[i]);
    run.block[i] = static_cast<int32_t>(shape.block[i]);
  }
  run.dynamic_shared_memory = static_cast<int32_t>(shape.shared_mem);
  run.launch_type = launch_type;
  h->kernel_ran(&run);
}

// A graph launch's kernels on the launch stream take their place on the timeline inside the
// launch call, as a real driver queues them there: an event recorded on the stream at the end of
// the call (the library's, src/trackers/graph_completion.h) completes after them.
// A conditional node's body runs on its own stream, yet the launch is done only when the body
// is: the launch stream waits for it.
std::vector<Planned> plan_exec(CUctx_st *ctx, CUstream_st *stream, CUgraphExec_st *exec,
                               uint32_t correlation_id, uint32_t collect_kind) {
  std::vector<Planned> plans;
  for (CUgraphNode_st *node : exec->nodes) {
    if (node->type == CU_GRAPH_NODE_TYPE_KERNEL) {
      plans.push_back(plan_kernel(ctx, stream, node->function, correlation_id, node->id,
                                  collect_kind));
    } else if (node->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && node->body) {
      for (uint32_t it = 0; it < node->iterations; ++it)
        for (CUgraphNode_st *b : node->body->nodes)
          if (b->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            plans.push_back(plan_kernel(ctx, exec->body_stream, b->function, 0, b->id,
                                        collect_kind));
            uint64_t busy = stream->busy_until.load(std::memory_order_relaxed);
            while (busy < plans.back().end &&
                   !stream->busy_until.compare_exchange_weak(busy, plans.back().end,
                                                             std::memory_order_relaxed)) {
            }
          }
    }
  }
  return plans;
}

// Runs one launch of exec; returns the kernels run.
uint64_t run_exec(const mockbridge::CuptiHooks *h, CUctx_st *ctx, CUstream_st *stream,
                  CUgraphExec_st *exec, uint32_t correlation_id, uint32_t collect_kind,
                  const std::vector<Planned> &plans) {
  const Shape shape{{128, 1, 1}, {256, 1, 1}, 0};
  uint64_t kernels = 0, conditional = 0;
  size_t planned = 0;  // plans are in node order, bodies' kernels included
  auto plan = [&]() { return planned < plans.size() ? &plans[planned++] : nullptr; };
  for (CUgraphNode_st *node : exec->nodes) {
    if (node->type == CU_GRAPH_NODE_TYPE_KERNEL) {
      run_kernel(h, ctx, stream, node->function, correlation_id, exec->id, node->id, kRegular,
                 shape, collect_kind, plan());
      ++kernels;
    } else if (node->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && node->body) {
      // docs/cupti-facts.md, fact 7: a conditional body runs as its own graph, on its own
      // stream, and its kernels lose the launch's correlation ID.
      for (uint32_t it = 0; it < node->iterations; ++it)
        for (CUgraphNode_st *b : node->body->nodes)
          if (b->type == CU_GRAPH_NODE_TYPE_KERNEL) {
            run_kernel(h, ctx, exec->body_stream, b->function, 0, node->body->id, b->id, kRegular,
                       shape, collect_kind, plan());
            ++conditional;
          }
    }  // host nodes run host code, no kernel
  }
  Counters::add(stat::graph_kernels_run, kernels + conditional);
  Counters::add(stat::conditional_kernels_run, conditional);
  return kernels + conditional;
}

}  // namespace
}  // namespace mockcuda

using namespace mockcuda;

extern "C" {

void mock_cuda_set_kernel_duration(CUfunction f, uint64_t ns) {
  if (f && f->magic == CUfunc_st::kMagic) f->duration_ns.store(ns, std::memory_order_relaxed);
}

void mock_cuda_set_queue_limit(uint64_t ns) { g_queue_limit_ns.store(ns, std::memory_order_relaxed); }

CUresult mock_cuda_stream_synchronize(CUstream stream) {
  CUstream_st *st = resolve_stream(initialized_context(), stream);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  NestedCall call(st->context, "cudaStreamSynchronize",
                  CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, nullptr,
                  "cuStreamSynchronize", CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, nullptr);
  // Spins (yielding), as CUDA's default synchronization does: a sleep would wake on the timer
  // tick that also wakes the library's watcher, a coincidence real programs do not have.
  while (st->busy_until.load(std::memory_order_relaxed) > mockbridge::now_ns())
    std::this_thread::yield();
  return CUDA_SUCCESS;
}

void mock_cuda_set_launch_hook(MockLaunchHook hook, void *arg) {
  g_launch_hook_arg.store(arg);
  g_launch_hook.store(hook, std::memory_order_release);
}

MockLaunchKind mock_cuda_launch_kind(uint32_t domain, uint32_t cbid) {
  const int i = find_launch_api(domain, cbid);
  return i < 0 ? MOCK_LAUNCH_NONE : kLaunchApis[i].kind;
}

uint32_t mock_cuda_nested_driver_cbid(uint32_t runtime_cbid) {
  const int i = find_launch_api(kRt, runtime_cbid);
  return i < 0 ? 0 : kLaunchApis[i].nested_driver_cbid;
}

const char *mock_cuda_api_name(uint32_t domain, uint32_t cbid) {
  const int i = find_launch_api(domain, cbid);
  return i < 0 ? nullptr : kLaunchApis[i].name;
}

CUresult mock_cuda_launch(uint32_t domain, uint32_t cbid, CUfunction f, CUstream stream) {
  const auto [error, index, api, st, ctx] = start_launch(
      domain, cbid, MOCK_LAUNCH_EAGER, [&] { return f && f->magic == CUfunc_st::kMagic; }, stream);
  if (error) return error;
  LaunchArgs args;
  init_args(&args, f, nullptr, stream, shape_for(*api));
  if (api->launch_type == kCoopMulti) add_other_devices(&args, ctx);
  // Inside the driver call: a full queue blocks, and stream capture (docs/cupti-facts.md, fact 5).
  const Launched l = launch_call(
      *api, &args, ctx, f->name,
      [&] {
        wait_for_queue_room(st);
        if (!st->capture_graph.load(std::memory_order_relaxed)) return false;
        capture_node(st, CU_GRAPH_NODE_TYPE_KERNEL, f);
        return true;
      },
      [](const Launched &) {});
  if (l.captured) return count_captured(index);
  Counters::add(stat::eager_launches);
  Counters::add(cbid_counter(index, kCbidLaunches));
  Counters::add(cbid_counter(index, kCbidKernels), args.multi_devices);
  // The kernel runs after the launch API has returned, as on a real GPU.
  run_kernel(hooks(), ctx, st, f, l.correlation_id, 0, 0, api->launch_type, args.shape,
             l.collect_kind);
  // The other devices of a multi-device launch: the same kernel, the same correlation ID.
  for (unsigned int i = 1; i < args.multi_devices; ++i)
    run_kernel(hooks(), args.multi_streams[i]->context, args.multi_streams[i], f,
               l.correlation_id, 0, 0, api->launch_type, args.shape, l.collect_kind);
  return CUDA_SUCCESS;
}

CUresult mock_cuda_graph_launch(uint32_t domain, uint32_t cbid, CUgraphExec exec, CUstream stream) {
  const auto [error, index, api, st, ctx] = start_launch(
      domain, cbid, MOCK_LAUNCH_GRAPH,
      [&] { return exec && exec->magic == CUgraphExec_st::kMagic; }, stream);
  if (error) return error;
  LaunchArgs args;
  init_args(&args, nullptr, exec, stream, Shape{});
  std::vector<Planned> plans;
  // Graph launches carry no symbol name (docs/cupti-facts.md, fact 2: no symbol).
  const Launched l = launch_call(
      *api, &args, ctx, nullptr,
      [&] {
        if (!st->capture_graph.load(std::memory_order_relaxed)) return false;
        capture_node(st, CU_GRAPH_NODE_TYPE_GRAPH, nullptr);  // becomes a child graph node
        return true;
      },
      [&](const Launched &now) {
        if (!now.captured && hooks())
          plans = plan_exec(ctx, st, exec, now.correlation_id, now.collect_kind);
      });
  if (l.captured) return count_captured(index);
  Counters::add(stat::graph_launches);
  Counters::add(cbid_counter(index, kCbidLaunches));
  const uint64_t kernels = run_exec(hooks(), ctx, st, exec, l.correlation_id, l.collect_kind, plans);
  Counters::add(cbid_counter(index, kCbidKernels), kernels);
  return CUDA_SUCCESS;
}

}  // extern "C"

namespace {
// The kernels an exec's nodes hold, conditional bodies included.
void exec_kernel_names(const std::vector<CUgraphNode_st *> &nodes, std::vector<const char *> *out) {
  for (const CUgraphNode_st *n : nodes) {
    if (n->function) out->push_back(n->function->name);
    if (n->body) exec_kernel_names(n->body->nodes, out);
  }
}
}  // namespace

extern "C" {

CUresult mock_cuda_graph_upload(CUgraphExec exec, CUstream stream, int driver_only) {
  ensure_initialized();
  if (!exec || exec->magic != CUgraphExec_st::kMagic) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st *ctx = current_context();
  if (!resolve_stream(ctx, stream)) return CUDA_ERROR_INVALID_HANDLE;
  // cudaGraphUpload_v10000_params and cuGraphUpload_params: the exec, then the stream.
  struct {
    CUgraphExec exec;
    CUstream stream;
  } params{exec, stream};
  const auto upload = [&] {
    const auto *h = hooks();
    if (!h) return;
    std::vector<const char *> kernels;
    exec_kernel_names(exec->nodes, &kernels);
    h->graph_uploaded(ctx->id, exec->id, kernels.data(), kernels.size());
  };
  const bool ptsz = stream == CU_STREAM_PER_THREAD;
  if (driver_only) {
    int rc = 0;
    ApiScope call(kDrv,
                  ptsz ? CUPTI_DRIVER_TRACE_CBID_cuGraphUpload_ptsz
                       : CUPTI_DRIVER_TRACE_CBID_cuGraphUpload,
                  ptsz ? "cuGraphUpload_ptsz" : "cuGraphUpload", nullptr, &params, ctx, &rc);
    upload();
  } else {
    MOCK_NESTED_CALL_PTSZ(call, ctx, ptsz, cudaGraphUpload, _v10000, &params, cuGraphUpload,
                          &params);
    upload();
  }
  return CUDA_SUCCESS;
}

size_t mock_cuda_counts_by_cbid(MockCbidCount *out, size_t capacity) {
  MockCbidCount all[kNumLaunchApis];
  size_t n = 0;
  for (size_t i = 0; i < kNumLaunchApis; ++i) {
    MockCbidCount c;
    c.signed_cbid = kLaunchApis[i].domain == kDrv ? -static_cast<int32_t>(kLaunchApis[i].cbid)
                                                  : static_cast<int32_t>(kLaunchApis[i].cbid);
    c.launches = Counters::sum(cbid_counter(i, kCbidLaunches));
    c.kernels = Counters::sum(cbid_counter(i, kCbidKernels));
    c.captured = Counters::sum(cbid_counter(i, kCbidCaptured));
    if (c.launches || c.kernels || c.captured) all[n++] = c;
  }
  std::sort(all, all + n, [](const MockCbidCount &a, const MockCbidCount &b) {
    return a.signed_cbid < b.signed_cbid;
  });
  for (size_t i = 0; i < n && i < capacity; ++i) out[i] = all[i];
  return n;
}


// Events, as far as the library uses them (the end of a graph launch's work): an event recorded
// on a stream is complete once the mock GPU has run everything queued there before it.
struct CUevent_st {
  static constexpr uint32_t kMagic = 0x45564e54;  // "EVNT"
  uint32_t magic = kMagic;
  std::atomic<uint64_t> ready_at{0};
};

CUresult cuEventCreate(CUevent *event, unsigned int) {
  MOCK_CUDA_FAULT_POINT(cuEventCreate);
  ensure_initialized();
  if (!event) return CUDA_ERROR_INVALID_VALUE;
  if (!current_context()) return CUDA_ERROR_INVALID_CONTEXT;
  *event = new CUevent_st;
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream stream) {
  MOCK_CUDA_FAULT_POINT(cuEventRecord);
  if (!event || event->magic != CUevent_st::kMagic) return CUDA_ERROR_INVALID_HANDLE;
  CUstream_st *st = resolve_stream(current_context(), stream);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  event->ready_at.store(st->busy_until.load(std::memory_order_relaxed), std::memory_order_relaxed);
  return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent event) {
  MOCK_CUDA_FAULT_POINT(cuEventQuery);
  if (!event || event->magic != CUevent_st::kMagic) return CUDA_ERROR_INVALID_HANDLE;
  return mockbridge::now_ns() >= event->ready_at.load(std::memory_order_relaxed)
             ? CUDA_SUCCESS
             : CUDA_ERROR_NOT_READY;
}

CUresult cuEventDestroy_v2(CUevent event) {
  MOCK_CUDA_FAULT_POINT(cuEventDestroy_v2);
  if (!event || event->magic != CUevent_st::kMagic) return CUDA_ERROR_INVALID_HANDLE;
  event->magic = 0;
  delete event;
  return CUDA_SUCCESS;
}

}  // extern "C"
