// CUPTI callbacks that are not launches (resource_callbacks.h).
#include "launch/resource_callbacks.h"

#include "base/cupti_api.h"
#include "base/log.h"
#include "base/own_cuda_calls.h"
#include "launch/launch_path.h"
#include "launch/launch_role.h"
#include "pc/pc_sampling.h"
#include "trackers/cubin_registry.h"
#include "trackers/graph_tracker.h"

namespace parcagpu {
namespace {

RepeatedError g_capture_ids_failed("callbacks", "graph IDs of captured launches unknown");

// The graph resource events the tracker is told as they come (GRAPHNODE_CREATED may be stream
// capture instead: on_resource).
struct GraphEvent {
  CUpti_CallbackId cbid;
  void (GraphTracker::*tell)(const CUpti_GraphData *);
};
constexpr GraphEvent kGraphEvents[] = {
    {CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, &GraphTracker::on_node_cloned},
    {CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, &GraphTracker::on_exec_created},
    {CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, &GraphTracker::on_exec_destroyed},
    {CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING, &GraphTracker::on_graph_destroyed},
};

}  // namespace

// An explicit upload (cudaGraphUpload, cuGraphUpload; the runtime one calls the driver one, and
// only the first of them is the exec's upload): as a graph's first launch, it is where the graph
// would be registered with PC sampling for good if enabled (P21).
// tools/bench/launch_overhead.cu uploads right after instantiation: before, its graph was
// uploaded inside the process's first episode and every launch of it paid for that.
void ResourceCallbacks::on_graph_upload(const CUpti_CallbackData *cb) {
  if (!cb->functionParams) return;
  const void *exec = *static_cast<void *const *>(cb->functionParams);
  if (graphs_.take_first_launch(exec) && pc_) pc_->on_graph_first_launch();
}

void ResourceCallbacks::on_resource(ThreadLaunch &t, CUpti_CallbackId cbid,
                                    const CUpti_ResourceData *rd) {
  const auto *gd = rd ? static_cast<const CUpti_GraphData *>(rd->resourceDescriptor) : nullptr;
  // The library's own graph exec (PC sampling's graph registration) is not tracked; its modules
  // are the application's and are (below).
  if (t_in_own_cuda_calls && cbid != CUPTI_CBID_RESOURCE_MODULE_LOADED &&
      cbid != CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING)
    return;
  for (const GraphEvent &e : kGraphEvents)
    if (e.cbid == cbid) return (graphs_.*e.tell)(gd);
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED:
      // Inside a launch call on this thread, stream capture; else graph building or instantiation.
      if (!note_captured_launch(t, gd)) graphs_.on_node_created(gd);
      break;
    case CUPTI_CBID_RESOURCE_MODULE_LOADED:
    case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING: {
      if (!pc_ || !rd) break;
      const auto *module = static_cast<const CUpti_ModuleResourceData *>(rd->resourceDescriptor);
      if (!module) break;
      if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
        pc_->note_module_loaded();
        pc_->cubins().on_module_loaded(module->pCubin, module->cubinSize);
      } else
        pc_->cubins().on_module_unload(module->pCubin, module->cubinSize);
      break;
    }
    case CUPTI_CBID_RESOURCE_CONTEXT_CREATED:
      if (pc_) pc_->on_context_created();
      break;
    case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING:
      if (pc_ && rd) pc_->on_context_destroy(rd->context);
      break;
    default:
      break;
  }
}

// A graph node created inside a launch call on this thread: the stream is being captured and the
// launch is recorded into a graph instead of running (docs/cupti-facts.md, fact 5). Returns
// false if this thread is in no launch call of the current epoch.
bool ResourceCallbacks::note_captured_launch(ThreadLaunch &t, const CUpti_GraphData *gd) {
  if (!t.g.active || t.g.epoch != role_.state.load().epoch()) return false;
  if (!t.announce) return true;  // somebody else's sample: nothing to record
  t.captured = true;
  t.capture_graph_id = 0;
  t.capture_node_id = 0;
  // Each ID on its own: a CUPTI lacking one still gives the other (the node ID is what ties the
  // capture's clones to it, GraphCloneMappings::note_capture_node).
  CUptiResult graph_ir = CUPTI_SUCCESS, node_ir = CUPTI_SUCCESS;
  if (gd && gd->graph) graph_ir = cupti_.cuptiGetGraphId(gd->graph, &t.capture_graph_id);
  if (gd && gd->node) node_ir = cupti_.cuptiGetGraphNodeId(gd->node, &t.capture_node_id);
  const CUptiResult ir = graph_ir != CUPTI_SUCCESS ? graph_ir : node_ir;
  // (A libcupti lacking either was reported once at start.)
  if (ir != CUPTI_SUCCESS && cupti_.available(cupti_.cuptiGetGraphId) &&
      cupti_.available(cupti_.cuptiGetGraphNodeId))
    g_capture_ids_failed.report(ir,
                                "cuptiGetGraphId/cuptiGetGraphNodeId failed: %s; "
                                "graph_capture_launch carries graph and node 0 for such launches",
                                cupti_result_string(cupti_, ir));
  return true;
}

}  // namespace parcagpu
