// Graphs on the mock driver: explicit construction, WHILE conditional nodes, stream capture and
// instantiation, with the RESOURCE callbacks real CUPTI fires for each (docs/cupti-facts.md,
// facts 5-8),
// and the graph handles' CUPTI IDs.
#include <utility>
#include <optional>

#include "cuda_mock_internal.h"

namespace mockcuda {
namespace {

CUgraph_st *new_graph(CUctx_st *ctx, uint32_t id) {
  auto *g = new CUgraph_st;
  g->id = id;
  g->context = ctx;
  return g;
}

CUgraphNode_st *add_node(CUgraph_st *graph, CUgraphNodeType type, CUfunc_st *f,
                         uint32_t index_base = 0) {
  auto *n = new CUgraphNode_st;
  n->id = (static_cast<uint64_t>(graph->id) << 32) | (graph->nodes.size() + index_base);
  n->graph = graph;
  n->type = type;
  n->function = f;
  n->body = nullptr;
  n->iterations = 0;
  n->original = nullptr;
  graph->nodes.push_back(n);
  return n;
}

bool valid_graph(CUgraph g) { return g && g->magic == CUgraph_st::kMagic; }

// Frees a graph with its nodes and the conditional bodies they own.
void free_graph(CUgraph_st *graph) {
  for (CUgraphNode_st *n : graph->nodes) {
    if (n->body) free_graph(n->body);
    n->magic = 0;
    delete n;
  }
  graph->magic = 0;
  delete graph;
}

// The mock CUPTI forgets an exec's graph and its conditional bodies (their kernels carry those
// IDs) when the exec goes.
void forget_graphs(const mockbridge::CuptiHooks *h, CUctx_st *ctx, CUgraph_st *graph) {
  h->graph_destroyed(ctx->id, graph->id);
  for (CUgraphNode_st *n : graph->nodes)
    if (n->body) forget_graphs(h, ctx, n->body);
}

void node_created(CUctx_st *ctx, CUgraph_st *graph, CUgraphNode_st *node) {
  graph_event(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, ctx, graph, nullptr, node, nullptr, nullptr);
}

// Clones `from`'s nodes into `to` the way instantiation does: GRAPHNODE_CREATED then
// GRAPHNODE_CLONED per node (docs/cupti-facts.md, fact 6). Conditional bodies become graphs of
// their own with their own IDs; their nodes are numbered from 1, as the H100's were.
uint32_t clone_nodes(CUctx_st *ctx, CUgraphExec_st *exec, CUgraph_st *from, CUgraph_st *to,
                     uint32_t index_base, uint32_t repeat) {
  uint32_t kernels = 0;
  for (CUgraphNode_st *original : from->nodes) {
    CUgraphNode_st *clone = add_node(to, original->type, original->function, index_base);
    clone->original = original;
    clone->iterations = original->iterations;
    graph_event(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, ctx, to, nullptr, clone, nullptr, exec);
    graph_event(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, ctx, to, from, clone, original, exec);
    if (original->type == CU_GRAPH_NODE_TYPE_KERNEL) kernels += repeat;
    if (original->type == CU_GRAPH_NODE_TYPE_CONDITIONAL && original->body) {
      clone->body = new_graph(ctx, next_graph_id());
      clone->body->is_body = true;
      kernels +=
          clone_nodes(ctx, exec, original->body, clone->body, 1, repeat * original->iterations);
    }
  }
  return kernels;
}

}  // namespace

void release_graph(CUgraph_st *graph) {
  if (graph && graph->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) free_graph(graph);
}

void graph_event(CUpti_CallbackId cbid, CUctx_st *context, CUgraph_st *graph,
                 CUgraph_st *original_graph, CUgraphNode_st *node, CUgraphNode_st *original_node,
                 CUgraphExec_st *exec) {
  if (!hooks()) return;
  CUpti_GraphData graph_data{};
  graph_data.graph = graph;
  graph_data.originalGraph = original_graph;
  graph_data.node = node;
  graph_data.originalNode = original_node;
  // Real CUPTI 13 leaves nodeType 0 (KERNEL) in GRAPHNODE_CLONED: on the H100 a host-only
  // graph's cloned host node came through as a kernel node. A client must ask
  // cuGraphNodeGetType; the mock behaves the same so a test catches one that doesn't.
  graph_data.nodeType = node && cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED
                            ? node->type
                            : CU_GRAPH_NODE_TYPE_KERNEL;
  graph_data.graphExec = exec;
  CUpti_ResourceData data{};
  data.context = context;
  data.resourceDescriptor = &graph_data;
  domain_event(CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
}

void capture_node(CUstream_st *stream, CUgraphNodeType type, CUfunc_st *function) {
  CUgraph_st *graph = stream->capture_graph.load(std::memory_order_relaxed);
  CUgraphNode_st *node = add_node(graph, type, function);
  node_created(stream->context, graph, node);
}

}  // namespace mockcuda

using namespace mockcuda;

extern "C" {

CUresult mock_cuda_graph_create(CUgraph *graph) {
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  CUctx_st *ctx = initialized_context();
  cudaGraphCreate_v10000_params rt{reinterpret_cast<cudaGraph_t *>(graph), 0};
  cuGraphCreate_params drv{graph, 0};
  NestedCall call(ctx, "cudaGraphCreate", CUPTI_RUNTIME_TRACE_CBID_cudaGraphCreate_v10000, &rt,
                  "cuGraphCreate", CUPTI_DRIVER_TRACE_CBID_cuGraphCreate, &drv);
  *graph = new_graph(ctx, next_graph_id());
  return CUDA_SUCCESS;
}

CUresult mock_cuda_graph_add_kernel_node(CUgraph graph, CUfunction f, CUgraphNode *node) {
  if (!valid_graph(graph) || !f || f->magic != CUfunc_st::kMagic || !node)
    return CUDA_ERROR_INVALID_VALUE;
  ensure_initialized();
  CUctx_st *ctx = graph->context;
  CUDA_KERNEL_NODE_PARAMS cu_node{};
  cu_node.func = f;
  cu_node.gridDimX = 128;
  cu_node.gridDimY = cu_node.gridDimZ = 1;
  cu_node.blockDimX = 256;
  cu_node.blockDimY = cu_node.blockDimZ = 1;
  cudaKernelNodeParams rt_node{};
  rt_node.func = f;
  rt_node.gridDim = dim3(128);
  rt_node.blockDim = dim3(256);
  cudaGraphAddKernelNode_v10000_params rt{reinterpret_cast<cudaGraphNode_t *>(node), graph, nullptr,
                                          0, &rt_node};
  cuGraphAddKernelNode_v2_params drv{node, graph, nullptr, 0, &cu_node};
  NestedCall call(ctx, "cudaGraphAddKernelNode",
                  CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddKernelNode_v10000, &rt,
                  "cuGraphAddKernelNode", CUPTI_DRIVER_TRACE_CBID_cuGraphAddKernelNode_v2, &drv);
  *node = add_node(graph, CU_GRAPH_NODE_TYPE_KERNEL, f);
  node_created(ctx, graph, *node);
  return CUDA_SUCCESS;
}

CUresult mock_cuda_graph_add_host_node(CUgraph graph, CUgraphNode *node) {
  if (!valid_graph(graph) || !node) return CUDA_ERROR_INVALID_VALUE;
  ensure_initialized();
  CUctx_st *ctx = graph->context;
  CUDA_HOST_NODE_PARAMS cu_node{};
  cudaHostNodeParams rt_node{};
  cudaGraphAddHostNode_v10000_params rt{reinterpret_cast<cudaGraphNode_t *>(node), graph, nullptr,
                                        0, &rt_node};
  cuGraphAddHostNode_params drv{node, graph, nullptr, 0, &cu_node};
  NestedCall call(ctx, "cudaGraphAddHostNode", CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddHostNode_v10000,
                  &rt, "cuGraphAddHostNode", CUPTI_DRIVER_TRACE_CBID_cuGraphAddHostNode, &drv);
  *node = add_node(graph, CU_GRAPH_NODE_TYPE_HOST, nullptr);
  node_created(ctx, graph, *node);
  return CUDA_SUCCESS;
}

CUresult mock_cuda_graph_add_while_node(CUgraph graph, unsigned iterations, CUgraph *body,
                                        CUgraphNode *node) {
  if (!valid_graph(graph) || !body || !node) return CUDA_ERROR_INVALID_VALUE;
  ensure_initialized();
  CUctx_st *ctx = graph->context;
  CUgraphConditionalHandle handle = 0;
  {
    cudaGraphConditionalHandleCreate_v12030_params rt{
        reinterpret_cast<cudaGraphConditionalHandle *>(&handle), graph, 1, 0};
    cuGraphConditionalHandleCreate_params drv{&handle, graph, ctx, 1, 0};
    NestedCall call(ctx, "cudaGraphConditionalHandleCreate",
                    CUPTI_RUNTIME_TRACE_CBID_cudaGraphConditionalHandleCreate_v12030, &rt,
                    "cuGraphConditionalHandleCreate",
                    CUPTI_DRIVER_TRACE_CBID_cuGraphConditionalHandleCreate, &drv);
    handle = 0x1000 + graph->id;
  }
  CUgraphNodeParams params{};
  params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  params.conditional.handle = handle;
  params.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
  params.conditional.size = 1;
  params.conditional.phGraph_out = body;
  params.conditional.ctx = ctx;
  // cudaGraphNodeParams is laid out as CUgraphNodeParams (the runtime wraps the driver).
  cudaGraphAddNode_v12030_params rt{
      reinterpret_cast<cudaGraphNode_t *>(node),       graph, nullptr, nullptr, 0,
      reinterpret_cast<cudaGraphNodeParams *>(&params)};
  cuGraphAddNode_v2_params drv{node, graph, nullptr, nullptr, 0, &params};
  NestedCall call(ctx, "cudaGraphAddNode", CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddNode_v12030, &rt,
                  "cuGraphAddNode", CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode_v2, &drv);
  CUgraphNode_st *n = add_node(graph, CU_GRAPH_NODE_TYPE_CONDITIONAL, nullptr);
  n->body = new_graph(ctx, next_graph_id());
  n->body->is_body = true;
  n->iterations = iterations;
  *body = n->body;
  *node = n;
  node_created(ctx, graph, n);
  return CUDA_SUCCESS;
}

namespace {

// The instantiate entry points CUDA has (CUPTI's names), or nullptr.
const char *instantiate_name(uint32_t domain, uint32_t cbid) {
  if (domain == kRt) switch (cbid) {
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v10000: return "cudaGraphInstantiate_v10000";
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithFlags_v11040: return "cudaGraphInstantiateWithFlags";
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_v12000: return "cudaGraphInstantiateWithParams";
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_ptsz_v12000: return "cudaGraphInstantiateWithParams_ptsz";
      case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000: return "cudaGraphInstantiate";
      default: return nullptr;
    }
  if (domain == kDrv) switch (cbid) {
      case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate: return "cuGraphInstantiate";
      case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2: return "cuGraphInstantiate_v2";
      case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags: return "cuGraphInstantiateWithFlags";
      case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams: return "cuGraphInstantiateWithParams";
      case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz: return "cuGraphInstantiateWithParams_ptsz";
      default: return nullptr;
    }
  return nullptr;
}

}  // namespace

CUresult mock_cuda_graph_instantiate(CUgraphExec *exec, CUgraph graph) {
  return mock_cuda_graph_instantiate_through(MOCK_CUDA_DOMAIN_RUNTIME,
                                             CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000,
                                             exec, graph);
}

CUresult mock_cuda_graph_instantiate_through(uint32_t domain, uint32_t cbid, CUgraphExec *exec,
                                             CUgraph graph) {
  if (!exec || !valid_graph(graph)) return CUDA_ERROR_INVALID_VALUE;
  const char *name = instantiate_name(domain, cbid);
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  ensure_initialized();
  CUctx_st *ctx = graph->context;
  // The runtime's instantiations call the driver's (the WithParams ones its WithParams one).
  cudaGraphInstantiate_v12000_params rt{reinterpret_cast<cudaGraphExec_t *>(exec), graph, 0};
  cuGraphInstantiateWithFlags_params drv{exec, graph, 0};
  const bool with_params = cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_v12000 ||
                           cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_ptsz_v12000;
  std::optional<ApiScope> runtime, driver;
  int rt_rc = 0, drv_rc = 0;
  if (domain == kRt) {
    runtime.emplace(kRt, cbid, name, nullptr, &rt, ctx, &rt_rc);
    driver.emplace(kDrv,
                   with_params ? CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams
                               : CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags,
                   with_params ? "cuGraphInstantiateWithParams" : "cuGraphInstantiateWithFlags",
                   nullptr, &drv, ctx, &drv_rc);
  } else {
    driver.emplace(kDrv, cbid, name, nullptr, &drv, ctx, &drv_rc);
  }
  auto *e = new CUgraphExec_st;
  e->id = next_graph_id();
  e->original = graph;
  graph->refs.fetch_add(1, std::memory_order_relaxed);
  e->body_stream = new_stream(ctx);
  // The exec's nodes live in a graph carrying the exec's ID: cuptiGetGraphId of the GRAPHNODE_*
  // graph and the records' graphId agree, and node IDs are (execId << 32) | index.
  CUgraph_st *exec_graph = new_graph(ctx, e->id);
  e->exec_graph = exec_graph;
  e->kernels_per_launch = clone_nodes(ctx, e, graph, exec_graph, 0, 1);
  e->nodes = exec_graph->nodes;
  *exec = e;
  if (const auto *h = hooks()) h->graph_instantiated(ctx->id, e->id);
  graph_event(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, ctx, exec_graph, graph, nullptr, nullptr, e);
  return CUDA_SUCCESS;
}

CUresult mock_cuda_graph_exec_destroy(CUgraphExec exec) {
  if (!exec || exec->magic != CUgraphExec_st::kMagic) return CUDA_ERROR_INVALID_VALUE;
  ensure_initialized();
  CUctx_st *ctx = exec->exec_graph->context;
  cudaGraphExecDestroy_v10000_params rt{reinterpret_cast<cudaGraphExec_t>(exec)};
  cuGraphExecDestroy_params drv{exec};
  {
    NestedCall call(ctx, "cudaGraphExecDestroy",
                    CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecDestroy_v10000, &rt,
                    "cuGraphExecDestroy", CUPTI_DRIVER_TRACE_CBID_cuGraphExecDestroy, &drv);
    graph_event(CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, ctx, exec->exec_graph,
                exec->original, nullptr, nullptr, exec);
  }
  if (const auto *h = hooks()) forget_graphs(h, ctx, exec->exec_graph);
  exec->magic = 0;
  free_graph(exec->exec_graph);
  delete_stream(exec->body_stream);
  release_graph(exec->original);
  delete exec;
  return CUDA_SUCCESS;
}

CUresult mock_cuda_graph_destroy(CUgraph graph) {
  if (!valid_graph(graph) || graph->is_body) return CUDA_ERROR_INVALID_VALUE;
  ensure_initialized();
  CUctx_st *ctx = graph->context;
  cudaGraphDestroy_v10000_params rt{graph};
  cuGraphDestroy_params drv{graph};
  {
    NestedCall call(ctx, "cudaGraphDestroy", CUPTI_RUNTIME_TRACE_CBID_cudaGraphDestroy_v10000, &rt,
                    "cuGraphDestroy", CUPTI_DRIVER_TRACE_CBID_cuGraphDestroy, &drv);
    graph_event(CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING, ctx, graph, nullptr, nullptr, nullptr,
                nullptr);
  }
  release_graph(graph);  // execs instantiated from it keep it until they go
  return CUDA_SUCCESS;
}

uint32_t mock_cuda_graph_exec_kernels_per_launch(CUgraphExec exec) {
  return exec && exec->magic == CUgraphExec_st::kMagic ? exec->kernels_per_launch : 0;
}

CUresult mock_cuda_stream_begin_capture(CUstream stream) {
  CUstream_st *st = resolve_stream(initialized_context(), stream);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  const bool ptsz = is_per_thread(stream);
  const CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  cudaStreamBeginCapture_v10000_params rt{stream, cudaStreamCaptureModeGlobal};
  cuStreamBeginCapture_v2_params drv{stream, mode};
  MOCK_NESTED_CALL_PTSZ(call, st->context, ptsz, cudaStreamBeginCapture, _v10000, &rt,
                        cuStreamBeginCapture_v2, &drv);
  if (st == st->context->legacy_stream || st->capture_graph.load(std::memory_order_relaxed)) {
    call.set_result(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  st->capture_graph.store(new_graph(st->context, next_graph_id()), std::memory_order_relaxed);
  return CUDA_SUCCESS;
}

CUresult mock_cuda_stream_end_capture(CUstream stream, CUgraph *graph) {
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  CUstream_st *st = resolve_stream(initialized_context(), stream);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  const bool ptsz = is_per_thread(stream);
  cudaStreamEndCapture_v10000_params rt{stream, reinterpret_cast<cudaGraph_t *>(graph)};
  cuStreamEndCapture_params drv{stream, graph};
  MOCK_NESTED_CALL_PTSZ(call, st->context, ptsz, cudaStreamEndCapture, _v10000, &rt,
                        cuStreamEndCapture, &drv);
  CUgraph_st *captured = st->capture_graph.exchange(nullptr, std::memory_order_relaxed);
  if (!captured) {
    call.set_result(CUDA_ERROR_ILLEGAL_STATE);
    return CUDA_ERROR_ILLEGAL_STATE;
  }
  *graph = captured;
  return CUDA_SUCCESS;
}

CUresult mock_cuda_launch_host_func(CUstream stream) {
  CUstream_st *st = resolve_stream(initialized_context(), stream);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  const bool ptsz = is_per_thread(stream);
  static void (*const host_fn)(void *) = [](void *) {};
  cudaLaunchHostFunc_v10000_params rt{stream, host_fn, nullptr};
  cuLaunchHostFunc_params drv{stream, host_fn, nullptr};
  MOCK_NESTED_CALL_PTSZ(call, st->context, ptsz, cudaLaunchHostFunc, _v10000, &rt,
                        cuLaunchHostFunc, &drv);
  if (st->capture_graph.load(std::memory_order_relaxed))
    capture_node(st, CU_GRAPH_NODE_TYPE_HOST, nullptr);
  return CUDA_SUCCESS;
}

// ---- CUPTI IDs of graph handles (driver_cupti_bridge.h) ----

CUresult mock_bridge_graph_id(CUgraph graph, uint32_t *id) {
  if (!valid_graph(graph) || !id) return CUDA_ERROR_INVALID_HANDLE;
  *id = graph->id;
  return CUDA_SUCCESS;
}

CUresult mock_bridge_graph_node_id(CUgraphNode node, uint64_t *id) {
  if (!node || node->magic != CUgraphNode_st::kMagic || !id) return CUDA_ERROR_INVALID_HANDLE;
  *id = node->id;
  return CUDA_SUCCESS;
}

CUresult mock_bridge_graph_exec_id(CUgraphExec exec, uint32_t *id) {
  if (!exec || exec->magic != CUgraphExec_st::kMagic || !id) return CUDA_ERROR_INVALID_HANDLE;
  *id = exec->id;
  return CUDA_SUCCESS;
}

}  // extern "C"

// The driver's node-type query (cuGraphNodeGetType): the reliable way to learn a node's type.
extern "C" CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type) {
  MOCK_CUDA_FAULT_POINT(cuGraphNodeGetType);
  if (!hNode || !type) return CUDA_ERROR_INVALID_VALUE;
  *type = hNode->type;
  return CUDA_SUCCESS;
}

// The driver's own graph and stream entry points a CUPTI client may call (parcagpu's PC sampling
// registers a graph's kernels through an exec of its own: instantiate, upload on a stream of its
// own, wait, destroy). They go through the same paths as the application's calls, with the
// driver's callbacks.
extern "C" CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                unsigned long long /*flags*/) {
  return mock_cuda_graph_instantiate_through(MOCK_CUDA_DOMAIN_DRIVER,
                                             CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags,
                                             phGraphExec, hGraph);
}
extern "C" CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
  return mock_cuda_graph_upload(hGraphExec, hStream, /*driver_only=*/1);
}
extern "C" CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
  return mock_cuda_graph_exec_destroy(hGraphExec);
}
extern "C" CUresult cuStreamCreate(CUstream *phStream, unsigned int /*flags*/) {
  return mock_cuda_stream_create(phStream);
}
extern "C" CUresult cuStreamSynchronize(CUstream hStream) {
  return mock_cuda_stream_synchronize(hStream);
}
// Stream capture is not modelled per thread: the mode is only swapped.
extern "C" CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  static thread_local CUstreamCaptureMode t_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  if (!mode) return CUDA_ERROR_INVALID_VALUE;
  std::swap(*mode, t_mode);
  return CUDA_SUCCESS;
}
