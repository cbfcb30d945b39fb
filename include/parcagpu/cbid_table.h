// The one list of CUPTI callbacks parcagpu subscribes to. The library enables exactly these
// (and disables exactly these at teardown), the mock application checks the mock CUPTI's enabled
// set against it, and the tests compare both with it. A launch path missing here produces no GPU
// profile at all, silently: tests/unit/lib/cbid_table_test.cc and the integration tests guard it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace parcagpu {

// Values of CUpti_CallbackDomain (cupti_callbacks.h); pinned by static_asserts in cupti_api.cc.
enum class CbDomain : uint32_t { Driver = 1, Runtime = 2, Resource = 3, Nvtx = 5 };

// What a subscribed callback is for.
enum class CbRole : uint8_t {
  EagerLaunch,  // one kernel per launch
  // A copy or fill (cudaMemcpy*, cuMemset*, ...): one memcpy or memset record per call, sampled
  // by the same coin as kernel launches (an eager launch to the gate and the tracker), but
  // followed only while memory_batch has a consumer: the production agent, which knows no copy
  // records, would keep each such announcement waiting for a kernel for ever.
  MemoryLaunch,
  GraphLaunch,    // one launch fans out into every kernel of the graph
  GraphResource,  // graph bookkeeping (capture, instantiation), no launch
  // A graph exec uploaded ahead of its first launch (cudaGraphUpload, cuGraphUpload): no
  // launch, but where the graph is registered with PC sampling if it is enabled then, and every
  // later launch of it costs more for good (docs/pc-sampling.md P21, P24). Enabled from process
  // start.
  GraphUpload,
  // A graph instantiated (cudaGraphInstantiate*, cuGraphInstantiate*): no launch, but an exec
  // instantiated while PC sampling is enabled pays ~1.2 us more at every later launch, however
  // it is uploaded (docs/pc-sampling.md P26). Enabled from process start.
  GraphInstantiate,
  // Module and context lifetime, for PC sampling. Enabled from process start whatever the
  // consumers (never lazily): a cubin loaded before a consumer attached must still be published
  // to it, and PC sampling must be drained and disabled before its context goes.
  ModuleResource,
};

// Launch callbacks are enabled lazily: only while a consumer listens to cuda_correlation, and
// then (at the default rate limits) only in short sampling windows, so a launch nobody samples
// never reaches the library. Every other role is enabled from process start and stays on,
// because what it reports cannot be recovered later: graph instantiations (kernel counts,
// conditional bodies, clone mappings) and, for any role added later (module loads, say),
// whatever happened before the first consumer came.
constexpr bool is_launch_role(CbRole role) {
  return role == CbRole::EagerLaunch || role == CbRole::GraphLaunch || role == CbRole::MemoryLaunch;
}
// A launch of kernels (not a copy or fill).
constexpr bool is_kernel_launch_role(CbRole role) {
  return role == CbRole::EagerLaunch || role == CbRole::GraphLaunch;
}
constexpr bool enabled_from_start(CbRole role) { return !is_launch_role(role); }

// Whether a copy or fill API returns only once its work is done (or staged), holding its caller:
// the ones without "Async". CUDA's "API synchronization behavior" (runtime and driver API
// reference): a synchronous memcpy from or to host memory returns once the copy has completed
// (pageable to device: once the buffer is staged); device to device, it queues the copy and
// returns. A synchronous memset is asynchronous with respect to the host except when it fills
// pinned host memory or managed memory, then fully synchronous. An "Async" API is asynchronous,
// except that one between device and pageable host memory may be synchronous (not measured:
// whether it waits depends on its arguments, not its API; PyTorch's .item() is a DtoH
// cudaMemcpyAsync to pinned memory and a cudaStreamSynchronize, which waits). The launch path times
// every announced copy and fill call (memory_batch's cpu blocked); parcagpu-trace counts as blocked
// the calls of Blocking APIs and those whose record says pageable host memory (docs/probe-abi.md).
enum class HostSync : uint8_t { No, Blocking };

struct SubscribedCallback {
  CbDomain domain;
  uint32_t cbid;  // CUPTI_DRIVER_TRACE_CBID_* / CUPTI_RUNTIME_TRACE_CBID_* / CUPTI_CBID_RESOURCE_*
  CbRole role;
  const char *name;
  // The CUDA major whose CUPTI first knows this callback (0: every supported one). An older
  // CUPTI refuses to enable it; its runtime has no such API, so nothing is lost.
  uint32_t since_cuda = 0;
  HostSync host_sync = HostSync::No;  // copies and fills: whether the API blocks its caller
};

// A copy or fill whose API blocks its caller (HostSync::Blocking), known to every CUDA.
constexpr SubscribedCallback blocking_copy(CbDomain domain, uint32_t cbid, const char *name) {
  return {domain, cbid, CbRole::MemoryLaunch, name, 0, HostSync::Blocking};
}

// Numeric cbids rather than the header enums: CUDA 12 headers lack some (505, 506), and the ids
// are stable across CUPTI versions. cupti_api.cc static_asserts them against the headers.
inline constexpr SubscribedCallback kSubscribedCallbacks[] = {
    // Driver API launches.
    {CbDomain::Driver, 115, CbRole::EagerLaunch, "cuLaunch"},
    {CbDomain::Driver, 116, CbRole::EagerLaunch, "cuLaunchGrid"},
    {CbDomain::Driver, 117, CbRole::EagerLaunch, "cuLaunchGridAsync"},
    {CbDomain::Driver, 307, CbRole::EagerLaunch, "cuLaunchKernel"},
    {CbDomain::Driver, 442, CbRole::EagerLaunch, "cuLaunchKernel_ptsz"},
    {CbDomain::Driver, 652, CbRole::EagerLaunch, "cuLaunchKernelEx"},
    {CbDomain::Driver, 653, CbRole::EagerLaunch, "cuLaunchKernelEx_ptsz"},
    {CbDomain::Driver, 477, CbRole::EagerLaunch, "cuLaunchCooperativeKernel"},
    {CbDomain::Driver, 478, CbRole::EagerLaunch, "cuLaunchCooperativeKernel_ptsz"},
    {CbDomain::Driver, 480, CbRole::EagerLaunch, "cuLaunchCooperativeKernelMultiDevice"},
    {CbDomain::Driver, 514, CbRole::GraphLaunch, "cuGraphLaunch"},
    {CbDomain::Driver, 515, CbRole::GraphLaunch, "cuGraphLaunch_ptsz"},
    // Runtime API launches.
    {CbDomain::Runtime, 13, CbRole::EagerLaunch, "cudaLaunch"},
    {CbDomain::Runtime, 213, CbRole::EagerLaunch, "cudaLaunch_ptsz"},
    {CbDomain::Runtime, 211, CbRole::EagerLaunch, "cudaLaunchKernel"},
    {CbDomain::Runtime, 214, CbRole::EagerLaunch, "cudaLaunchKernel_ptsz"},
    {CbDomain::Runtime, 430, CbRole::EagerLaunch, "cudaLaunchKernelExC"},
    {CbDomain::Runtime, 431, CbRole::EagerLaunch, "cudaLaunchKernelExC_ptsz"},
    {CbDomain::Runtime, 269, CbRole::EagerLaunch, "cudaLaunchCooperativeKernel"},
    {CbDomain::Runtime, 270, CbRole::EagerLaunch, "cudaLaunchCooperativeKernel_ptsz"},
    {CbDomain::Runtime, 272, CbRole::EagerLaunch, "cudaLaunchCooperativeKernelMultiDevice"},
    {CbDomain::Runtime, 505, CbRole::EagerLaunch, "__cudaLaunchKernel", 13},
    {CbDomain::Runtime, 506, CbRole::EagerLaunch, "__cudaLaunchKernel_ptsz", 13},
    {CbDomain::Runtime, 311, CbRole::GraphLaunch, "cudaGraphLaunch"},
    {CbDomain::Runtime, 312, CbRole::GraphLaunch, "cudaGraphLaunch_ptsz"},
    // Copies and fills (runtime and driver; sync, async, 2D, 3D, peer; per-thread streams).
    blocking_copy(CbDomain::Runtime, 31, "cudaMemcpy"),
    blocking_copy(CbDomain::Runtime, 32, "cudaMemcpy2D"),
    blocking_copy(CbDomain::Runtime, 144, "cudaMemcpy3D"),
    {CbDomain::Runtime, 41, CbRole::MemoryLaunch, "cudaMemcpyAsync"},
    {CbDomain::Runtime, 44, CbRole::MemoryLaunch, "cudaMemcpy2DAsync"},
    {CbDomain::Runtime, 145, CbRole::MemoryLaunch, "cudaMemcpy3DAsync"},
    blocking_copy(CbDomain::Runtime, 160, "cudaMemcpyPeer"),
    {CbDomain::Runtime, 161, CbRole::MemoryLaunch, "cudaMemcpyPeerAsync"},
    blocking_copy(CbDomain::Runtime, 162, "cudaMemcpy3DPeer"),
    {CbDomain::Runtime, 163, CbRole::MemoryLaunch, "cudaMemcpy3DPeerAsync"},
    blocking_copy(CbDomain::Runtime, 215, "cudaMemcpy_ptds"),
    blocking_copy(CbDomain::Runtime, 216, "cudaMemcpy2D_ptds"),
    blocking_copy(CbDomain::Runtime, 245, "cudaMemcpy3D_ptds"),
    {CbDomain::Runtime, 225, CbRole::MemoryLaunch, "cudaMemcpyAsync_ptsz"},
    {CbDomain::Runtime, 228, CbRole::MemoryLaunch, "cudaMemcpy2DAsync_ptsz"},
    {CbDomain::Runtime, 246, CbRole::MemoryLaunch, "cudaMemcpy3DAsync_ptsz"},
    blocking_copy(CbDomain::Runtime, 249, "cudaMemcpy3DPeer_ptds"),
    {CbDomain::Runtime, 250, CbRole::MemoryLaunch, "cudaMemcpy3DPeerAsync_ptsz"},
    blocking_copy(CbDomain::Runtime, 49, "cudaMemset"),
    blocking_copy(CbDomain::Runtime, 50, "cudaMemset2D"),
    blocking_copy(CbDomain::Runtime, 142, "cudaMemset3D"),
    {CbDomain::Runtime, 51, CbRole::MemoryLaunch, "cudaMemsetAsync"},
    {CbDomain::Runtime, 52, CbRole::MemoryLaunch, "cudaMemset2DAsync"},
    {CbDomain::Runtime, 143, CbRole::MemoryLaunch, "cudaMemset3DAsync"},
    blocking_copy(CbDomain::Runtime, 233, "cudaMemset_ptds"),
    blocking_copy(CbDomain::Runtime, 234, "cudaMemset2D_ptds"),
    blocking_copy(CbDomain::Runtime, 243, "cudaMemset3D_ptds"),
    {CbDomain::Runtime, 235, CbRole::MemoryLaunch, "cudaMemsetAsync_ptsz"},
    {CbDomain::Runtime, 236, CbRole::MemoryLaunch, "cudaMemset2DAsync_ptsz"},
    {CbDomain::Runtime, 244, CbRole::MemoryLaunch, "cudaMemset3DAsync_ptsz"},
    blocking_copy(CbDomain::Driver, 305, "cuMemcpy"),
    {CbDomain::Driver, 306, CbRole::MemoryLaunch, "cuMemcpyAsync"},
    blocking_copy(CbDomain::Driver, 276, "cuMemcpyHtoD_v2"),
    {CbDomain::Driver, 277, CbRole::MemoryLaunch, "cuMemcpyHtoDAsync_v2"},
    blocking_copy(CbDomain::Driver, 278, "cuMemcpyDtoH_v2"),
    {CbDomain::Driver, 279, CbRole::MemoryLaunch, "cuMemcpyDtoHAsync_v2"},
    blocking_copy(CbDomain::Driver, 280, "cuMemcpyDtoD_v2"),
    {CbDomain::Driver, 281, CbRole::MemoryLaunch, "cuMemcpyDtoDAsync_v2"},
    blocking_copy(CbDomain::Driver, 287, "cuMemcpy2D_v2"),
    blocking_copy(CbDomain::Driver, 288, "cuMemcpy2DUnaligned_v2"),
    {CbDomain::Driver, 289, CbRole::MemoryLaunch, "cuMemcpy2DAsync_v2"},
    blocking_copy(CbDomain::Driver, 290, "cuMemcpy3D_v2"),
    {CbDomain::Driver, 291, CbRole::MemoryLaunch, "cuMemcpy3DAsync_v2"},
    blocking_copy(CbDomain::Driver, 318, "cuMemcpyPeer"),
    {CbDomain::Driver, 319, CbRole::MemoryLaunch, "cuMemcpyPeerAsync"},
    blocking_copy(CbDomain::Driver, 320, "cuMemcpy3DPeer"),
    {CbDomain::Driver, 321, CbRole::MemoryLaunch, "cuMemcpy3DPeerAsync"},
    blocking_copy(CbDomain::Driver, 408, "cuMemcpy_ptds"),
    {CbDomain::Driver, 418, CbRole::MemoryLaunch, "cuMemcpyAsync_ptsz"},
    blocking_copy(CbDomain::Driver, 397, "cuMemcpyHtoD_v2_ptds"),
    {CbDomain::Driver, 421, CbRole::MemoryLaunch, "cuMemcpyHtoDAsync_v2_ptsz"},
    blocking_copy(CbDomain::Driver, 398, "cuMemcpyDtoH_v2_ptds"),
    {CbDomain::Driver, 422, CbRole::MemoryLaunch, "cuMemcpyDtoHAsync_v2_ptsz"},
    blocking_copy(CbDomain::Driver, 399, "cuMemcpyDtoD_v2_ptds"),
    {CbDomain::Driver, 423, CbRole::MemoryLaunch, "cuMemcpyDtoDAsync_v2_ptsz"},
    blocking_copy(CbDomain::Driver, 405, "cuMemcpy2D_v2_ptds"),
    blocking_copy(CbDomain::Driver, 406, "cuMemcpy2DUnaligned_v2_ptds"),
    {CbDomain::Driver, 424, CbRole::MemoryLaunch, "cuMemcpy2DAsync_v2_ptsz"},
    blocking_copy(CbDomain::Driver, 407, "cuMemcpy3D_v2_ptds"),
    {CbDomain::Driver, 425, CbRole::MemoryLaunch, "cuMemcpy3DAsync_v2_ptsz"},
    blocking_copy(CbDomain::Driver, 409, "cuMemcpyPeer_ptds"),
    {CbDomain::Driver, 426, CbRole::MemoryLaunch, "cuMemcpyPeerAsync_ptsz"},
    blocking_copy(CbDomain::Driver, 410, "cuMemcpy3DPeer_ptds"),
    {CbDomain::Driver, 427, CbRole::MemoryLaunch, "cuMemcpy3DPeerAsync_ptsz"},
    blocking_copy(CbDomain::Driver, 249, "cuMemsetD8_v2"),
    blocking_copy(CbDomain::Driver, 250, "cuMemsetD16_v2"),
    blocking_copy(CbDomain::Driver, 251, "cuMemsetD32_v2"),
    blocking_copy(CbDomain::Driver, 252, "cuMemsetD2D8_v2"),
    blocking_copy(CbDomain::Driver, 253, "cuMemsetD2D16_v2"),
    blocking_copy(CbDomain::Driver, 254, "cuMemsetD2D32_v2"),
    {CbDomain::Driver, 216, CbRole::MemoryLaunch, "cuMemsetD8Async"},
    {CbDomain::Driver, 218, CbRole::MemoryLaunch, "cuMemsetD16Async"},
    {CbDomain::Driver, 220, CbRole::MemoryLaunch, "cuMemsetD32Async"},
    {CbDomain::Driver, 222, CbRole::MemoryLaunch, "cuMemsetD2D8Async"},
    {CbDomain::Driver, 224, CbRole::MemoryLaunch, "cuMemsetD2D16Async"},
    {CbDomain::Driver, 226, CbRole::MemoryLaunch, "cuMemsetD2D32Async"},
    blocking_copy(CbDomain::Driver, 411, "cuMemsetD8_v2_ptds"),
    blocking_copy(CbDomain::Driver, 412, "cuMemsetD16_v2_ptds"),
    blocking_copy(CbDomain::Driver, 413, "cuMemsetD32_v2_ptds"),
    blocking_copy(CbDomain::Driver, 414, "cuMemsetD2D8_v2_ptds"),
    blocking_copy(CbDomain::Driver, 415, "cuMemsetD2D16_v2_ptds"),
    blocking_copy(CbDomain::Driver, 416, "cuMemsetD2D32_v2_ptds"),
    {CbDomain::Driver, 428, CbRole::MemoryLaunch, "cuMemsetD8Async_ptsz"},
    {CbDomain::Driver, 429, CbRole::MemoryLaunch, "cuMemsetD16Async_ptsz"},
    {CbDomain::Driver, 430, CbRole::MemoryLaunch, "cuMemsetD32Async_ptsz"},
    {CbDomain::Driver, 431, CbRole::MemoryLaunch, "cuMemsetD2D8Async_ptsz"},
    {CbDomain::Driver, 432, CbRole::MemoryLaunch, "cuMemsetD2D16Async_ptsz"},
    {CbDomain::Driver, 433, CbRole::MemoryLaunch, "cuMemsetD2D32Async_ptsz"},
    {CbDomain::Driver, 580, CbRole::GraphUpload, "cuGraphUpload"},
    {CbDomain::Driver, 581, CbRole::GraphUpload, "cuGraphUpload_ptsz"},
    {CbDomain::Runtime, 348, CbRole::GraphUpload, "cudaGraphUpload"},
    {CbDomain::Runtime, 349, CbRole::GraphUpload, "cudaGraphUpload_ptsz"},
    {CbDomain::Driver, 513, CbRole::GraphInstantiate, "cuGraphInstantiate"},
    {CbDomain::Driver, 578, CbRole::GraphInstantiate, "cuGraphInstantiate_v2"},
    {CbDomain::Driver, 643, CbRole::GraphInstantiate, "cuGraphInstantiateWithFlags"},
    {CbDomain::Driver, 656, CbRole::GraphInstantiate, "cuGraphInstantiateWithParams"},
    {CbDomain::Driver, 657, CbRole::GraphInstantiate, "cuGraphInstantiateWithParams_ptsz"},
    {CbDomain::Runtime, 310, CbRole::GraphInstantiate, "cudaGraphInstantiate_v10000"},
    {CbDomain::Runtime, 418, CbRole::GraphInstantiate, "cudaGraphInstantiateWithFlags"},
    {CbDomain::Runtime, 436, CbRole::GraphInstantiate, "cudaGraphInstantiateWithParams"},
    {CbDomain::Runtime, 437, CbRole::GraphInstantiate, "cudaGraphInstantiateWithParams_ptsz"},
    {CbDomain::Runtime, 443, CbRole::GraphInstantiate, "cudaGraphInstantiate"},
    // Graph resources (not API calls). A node created inside a launch call means the stream is
    // being captured: the launch is recorded, not run (docs/cupti-facts.md, fact 5).
    {CbDomain::Resource, 13, CbRole::GraphResource, "GRAPHNODE_CREATED"},
    // A node cloned into an executable graph at instantiation: maps a running kernel's
    // graphNodeId back to the node recorded at capture (graph_node_clone probe).
    {CbDomain::Resource, 20, CbRole::GraphResource, "GRAPHNODE_CLONED"},
    // Instantiation done / exec going away: how many kernels a launch of it runs, whether it
    // has conditional nodes (whose kernels arrive with correlation ID 0), or none at all.
    {CbDomain::Resource, 18, CbRole::GraphResource, "GRAPHEXEC_CREATED"},
    {CbDomain::Resource, 19, CbRole::GraphResource, "GRAPHEXEC_DESTROY_STARTING"},
    // A graph going away: its captured nodes' clones need no watching any more (the tracker's
    // stores stay bounded by the live graphs).
    {CbDomain::Resource, 10, CbRole::GraphResource, "GRAPH_DESTROY_STARTING"},
    // Cubins: published as cubin_loaded (with cuptiGetCubinCrc, the CRC PC samples carry) and
    // kept readable until MODULE_UNLOAD_STARTING (cubin_unloaded).
    {CbDomain::Resource, 6, CbRole::ModuleResource, "MODULE_LOADED"},
    {CbDomain::Resource, 7, CbRole::ModuleResource, "MODULE_UNLOAD_STARTING"},
    // PC sampling of a context is stopped, drained and disabled before the context is destroyed.
    {CbDomain::Resource, 1, CbRole::ModuleResource, "CONTEXT_CREATED"},
    {CbDomain::Resource, 2, CbRole::ModuleResource, "CONTEXT_DESTROY_STARTING"},
};

// The NVTX calls the library takes (CbDomain::Nvtx, CUPTI_CBID_NVTX_* of cupti_nvtx_cbid.h; the
// ids are CUPTI's, not NVTX's own NVTX_CBID_CORE_*). Enabled only while nvtx_event_batch or
// nvtx_resource_name has a consumer; each call's parameters are CUPTI's nvtx*_params structs
// (generated_nvtx_meta.h), decoded by src/nvtx/nvtx_decoder.cc.
enum class NvtxCall : uint8_t {
  MarkA,         // (const char *message)
  MarkW,         // (const wchar_t *message)
  MarkEx,        // (const nvtxEventAttributes_t *)
  RangeStartA,   // (const char *message), returns the range ID
  RangeStartW,   // (const wchar_t *message), returns the range ID
  RangeStartEx,  // (const nvtxEventAttributes_t *), returns the range ID
  RangeEnd,      // (nvtxRangeId_t id)
  RangePushA,    // (const char *message)
  RangePushW,    // (const wchar_t *message)
  RangePushEx,   // (const nvtxEventAttributes_t *)
  RangePop,      // ()
  NameOsThread,  // (uint32_t threadId, const char *name)
  NameDevice,    // (int or CUdevice device, const char *name)
  NameStream,    // (CUstream or cudaStream_t stream, const char *name)
};

struct NvtxCallback {
  uint32_t cbid;  // CUPTI_CBID_NVTX_*
  NvtxCall call;
  const char *name;
};

inline constexpr NvtxCallback kNvtxCallbacks[] = {
    {1, NvtxCall::MarkA, "nvtxMarkA"},
    {2, NvtxCall::MarkW, "nvtxMarkW"},
    {3, NvtxCall::MarkEx, "nvtxMarkEx"},
    {4, NvtxCall::RangeStartA, "nvtxRangeStartA"},
    {5, NvtxCall::RangeStartW, "nvtxRangeStartW"},
    {6, NvtxCall::RangeStartEx, "nvtxRangeStartEx"},
    {7, NvtxCall::RangeEnd, "nvtxRangeEnd"},
    {8, NvtxCall::RangePushA, "nvtxRangePushA"},
    {9, NvtxCall::RangePushW, "nvtxRangePushW"},
    {10, NvtxCall::RangePushEx, "nvtxRangePushEx"},
    {11, NvtxCall::RangePop, "nvtxRangePop"},
    {14, NvtxCall::NameOsThread, "nvtxNameOsThreadA"},
    {16, NvtxCall::NameDevice, "nvtxNameCuDeviceA"},
    {20, NvtxCall::NameStream, "nvtxNameCuStreamA"},
    {24, NvtxCall::NameDevice, "nvtxNameCudaDeviceA"},
    {26, NvtxCall::NameStream, "nvtxNameCudaStreamA"},
};

inline constexpr size_t kNumNvtxCallbacks = sizeof(kNvtxCallbacks) / sizeof(kNvtxCallbacks[0]);

// The entry of an NVTX cbid, or nullptr (by index, as subscribed_index, for UBSan's sake).
constexpr size_t nvtx_index(uint32_t cbid) {
  for (size_t i = 0; i < kNumNvtxCallbacks; ++i)
    if (kNvtxCallbacks[i].cbid == cbid) return i;
  return kNumNvtxCallbacks;
}

// Whether the CUPTI of CUDA `cuda_major` knows `cb` (0: unknown major, assume it does).
constexpr bool callback_known_to(const SubscribedCallback &cb, int cuda_major) {
  return cuda_major <= 0 || cb.since_cuda <= static_cast<uint32_t>(cuda_major);
}

inline constexpr size_t kNumSubscribedCallbacks =
    sizeof(kSubscribedCallbacks) / sizeof(kSubscribedCallbacks[0]);

// Lookups go by index, never by comparing a pointer into the table with nullptr: GCC 12 with
// -fsanitize=null (part of full UBSan) instruments that comparison and it stops being a constant
// expression, which breaks every static_assert built on it.

// Index of (domain, cbid) in kSubscribedCallbacks, or kNumSubscribedCallbacks if absent.
constexpr size_t subscribed_index(CbDomain domain, uint32_t cbid) {
  for (size_t i = 0; i < kNumSubscribedCallbacks; ++i)
    if (kSubscribedCallbacks[i].domain == domain && kSubscribedCallbacks[i].cbid == cbid) return i;
  return kNumSubscribedCallbacks;
}

constexpr const SubscribedCallback *find_subscribed(CbDomain domain, uint32_t cbid) {
  const size_t i = subscribed_index(domain, cbid);
  return i < kNumSubscribedCallbacks ? &kSubscribedCallbacks[i] : nullptr;
}

constexpr bool is_subscribed(CbDomain domain, uint32_t cbid) {
  return subscribed_index(domain, cbid) < kNumSubscribedCallbacks;
}

// Whether (domain, cbid) is a launch the library subscribes to (eager or graph).
constexpr bool is_launch_cbid(CbDomain domain, uint32_t cbid) {
  const size_t i = subscribed_index(domain, cbid);
  return i < kNumSubscribedCallbacks && is_launch_role(kSubscribedCallbacks[i].role);
}

// The cbid as the probe carries it: negative for the driver API, positive for the runtime API.
constexpr int32_t signed_cbid(CbDomain domain, uint32_t cbid) {
  return domain == CbDomain::Driver ? -static_cast<int32_t>(cbid) : static_cast<int32_t>(cbid);
}

// Index of a launch as a probe announces it (signed cbid), or kNumSubscribedCallbacks.
constexpr size_t signed_index(int32_t scbid) {
  const CbDomain d = scbid < 0 ? CbDomain::Driver : CbDomain::Runtime;
  return subscribed_index(d, static_cast<uint32_t>(scbid < 0 ? -scbid : scbid));
}

// The table entry of a launch as a probe announces it (signed cbid), or nullptr.
constexpr const SubscribedCallback *find_signed(int32_t scbid) {
  const size_t i = signed_index(scbid);
  return i < kNumSubscribedCallbacks ? &kSubscribedCallbacks[i] : nullptr;
}

// Whether an announced launch is a copy or fill.
constexpr bool is_memory_launch(int32_t scbid) {
  const size_t i = signed_index(scbid);
  return i < kNumSubscribedCallbacks && kSubscribedCallbacks[i].role == CbRole::MemoryLaunch;
}

// Whether an announced launch is a copy or fill whose API blocks its caller (HostSync).
constexpr bool is_host_blocking_launch(int32_t scbid) {
  const size_t i = signed_index(scbid);
  return i < kNumSubscribedCallbacks && kSubscribedCallbacks[i].role == CbRole::MemoryLaunch &&
         kSubscribedCallbacks[i].host_sync == HostSync::Blocking;
}

// Whether an announced launch fans out into a graph's kernels (all with its correlation ID).
constexpr bool is_graph_launch(int32_t scbid) {
  const size_t i = signed_index(scbid);
  return i < kNumSubscribedCallbacks && kSubscribedCallbacks[i].role == CbRole::GraphLaunch;
}

// The launch-API name for a signed cbid, for consumers that print it.
constexpr const char *launch_api_name(int32_t scbid) {
  const size_t i = signed_index(scbid);
  return i < kNumSubscribedCallbacks ? kSubscribedCallbacks[i].name : "unknown";
}

static_assert(kSubscribedCallbacks[subscribed_index(CbDomain::Driver, 514)].role ==
              CbRole::GraphLaunch);
static_assert(kSubscribedCallbacks[subscribed_index(CbDomain::Driver, 515)].role ==
              CbRole::GraphLaunch);
static_assert(kSubscribedCallbacks[subscribed_index(CbDomain::Runtime, 311)].role ==
              CbRole::GraphLaunch);
static_assert(is_memory_launch(31) && is_memory_launch(-279) && is_memory_launch(51) &&
              !is_memory_launch(211));
static_assert(is_host_blocking_launch(31) && is_host_blocking_launch(-278) &&
              is_host_blocking_launch(49) && !is_host_blocking_launch(41) &&
              !is_host_blocking_launch(-279) && !is_host_blocking_launch(211));
static_assert(is_graph_launch(-514) && is_graph_launch(-515) && is_graph_launch(311) &&
              is_graph_launch(312) && !is_graph_launch(211) && !is_graph_launch(-307));

}  // namespace parcagpu
