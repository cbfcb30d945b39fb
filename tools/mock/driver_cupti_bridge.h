// The private seam between the mock driver (libcuda.so.1) and the mock CUPTI (libcupti.so.13).
//
// Real CUPTI instruments the real driver from the inside; here the mock libcupti's constructor
// hands the mock libcuda a table of hooks, and the driver reports every API call, resource event
// and kernel execution through it. Without a libcupti in the process the table is never
// registered and the driver runs its launches with no callbacks, like CUDA without CUPTI.
// Both libraries are built from this one header in one build, so the table needs no versioning.
#pragma once

#include <cuda.h>
#include <cupti_callbacks.h>

#include <cstdint>
#include <ctime>

namespace mockbridge {

// CUPTI timestamps are nanoseconds on the GPU global timer, which the driver keeps in step with
// CLOCK_REALTIME; the mock uses CLOCK_REALTIME for kernel times and cuptiGetTimestamp alike.
inline uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// One runtime or driver API call in flight, on the calling thread's stack. The driver fills
// domain, cbid and the descriptive fields of `data`; CUPTI fills the correlation ID, the site and
// correlationData (pointing at `correlation_data`, shared by ENTER and EXIT as in real CUPTI).
struct ApiFrame {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  CUpti_CallbackData data;
  uint64_t correlation_data;
  ApiFrame *outer;  // the call this one is nested in, kept by CUPTI
};

// One kernel the mock GPU ran, with everything a CUpti_ActivityKernel10 record carries.
struct KernelRun {
  uint64_t start, end;
  int64_t grid_id;
  uint64_t graph_node_id;
  const char *name;  // interned by the driver, valid for the process lifetime
  uint32_t device_id, context_id, stream_id, correlation_id, graph_id;
  int32_t grid[3], block[3];
  int32_t dynamic_shared_memory;
  uint8_t launch_type;  // CUpti_ActivityLaunchType
  // The record kind to write (KERNEL / CONCURRENT_KERNEL), 0 = not collected. Decided by the
  // driver inside the launch API call, as real CUPTI does: on the H100 a kernel launched while
  // activity was enabled is recorded even when activity is disabled before it runs.
  uint32_t collect_kind;
};

// One copy or fill the mock GPU ran, with what a memcpy / memset activity record carries.
struct MemoryRun {
  uint64_t start, end, bytes;
  uint32_t kind;  // CUPTI_ACTIVITY_KIND_MEMCPY, _MEMSET or _MEMCPY2 (peer)
  uint8_t copy_kind, src_kind, dst_kind, flags;
  uint32_t device_id, context_id, stream_id, correlation_id, peer_device_id;
  uint32_t fill_value;
  bool collect;  // its kind was enabled inside the API call: its record is written
};

struct CuptiHooks {
  void (*api_enter)(ApiFrame *frame);
  void (*api_exit)(ApiFrame *frame);
  // RESOURCE and SYNCHRONIZE domain events; data is CUpti_ResourceData / CUpti_SynchronizeData.
  void (*domain_event)(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, void *data);
  // The kernel record kind that would be collected now (0 = none); asked inside launch calls.
  uint32_t (*kernel_activity_enabled)(uint32_t context_id);
  void (*kernel_ran)(const KernelRun *run);  // also counts "not collected"
  // A graph exec uploaded ahead of its first launch (cudaGraphUpload / cuGraphUpload); its first
  // launch uploads it otherwise (kernel_ran with its graph_id).
  // The upload is also the first use of the kernels it holds (`kernels`, n of them, conditional
  // bodies included; names interned): docs/pc-sampling.md P32.
  void (*graph_uploaded)(uint32_t context_id, uint32_t graph_id, const char *const *kernels,
                         size_t n);
  // A graph exec instantiated (inside the instantiate call, after its ENTER callbacks).
  void (*graph_instantiated)(uint32_t context_id, uint32_t graph_id);
  // A graph whose kernels may have run is gone (an exec's graph or one of its conditional
  // bodies, at cudaGraphExecDestroy): what the mock CUPTI kept about it goes too, so the mock's
  // memory is bounded by the live graphs and a soak measures the library alone.
  void (*graph_destroyed)(uint32_t context_id, uint32_t graph_id);
  // Called from the mock driver's destructor, the last mock code to run at process exit: by
  // then the library under test has torn down (its atexit handlers and, in the usual load
  // order, its destructors have run), so this is where the exit report is printed.
  void (*process_exit)();
  // Whether records of activity `kind` are collected now for the context (asked inside the
  // API call of a copy or fill).
  bool (*activity_kind_enabled)(uint32_t context_id, uint32_t kind);
  void (*memory_ran)(const MemoryRun *run);
};

}  // namespace mockbridge

#pragma GCC visibility push(default)
extern "C" {
// Exported by libcuda.so.1, called by libcupti.so.13.
void mock_bridge_register_cupti(const mockbridge::CuptiHooks *hooks);
CUresult mock_bridge_graph_id(CUgraph graph, uint32_t *id);
CUresult mock_bridge_graph_node_id(CUgraphNode node, uint64_t *id);
CUresult mock_bridge_graph_exec_id(CUgraphExec exec, uint32_t *id);
// context NULL: the calling thread's current context.
CUresult mock_bridge_context_ids(CUcontext context, uint32_t *context_id, uint32_t *device_id);
CUresult mock_bridge_stream_id(CUcontext context, CUstream stream, int per_thread,
                               uint32_t *stream_id);
}
#pragma GCC visibility pop
