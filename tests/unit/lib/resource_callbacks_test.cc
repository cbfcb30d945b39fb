// ResourceCallbacks (resource_callbacks.h) on the fake CUPTI table (fake_launch_cupti.h): graph,
// exec and node events handed to the graph tracker, a node created inside a launch call taken as
// stream capture (with its IDs, or said when CUPTI cannot give them), the library's own CUDA calls
// let pass, modules handed to PC sampling's cubin registry, and an explicit upload taken as the
// exec's first launch.
#include "launch/resource_callbacks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/own_cuda_calls.h"
#include "error_sites.h"
#include "fake_launch_cupti.h"
#include "launch/launch_path.h"
#include "pc/pc_sampling.h"
#include "trackers/cubin_registry.h"

namespace parcagpu::fake_launch {
namespace {

using testing_sites::site_count;

CUptiResult CUPTIAPI crc_is_size(CUpti_GetCubinCrcParams *p) {
  p->cubinCrc = p->cubinSize;
  return CUPTI_SUCCESS;
}
CUptiResult CUPTIAPI node_id_fails(CUgraphNode, uint64_t *) { return CUPTI_ERROR_UNKNOWN; }

class ResourceCallbacksTest : public LaunchFixture {
 public:
  void SetUp() override {
    LaunchFixture::SetUp();
    api_.cuptiGetCubinCrc = &crc_is_size;
    graphs_ = std::make_unique<GraphTracker>(api_, nullptr);
    pc_ = std::make_unique<PcSampler>(api_, nullptr, config_, nullptr, nullptr);
    role_.state.store(RoleState{4, RolePhase::kContinuous});
    module_.pCubin = kCubin;
    module_.cubinSize = sizeof kCubin;
    resources_ = std::make_unique<ResourceCallbacks>(api_, *graphs_, pc_.get(), role_);
  }
  // One resource callback of `cbid` describing `descriptor`, on this thread's launch `t_`.
  void resource(CUpti_CallbackId cbid, void *descriptor, CUcontext ctx = nullptr) {
    CUpti_ResourceData rd{};
    rd.context = ctx;
    rd.resourceDescriptor = descriptor;
    resources_->on_resource(t_, cbid, &rd);
  }
  void graph_event(CUpti_CallbackId cbid, uintptr_t exec, CUgraphNodeType type = {}) {
    CUpti_GraphData gd{};
    gd.graphExec = reinterpret_cast<CUgraphExec>(exec);
    gd.graph = reinterpret_cast<CUgraph>(0x6);
    gd.nodeType = type;
    resource(cbid, &gd);
  }
  // This thread inside a launch call of the role's current epoch, picked or not.
  void in_launch_call(bool announce) {
    t_.g.active = true;
    t_.g.epoch = role_.state.load().epoch();
    t_.announce = announce;
  }
  void node_created_in_call() {
    CUpti_GraphData gd{};
    gd.graph = reinterpret_cast<CUgraph>(0x9);
    gd.node = reinterpret_cast<CUgraphNode>(0x10);
    resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, &gd);
  }

  // A module whose cubin lies in this binary's image (not copied by the registry).
  static constexpr char kCubin[] =
      "\x7f"
      "ELF a cubin in this binary's image";
  CUpti_ModuleResourceData module_{};
  LaunchRole role_{1e9, 1e9, 0};
  ThreadLaunch t_{};
  std::unique_ptr<PcSampler> pc_;
  std::unique_ptr<ResourceCallbacks> resources_;
};

const void *exec_handle(uintptr_t e) { return reinterpret_cast<const void *>(e); }

// An instantiation's clones and its exec reach the tracker; the exec's destroy and its graph's
// destroy let go of what they held.
TEST_F(ResourceCallbacksTest, GraphEventsReachTheGraphTracker) {
  graph_event(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, 0, CU_GRAPH_NODE_TYPE_KERNEL);
  graph_event(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, 0, CU_GRAPH_NODE_TYPE_KERNEL);
  graph_event(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, 0xe1);
  EXPECT_EQ(graphs_->stats().execs, 1u);
  EXPECT_EQ(graphs_->on_launch(exec_handle(0xe1)).kernel_nodes, 2u);
  graph_event(CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, 0xe1);
  EXPECT_EQ(graphs_->execs_stored(), 0u);
  EXPECT_FALSE(graphs_->on_launch(exec_handle(0xe1)).known);
  fake_.graph_id = 33;
  graphs_->clones().note_capture_node(33, 330);
  graph_event(CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING, 0);
  EXPECT_EQ(graphs_->clones().stats().wanted, 0u);
}

// A node created on this thread inside a picked launch's call: stream capture, with the graph
// and node IDs the capture's announcement carries. Not one for the tracker.
TEST_F(ResourceCallbacksTest, ANodeCreatedInsideAPickedLaunchCallIsItsCapture) {
  fake_.graph_id = 7;
  fake_.node_id = 70;
  in_launch_call(true);
  node_created_in_call();
  EXPECT_TRUE(t_.captured);
  EXPECT_EQ(t_.capture_graph_id, 7u);
  EXPECT_EQ(t_.capture_node_id, 70u);
}

// Inside a launch not picked: nothing to record. In a launch of an earlier epoch (the callbacks
// went off and on since) or in none: graph building, no capture.
TEST_F(ResourceCallbacksTest, NoCaptureOutsideAPickedLaunchOfTheCurrentEpoch) {
  in_launch_call(false);
  node_created_in_call();
  EXPECT_FALSE(t_.captured);
  in_launch_call(true);
  role_.state.store(role_.state.load().next_epoch(RolePhase::kContinuous));
  node_created_in_call();
  EXPECT_FALSE(t_.captured) << "a stale launch";
  t_ = ThreadLaunch{};
  t_.announce = true;
  node_created_in_call();
  EXPECT_FALSE(t_.captured) << "in no launch call";
}

// CUPTI cannot give the node's ID: the capture is still taken, with node 0 and its graph's ID,
// said once and counted.
TEST_F(ResourceCallbacksTest, ACaptureWhoseIdsFailIsTakenAndSaidOnce) {
  fake_.graph_id = 8;
  api_.cuptiGetGraphNodeId = &node_id_fails;
  const uint64_t before = site_count("graph IDs of captured launches unknown");
  testing::internal::CaptureStderr();
  for (int i = 0; i < 3; ++i) {
    in_launch_call(true);
    node_created_in_call();
    EXPECT_TRUE(t_.captured);
    EXPECT_EQ(t_.capture_graph_id, 8u);
    EXPECT_EQ(t_.capture_node_id, 0u);
  }
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(site_count("graph IDs of captured launches unknown"), before + 3);
  EXPECT_LE(std::count(err.begin(), err.end(), '\n'), 1) << err;
  testing_sites::expect_said_once(err, "graph_capture_launch carries", before);
}

// Modules loaded and unloaded reach PC sampling's cubin registry (cubins are tracked whether PC
// sampling runs or not).
TEST_F(ResourceCallbacksTest, ModulesReachTheCubinRegistry) {
  resource(CUPTI_CBID_RESOURCE_MODULE_LOADED, &module_);
  EXPECT_EQ(pc_->cubins().stats().loaded, 1u);
  EXPECT_EQ(pc_->cubins().stats().live, 1u);
  resource(CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING, &module_);
  EXPECT_EQ(pc_->cubins().stats().unloaded, 1u);
  EXPECT_EQ(pc_->cubins().stats().live, 0u);
  resource(CUPTI_CBID_RESOURCE_MODULE_LOADED, nullptr);  // no descriptor: nothing
  EXPECT_EQ(pc_->cubins().stats().loaded, 1u);
}

// The library's own CUDA calls (PC sampling registering a graph through an exec of its own): its
// graph events are not the application's, its modules are.
TEST_F(ResourceCallbacksTest, TheLibrarysOwnGraphIsNotTrackedItsModulesAre) {
  {
    OwnCudaCalls own;
    graph_event(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, 0, CU_GRAPH_NODE_TYPE_KERNEL);
    graph_event(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, 0xe2);
    resource(CUPTI_CBID_RESOURCE_MODULE_LOADED, &module_);
  }
  EXPECT_EQ(graphs_->stats().execs, 0u);
  EXPECT_EQ(graphs_->stats().clones, 0u);
  EXPECT_EQ(pc_->cubins().stats().loaded, 1u);
}

// Without PC sampling (pc null) modules and contexts are nobody's: nothing happens.
TEST_F(ResourceCallbacksTest, WithoutPcSamplingModulesAndContextsAreLeftAlone) {
  resources_ = std::make_unique<ResourceCallbacks>(api_, *graphs_, nullptr, role_);
  resource(CUPTI_CBID_RESOURCE_MODULE_LOADED, &module_);
  resource(CUPTI_CBID_RESOURCE_CONTEXT_CREATED, nullptr);
  resource(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING, nullptr, reinterpret_cast<CUcontext>(1));
  EXPECT_EQ(pc_->cubins().stats().loaded, 0u);
}

// cudaGraphUpload / cuGraphUpload of an exec: its first launch (the upload), taken once.
TEST_F(ResourceCallbacksTest, AnExplicitUploadIsTheExecsFirstLaunch) {
  graph_event(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, 0, CU_GRAPH_NODE_TYPE_KERNEL);
  graph_event(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, 0xe3);
  const void *params[2] = {exec_handle(0xe3), nullptr};
  CUpti_CallbackData cb{};
  cb.functionParams = params;
  resources_->on_graph_upload(&cb);
  EXPECT_FALSE(graphs_->take_first_launch(exec_handle(0xe3))) << "taken by the upload";
  cb.functionParams = nullptr;
  resources_->on_graph_upload(&cb);  // no parameters: nothing
}

}  // namespace
}  // namespace parcagpu::fake_launch
