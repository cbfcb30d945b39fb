/* Control API of the mock CUDA driver (build/mock/libcuda.so.1), for parcagpu-mockapp and tests.
 *
 * The mock driver stands in for the CUDA runtime and driver of a fake application: each call
 * below fires, through the mock CUPTI, exactly the callback sequence that real CUDA 13 fires for
 * the API it names (see docs/cupti-facts.md), then "runs" the kernels on a mock
 * GPU that reports them to CUPTI as kernel activity. Domains and cbids are CUPTI's numbers
 * (CUpti_CallbackDomain: 1 = driver API, 2 = runtime API; CUPTI_*_TRACE_CBID_*).
 *
 * Every call initializes the driver first if the application has not called cuInit, as the CUDA
 * runtime does, so the injection library (CUDA_INJECTION64_PATH) is loaded before the first
 * callback. All functions are thread-safe; graphs must not be modified while being launched.
 */
#ifndef PARCAGPU_MOCK_CUDA_H
#define PARCAGPU_MOCK_CUDA_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MOCK_CUDA_DOMAIN_DRIVER 1u  /* CUPTI_CB_DOMAIN_DRIVER_API */
#define MOCK_CUDA_DOMAIN_RUNTIME 2u /* CUPTI_CB_DOMAIN_RUNTIME_API */
#define MOCK_CUDA_MAX_DEVICES 16

/* ---- Devices, contexts, streams, kernels ---- */

/* Number of simulated GPUs. Default: MOCK_CUDA_NUM_DEVICES from the environment, else 1.
 * Takes effect only before the first context is created; returns CUDA_ERROR_INVALID_VALUE after
 * that or for n outside 1..MOCK_CUDA_MAX_DEVICES. */
CUresult mock_cuda_set_num_devices(int n);

/* Like cudaSetDevice: makes the device's primary context current on the calling thread, creating
 * it on first use (RESOURCE CONTEXT_CREATED). Launches without a current context use device 0. */
CUresult mock_cuda_set_device(int device);

/* The kernel of that name, interned: the handle and its name stay valid for the process. */
CUfunction mock_cuda_function(const char *kernel_name);

/* cudaStreamCreateWithFlags (runtime 198 over driver cuStreamCreate 124) on the current device,
 * with RESOURCE STREAM_CREATED. NULL / CU_STREAM_LEGACY (the context's default stream) and
 * CU_STREAM_PER_THREAD (the calling thread's default stream) are accepted by every call below. */
CUresult mock_cuda_stream_create(CUstream *stream);
/* cudaStreamDestroy (runtime 201 over driver cuStreamDestroy_v2 326) with RESOURCE
 * STREAM_DESTROY_STARTING; a graph being captured on it is discarded. */
CUresult mock_cuda_stream_destroy(CUstream stream);

/* cudaDeviceSynchronize (runtime 165 over driver cuCtxSynchronize 17) with SYNCHRONIZE
 * CONTEXT_SYNCHRONIZED. The mock GPU runs kernels synchronously, so there is nothing to wait for;
 * it exists so applications can fire the callbacks a real one would. */
CUresult mock_cuda_device_synchronize(void);

/* The application loads a module itself (cuModuleLoadData: a JIT compiler's kernels; or the next
 * module lazy loading loads): RESOURCE MODULE_LOADED in the current context, with a copy of its
 * own of the cubin (the mock has one image), unloaded by mock_cuda_unload_modules. */
CUresult mock_cuda_load_module(void);

/* Unloads every context's module (RESOURCE MODULE_UNLOAD_STARTING, then its cubin bytes are
 * freed), as cudart does at exit; the next launch in a context loads it again. */
CUresult mock_cuda_unload_modules(void);

/* The GPU time each run of f takes from now on, ns (0: the default, a plausible ~0.8-2.5 us varying
 * by launch). Kernels of one stream run back to back on the mock GPU's timeline. */
void mock_cuda_set_kernel_duration(CUfunction f, uint64_t ns);
/* A full launch queue: while a stream's queued GPU work ends more than `ns` from now, a launch
 * on it blocks inside its driver call (between the driver ENTER and EXIT, as a real launch does
 * on a full queue) until it does not. 0 (the default): launches never block. */
void mock_cuda_set_queue_limit(uint64_t ns);
/* cudaStreamSynchronize (runtime 131 over driver cuStreamSynchronize 126): waits until the
 * stream's GPU work has ended. */
CUresult mock_cuda_stream_synchronize(CUstream stream);

/* ---- Launches through any launch cbid ---- */

typedef enum MockLaunchKind {
  MOCK_LAUNCH_NONE = 0,  /* not a launch cbid the mock knows */
  MOCK_LAUNCH_EAGER = 1, /* one kernel per launch */
  MOCK_LAUNCH_GRAPH = 2, /* launches a graph exec */
} MockLaunchKind;

MockLaunchKind mock_cuda_launch_kind(uint32_t domain, uint32_t cbid);
/* For a runtime launch cbid: the driver cbid real CUDA nests under it (211 -> 307, 311 -> 514,
 * ...); 0 for driver cbids and unknown ones. */
uint32_t mock_cuda_nested_driver_cbid(uint32_t runtime_cbid);
/* The API name the callbacks carry as functionName ("cudaLaunchKernel", "cuGraphLaunch", ...),
 * NULL for an unknown pair. */
const char *mock_cuda_api_name(uint32_t domain, uint32_t cbid);

/* An eager launch of f on stream through the API (domain, cbid): a runtime cbid fires
 * RT ENTER, DRV ENTER (nested cbid, same correlation ID), DRV EXIT, RT EXIT; a driver cbid fires
 * its ENTER/EXIT alone. symbolName is the kernel name, functionParams the real *_params struct.
 * On a capturing stream the launch is recorded into the capture graph instead (RESOURCE
 * GRAPHNODE_CREATED between the driver ENTER and EXIT) and never runs.
 * Returns CUDA_ERROR_INVALID_VALUE if (domain, cbid) is not an eager launch cbid. */
CUresult mock_cuda_launch(uint32_t domain, uint32_t cbid, CUfunction f, CUstream stream);

/* A copy or fill of `bytes` on stream through the API (domain, cbid) (cuda_mock_memory.cc lists
 * them: cudaMemcpy, cudaMemcpyAsync, cudaMemcpy2DAsync, cudaMemcpy3D, cudaMemcpyPeer, cudaMemset,
 * cudaMemsetAsync over their driver calls; cuMemcpyHtoD_v2, cuMemcpyDtoHAsync_v2,
 * cuMemcpyPeerAsync, cuMemsetD32Async alone). copy_kind: CUpti_ActivityMemcpyKind (a peer API
 * makes it PTOP, a fill 0). It runs on the stream's timeline for mock_cuda_memory_duration_ns
 * (bytes); a synchronous API returns once it has run (and MOCK_CUDA_SYNC_COPY_NS has passed). Its record (MEMCPY, MEMCPY2 for a peer
 * copy, MEMSET) carries the outer call's correlation ID, if that kind was enabled inside the call.
 * CUDA_ERROR_INVALID_VALUE for another (domain, cbid). */
CUresult mock_cuda_memory(uint32_t domain, uint32_t cbid, uint64_t bytes, uint32_t copy_kind,
                          CUstream stream);
/* The same with the host side of the copy in pageable memory (pageable != 0; else pinned): its
 * record says CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE there, and an "Async" API waits as a synchronous
 * one does (PyTorch's .item() is such a DtoH cudaMemcpyAsync). */
CUresult mock_cuda_memory_host(uint32_t domain, uint32_t cbid, uint64_t bytes, uint32_t copy_kind,
                               int pageable, CUstream stream);
/* The copy or fill API's name, NULL if the mock has no such API. */
const char *mock_cuda_memory_api_name(uint32_t domain, uint32_t cbid);
uint64_t mock_cuda_memory_duration_ns(uint64_t bytes);
/* How long the calling thread's last mock_cuda_memory blocked it: a call that waits (a synchronous
 * API, or pageable host memory) until its copy has run and at least MOCK_CUDA_SYNC_COPY_NS ns; 0
 * after one that does not wait. */
uint64_t mock_cuda_memory_last_blocked_ns(void);

/* A graph launch of exec through (domain, cbid) (311 over 514, 312 over 515, 514 or 515 alone):
 * symbolName NULL, functionParams cudaGraphLaunch_*_params / cuGraphLaunch_*_params. Its kernels
 * run after the API returns: each kernel node one record with the launch's correlation ID,
 * graphId = the exec's ID and graphNodeId = (graphId << 32) | node index; a WHILE conditional
 * node runs its body `iterations` times with correlation ID 0, graphId = the body graph's ID,
 * graphNodeId = (bodyGraphId << 32) | (index + 1), on a stream of the exec's own; host nodes run
 * no kernel. Returns CUDA_ERROR_INVALID_VALUE if (domain, cbid) is not a graph launch cbid. */
CUresult mock_cuda_graph_launch(uint32_t domain, uint32_t cbid, CUgraphExec exec, CUstream stream);

/* cudaGraphUpload over cuGraphUpload (runtime 348 over driver 580; driver_only: cuGraphUpload
 * alone; the _ptsz cbids 349 / 581 on CU_STREAM_PER_THREAD): no kernel runs; the exec is uploaded
 * (registered with PC sampling if enabled on its context now), so its first launch is not an
 * upload. functionParams' first field is the exec. */
CUresult mock_cuda_graph_upload(CUgraphExec exec, CUstream stream, int driver_only);

/* Points inside a launch call where the application may act (attach or detach a consumer, say)
 * while the launch is in flight: after the outermost ENTER (for a runtime launch, before its
 * nested driver ENTER), after the nested driver ENTER, and after the nested driver EXIT (before
 * the runtime EXIT). Driver-only launches have the first point only. */
typedef enum MockLaunchPoint {
  MOCK_LAUNCH_POINT_AFTER_OUTER_ENTER = 0,
  MOCK_LAUNCH_POINT_AFTER_DRIVER_ENTER = 1,
  MOCK_LAUNCH_POINT_AFTER_DRIVER_EXIT = 2,
} MockLaunchPoint;
/* domain/cbid: the outermost call's; correlation_id: the launch's (0 without a mock CUPTI). */
typedef void (*MockLaunchHook)(MockLaunchPoint point, uint32_t domain, uint32_t cbid,
                               uint32_t correlation_id, void *arg);
/* Called at each point of every launch (eager and graph, captured ones too) on the launching
 * thread, while set; NULL removes it. */
void mock_cuda_set_launch_hook(MockLaunchHook hook, void *arg);

/* cudaLaunchHostFunc (runtime 284 over driver 527; 285 / 528 on CU_STREAM_PER_THREAD). No kernel;
 * on a capturing stream it adds a host node (RESOURCE GRAPHNODE_CREATED). */
CUresult mock_cuda_launch_host_func(CUstream stream);

/* ---- Graphs ---- */

/* cudaGraphCreate (runtime 286 over driver 501). */
CUresult mock_cuda_graph_create(CUgraph *graph);
/* cudaGraphAddKernelNode (runtime 289 over driver 689), RESOURCE GRAPHNODE_CREATED inside. */
CUresult mock_cuda_graph_add_kernel_node(CUgraph graph, CUfunction f, CUgraphNode *node);
/* cudaGraphAddHostNode (runtime 296 over driver 530), RESOURCE GRAPHNODE_CREATED inside. */
CUresult mock_cuda_graph_add_host_node(CUgraph graph, CUgraphNode *node);
/* cudaGraphConditionalHandleCreate (454 over 722) then cudaGraphAddNode (runtime 460 over
 * driver 723) of a WHILE conditional node whose body runs `iterations` times per launch; *body
 * receives the (empty) body graph to add kernel nodes to before instantiation. */
CUresult mock_cuda_graph_add_while_node(CUgraph graph, unsigned iterations, CUgraph *body,
                                        CUgraphNode *node);
/* cudaGraphInstantiate (runtime 443 over driver 643); inside the window, per node (body nodes
 * included) RESOURCE GRAPHNODE_CREATED + GRAPHNODE_CLONED, then one GRAPHEXEC_CREATED, with
 * CUpti_GraphData resolvable by cuptiGetGraphId / cuptiGetGraphNodeId / cuptiGetGraphExecId. */
CUresult mock_cuda_graph_instantiate(CUgraphExec *exec, CUgraph graph);
/* The same through any instantiate cbid CUDA has: a runtime one over the driver's
 * cuGraphInstantiateWithFlags (643; the WithParams ones over 656), a driver one alone.
 * CUDA_ERROR_INVALID_VALUE for any other (domain, cbid). */
CUresult mock_cuda_graph_instantiate_through(uint32_t domain, uint32_t cbid, CUgraphExec *exec,
                                             CUgraph graph);
/* cudaGraphExecDestroy (runtime 313 over driver 516) with RESOURCE GRAPHEXEC_DESTROY_STARTING
 * inside; the exec is freed, its handle invalid (as in CUDA). */
CUresult mock_cuda_graph_exec_destroy(CUgraphExec exec);
/* cudaGraphDestroy (runtime 314 over driver 517) with RESOURCE GRAPH_DESTROY_STARTING inside.
 * Execs instantiated from the graph stay valid (it is freed when the last of them goes).
 * Conditional body graphs belong to their node: CUDA_ERROR_INVALID_VALUE. */
CUresult mock_cuda_graph_destroy(CUgraph graph);
/* Kernels one launch of exec runs (conditional iterations included). */
uint32_t mock_cuda_graph_exec_kernels_per_launch(CUgraphExec exec);

/* ---- Stream capture ---- */

/* cudaStreamBeginCapture (runtime 315 over driver 539; 316 / 540 on CU_STREAM_PER_THREAD).
 * The legacy stream cannot be captured (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED). */
CUresult mock_cuda_stream_begin_capture(CUstream stream);
/* cudaStreamEndCapture (runtime 319 over driver 497; 320 / 498): *graph receives what was
 * captured, ready to instantiate. */
CUresult mock_cuda_stream_end_capture(CUstream stream, CUgraph *graph);

/* ---- Statistics ---- */

/* The mock driver's counters, each named once here: a field of MockCudaStats, a per-thread counter
 * of the mock (cuda_mock_internal.h) and a key of the mock app's summary. */
#define MOCK_CUDA_STATS(X)                                                                       \
  X(eager_launches)          /* eager launches that ran a kernel */                              \
  X(graph_launches)          /* graph launches (any graph, host-only and conditional too) */     \
  X(captured_launches)       /* launches recorded into a stream capture: callbacks, no kernel */ \
  X(kernels_run)             /* every kernel the mock GPU ran */                                 \
  X(graph_kernels_run)       /* of which by graph launches, conditional bodies included */       \
  X(conditional_kernels_run) /* of which in conditional bodies (correlation ID 0) */             \
  X(api_calls)               /* outermost API calls of any kind */                               \
  X(cuda_injected_failures)  /* driver calls failed on purpose by MOCK_CUDA_FAIL */

typedef struct MockCudaStats {
#define MOCK_CUDA_STAT_FIELD(name) uint64_t name;
  MOCK_CUDA_STATS(MOCK_CUDA_STAT_FIELD)
#undef MOCK_CUDA_STAT_FIELD
} MockCudaStats;

void mock_cuda_get_stats(MockCudaStats *out);

/* Per signed cbid of the OUTERMOST callback of a launch: negative = driver (-514), positive =
 * runtime (311). Captured launches are counted apart and not in `launches`. */
typedef struct MockCbidCount {
  int32_t signed_cbid;
  uint64_t launches; /* launches that ran (were not captured) */
  uint64_t kernels;  /* kernels those launches ran */
  uint64_t captured; /* launches recorded into a stream capture */
} MockCbidCount;

/* Fills up to `capacity` entries with every cbid that has a non-zero count, ordered by signed
 * cbid; returns how many there are (may exceed capacity). */
size_t mock_cuda_counts_by_cbid(MockCbidCount *out, size_t capacity);

/* Kernels the mock GPU ran on each device (conditional bodies included): out[d] for device d,
 * up to `capacity` entries; returns the number of devices. */
size_t mock_cuda_kernels_by_device(uint64_t *out, size_t capacity);

/* Whether a mock libcupti is loaded in the process and registered with the driver. */
int mock_cuda_cupti_attached(void);

#ifdef __cplusplus
}
#endif

#endif /* PARCAGPU_MOCK_CUDA_H */
