// Internals of the mock driver shared by cuda_mock*.cc: the objects behind the opaque CUDA handles,
// the driver-wide state, and the scope that reports one API call to the mock CUPTI.
#pragma once

// cuda.h's entry points and mock_cuda.h's are what the mock driver exports (the rest is hidden):
// a file that defines any includes this header before anything that includes cuda.h.
#pragma GCC visibility push(default)
#include <cuda.h>

#include "mock_cuda.h"
#pragma GCC visibility pop

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>
// generated_cuda_meta.h also describes the pre-v2 driver APIs, whose types cuda.h declares only
// when building the driver itself (__CUDA_API_VERSION_INTERNAL). The mock never fills those
// structs; declaring the names is enough.
typedef unsigned int CUdeviceptr_v1;
typedef struct CUDA_MEMCPY2D_v1_st CUDA_MEMCPY2D_v1;
typedef struct CUDA_MEMCPY3D_v1_st CUDA_MEMCPY3D_v1;
typedef struct CUDA_ARRAY_DESCRIPTOR_v1_st CUDA_ARRAY_DESCRIPTOR_v1;
typedef struct CUDA_ARRAY3D_DESCRIPTOR_v1_st CUDA_ARRAY3D_DESCRIPTOR_v1;
#include <generated_cuda_meta.h>
#include <generated_cuda_runtime_api_meta.h>

#include "driver_cupti_bridge.h"
#include "mock_cuda.h"
#include "per_thread_counters.h"

// The opaque handle types of cuda.h, defined by the mock. Each carries a magic number so the
// CUPTI id queries can reject pointers that are not the mock's.
struct CUfunc_st {
  static constexpr uint32_t kMagic = 0x46554e43;  // "FUNC"
  uint32_t magic = kMagic;
  uint32_t id;
  const char *name;  // interned, never freed
  // GPU time of one run, ns (mock_cuda_set_kernel_duration); 0: a plausible ~1-2.5 us.
  std::atomic<uint64_t> duration_ns{0};
};

struct CUstream_st {
  static constexpr uint32_t kMagic = 0x5354524d;  // "STRM"
  uint32_t magic = kMagic;
  uint32_t id;  // CUPTI stream ID
  CUctx_st *context;
  // Kernels on one stream run one after the other: the end of the last one.
  std::atomic<uint64_t> busy_until{0};
  // Non-null while the stream is being captured; only the capturing thread touches it.
  std::atomic<CUgraph_st *> capture_graph{nullptr};
};

struct CUctx_st {
  static constexpr uint32_t kMagic = 0x43545854;  // "CTXT"
  uint32_t magic = kMagic;
  uint32_t id;  // CUPTI context ID
  int device;
  CUstream_st *legacy_stream;
  std::atomic<bool> module_loaded{false};
  std::atomic<char *> module_image{nullptr};  // the cubin handed to MODULE_LOADED (heap)
  // Modules the application loaded itself (mock_cuda_load_module): their images, until unloaded.
  std::mutex more_modules_mu;
  std::vector<char *> more_module_images;
  std::atomic<int64_t> next_grid_id{1};
};

struct CUgraph_st {
  static constexpr uint32_t kMagic = 0x47525048;  // "GRPH"
  uint32_t magic = kMagic;
  uint32_t id;  // CUPTI graph ID (graphs and execs share one counter, as in real CUPTI)
  CUctx_st *context;
  std::vector<CUgraphNode_st *> nodes;  // owned, with the conditional bodies they own
  // The application's handle plus one per exec instantiated from it (an exec refers to its
  // source graph): freed when the last goes, whichever order cudaGraphDestroy and
  // cudaGraphExecDestroy come in. Body graphs of conditional nodes belong to their node.
  std::atomic<uint32_t> refs{1};
  bool is_body = false;
};

struct CUgraphNode_st {
  static constexpr uint32_t kMagic = 0x4e4f4445;  // "NODE"
  uint32_t magic = kMagic;
  uint64_t id;  // (graph ID << 32) | index
  CUgraph_st *graph;
  CUgraphNodeType type;
  CUfunc_st *function;       // kernel nodes
  CUgraph_st *body;          // conditional nodes
  uint32_t iterations;       // conditional nodes: WHILE body runs per launch
  CUgraphNode_st *original;  // cloned nodes: the node of the instantiated graph (not owned)
};

struct CUgraphExec_st {
  static constexpr uint32_t kMagic = 0x45584543;  // "EXEC"
  uint32_t magic = kMagic;
  uint32_t id;
  CUgraph_st *original;                 // holds a reference (CUgraph_st::refs)
  CUgraph_st *exec_graph;               // owned: the cloned nodes, with the exec's ID
  std::vector<CUgraphNode_st *> nodes;  // clones of the top-level nodes
  CUstream_st *body_stream;             // owned: where conditional bodies run
  uint32_t kernels_per_launch;
};

namespace mockcuda {

constexpr auto kDrv = CUPTI_CB_DOMAIN_DRIVER_API;
constexpr auto kRt = CUPTI_CB_DOMAIN_RUNTIME_API;

// The real driver entry points of the mock, by name, for MOCK_CUDA_FAIL (cuda_mock_faults.cc).
// clang-format off
#define MOCK_CUDA_ENTRY_POINTS(X) \
  X(cuInit)                       \
  X(cuDriverGetVersion)           \
  X(cuDeviceGetCount)             \
  X(cuDeviceGet)                  \
  X(cuDeviceGetName)              \
  X(cuDeviceTotalMem)             \
  X(cuDeviceGetAttribute)         \
  X(cuCtxGetCurrent)              \
  X(cuCtxGetDevice)               \
  X(cuGetErrorName)               \
  X(cuGetErrorString)             \
  X(cuGraphNodeGetType)           \
  X(cuEventCreate)                \
  X(cuEventRecord)                \
  X(cuEventQuery)                 \
  X(cuEventDestroy_v2)
// clang-format on

enum class DriverEntry : uint32_t {
#define MOCK_CUDA_ENUM(name) name,
  MOCK_CUDA_ENTRY_POINTS(MOCK_CUDA_ENUM)
#undef MOCK_CUDA_ENUM
      kCount
};

// The error MOCK_CUDA_FAIL asks `entry` to return now, or CUDA_SUCCESS.
CUresult injected_failure(DriverEntry entry);
// The counters of MockCudaStats, named as its fields (stat::kernels_run), then the per-cbid and
// per-device counters.
namespace stat {
enum Counter : size_t {
#define MOCK_CUDA_STAT_ENUM(name) name,
  MOCK_CUDA_STATS(MOCK_CUDA_STAT_ENUM)
#undef MOCK_CUDA_STAT_ENUM
      kCount
};
}  // namespace stat
inline constexpr size_t kNumScalarCounters = stat::kCount;
static_assert(sizeof(MockCudaStats) == kNumScalarCounters * sizeof(uint64_t));

// Launch APIs the mock knows, indexed for the per-cbid counters (see cuda_mock_launch.cc).
inline constexpr size_t kMaxLaunchApis = 32;
enum CbidCounter : size_t { kCbidLaunches, kCbidKernels, kCbidCaptured, kNumCbidCounters };

struct CounterTag {};
using Counters = mockstats::PerThreadCounters<
    CounterTag, kNumScalarCounters + kMaxLaunchApis * kNumCbidCounters + MOCK_CUDA_MAX_DEVICES>;

inline size_t cbid_counter(size_t launch_api_index, CbidCounter which) {
  return kNumScalarCounters + launch_api_index * kNumCbidCounters + which;
}

// Kernels run on a device (mock_cuda_kernels_by_device), after the per-cbid counters.
inline size_t device_counter(int device) {
  return kNumScalarCounters + kMaxLaunchApis * kNumCbidCounters + static_cast<size_t>(device);
}

// The hooks of the mock CUPTI, or null while no libcupti is loaded.
const mockbridge::CuptiHooks *hooks();

// Initializes the driver (and loads the injection library) like cuInit, once.
void ensure_initialized();

// The calling thread's current context, making device 0's current if there is none.
CUctx_st *current_context();
// That context once the driver is initialized (ensure_initialized): an API call's start.
inline CUctx_st *initialized_context() {
  ensure_initialized();
  return current_context();
}
// The mock GPUs (MOCK_CUDA_NUM_DEVICES), and one's context, made at first use.
int device_count();
CUctx_st *device_context(int device);
// A RESOURCE module event (MODULE_LOADED, MODULE_UNLOAD_STARTING) for one of ctx's modules.
void module_event(CUctx_st *ctx, uint32_t cbid, char *image, size_t size);
// NULL / CU_STREAM_LEGACY / CU_STREAM_PER_THREAD / a created stream, resolved in `context`;
// null for something that is not a stream.
CUstream_st *resolve_stream(CUctx_st *context, CUstream stream);
bool is_per_thread(CUstream stream);
uint32_t next_graph_id();
CUstream_st *new_stream(CUctx_st *context);
void delete_stream(CUstream_st *stream);  // with the graph it was capturing, if any
// Drops one reference to a graph; the last frees it with its nodes and their bodies.
void release_graph(CUgraph_st *graph);

// Fires RESOURCE / SYNCHRONIZE callbacks through CUPTI, if loaded.
void domain_event(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, void *data);
void graph_event(CUpti_CallbackId cbid, CUctx_st *context, CUgraph_st *graph,
                 CUgraph_st *original_graph, CUgraphNode_st *node, CUgraphNode_st *original_node,
                 CUgraphExec_st *exec);

// Records a launch on a capturing stream as a node of the capture graph (RESOURCE
// GRAPHNODE_CREATED fired from inside the caller's driver API window).
void capture_node(CUstream_st *stream, CUgraphNodeType type, CUfunc_st *function);

// One API call reported to CUPTI: ENTER on construction, EXIT on destruction. Without CUPTI it
// does nothing, and the correlation ID is 0.
class ApiScope {
 public:
  ApiScope(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const char *function_name,
           const char *symbol_name, const void *params, CUctx_st *context, void *return_value);
  ~ApiScope();
  ApiScope(const ApiScope &) = delete;
  ApiScope &operator=(const ApiScope &) = delete;
  uint32_t correlation_id() const { return frame_.data.correlationId; }

 private:
  const mockbridge::CuptiHooks *hooks_;
  mockbridge::ApiFrame frame_;
};

// A runtime API call with the driver call it makes underneath, as real CUDA nests them; the
// driver scope is skipped when driver_cbid is 0 (a driver API called directly).
struct ApiCall {
  const char *runtime_name;
  CUpti_CallbackId runtime_cbid;  // 0: the call is a driver API call
  const char *driver_name;
  CUpti_CallbackId driver_cbid;
};

// A runtime API call and the driver call beneath it, as real CUDA nests them (the graph APIs like
// launches: 443 over 643, 289 over 689, ...; stream creation, synchronization, ...).
class NestedCall {
 public:
  NestedCall(CUctx_st *ctx, const char *rt_name, CUpti_CallbackId rt_cbid, const void *rt_params,
             const char *drv_name, CUpti_CallbackId drv_cbid, const void *drv_params)
      : runtime_(kRt, rt_cbid, rt_name, nullptr, rt_params, ctx, &runtime_rc_),
        driver_(kDrv, drv_cbid, drv_name, nullptr, drv_params, ctx, &driver_rc_) {}
  void set_result(CUresult rc) {
    driver_rc_ = rc;
    runtime_rc_ = rc;  // cudaError_t and CUresult share the values the mock returns
  }

 private:
  int runtime_rc_ = 0, driver_rc_ = 0;
  ApiScope runtime_;
  ApiScope driver_;  // declared last: its EXIT fires first
};

// A NestedCall `var` of the runtime API `rt` (its cbid's version suffix `ver`) over the driver API
// `drv`, both in their per-thread default stream flavour (_ptsz) when `ptsz`.
#define MOCK_NESTED_CALL_PTSZ(var, ctx, ptsz, rt, ver, rt_params, drv, drv_params)             \
  NestedCall var(                                                                              \
      ctx, (ptsz) ? #rt "_ptsz" : #rt,                                                         \
      (ptsz) ? CUPTI_RUNTIME_TRACE_CBID_##rt##_ptsz##ver : CUPTI_RUNTIME_TRACE_CBID_##rt##ver, \
      rt_params, (ptsz) ? #drv "_ptsz" : #drv,                                                 \
      (ptsz) ? CUPTI_DRIVER_TRACE_CBID_##drv##_ptsz : CUPTI_DRIVER_TRACE_CBID_##drv, drv_params)

}  // namespace mockcuda

// Real driver entry points start with this: MOCK_CUDA_FAIL makes the named ones return the
// injected error and do nothing else.
#define MOCK_CUDA_FAULT_POINT(entry)                                                        \
  do {                                                                                      \
    if (const CUresult injected = mockcuda::injected_failure(mockcuda::DriverEntry::entry); \
        injected != CUDA_SUCCESS)                                                           \
      return injected;                                                                      \
  } while (0)
