// CUPTI callbacks that are not launches: the resource domain (graphs, execs and nodes for
// GraphTracker, modules and contexts for PC sampling) and explicit graph uploads. Enabled from
// process start (kSubscribedCallbacks), whether a consumer listens or not. Dispatched by
// LaunchCallbacks::on_callback (launch_callbacks.cc).
#include "correlation_tracker.h"
#include "cubin_registry.h"
#include "graph_tracker.h"
#include "launch_callbacks.h"
#include "pc_sampling.h"

namespace parcagpu {

// An explicit upload (cudaGraphUpload, cuGraphUpload; the runtime one calls the driver one, and
// only the first of them is the exec's upload): as a graph's first launch, it is where the graph
// would be registered with PC sampling for good if enabled (P21). bench/launch_overhead.cu uploads
// right after instantiation: before, its graph was uploaded inside the process's first episode
// and every launch of it paid for that.
void LaunchCallbacks::on_graph_upload(const CUpti_CallbackData *cb) {
  if (!cb->functionParams) return;
  const void *exec = *static_cast<void *const *>(cb->functionParams);
  if (graphs_.take_first_launch(exec) && pc_) pc_->on_graph_first_launch();
}

void LaunchCallbacks::on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData *rd) {
  const auto *gd = rd ? static_cast<const CUpti_GraphData *>(rd->resourceDescriptor) : nullptr;
  switch (cbid) {
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED:
      // Inside a launch call on this thread, stream capture; else graph building or instantiation.
      if (!note_captured_launch(gd)) graphs_.on_node_created(gd);
      break;
    case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED:
      graphs_.on_node_cloned(gd);
      break;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED:
      graphs_.on_exec_created(gd);
      break;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING:
      graphs_.on_exec_destroyed(gd);
      break;
    case CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING:
      graphs_.on_graph_destroyed(gd);
      break;
    case CUPTI_CBID_RESOURCE_MODULE_LOADED:
    case CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING: {
      if (!pc_ || !rd) break;
      const auto *module = static_cast<const CUpti_ModuleResourceData *>(rd->resourceDescriptor);
      if (!module) break;
      if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED)
        pc_->cubins().on_module_loaded(module->pCubin, module->cubinSize);
      else
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

}  // namespace parcagpu
