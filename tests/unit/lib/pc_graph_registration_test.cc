// PcGraphRegistration through PcEpisodes, on the fake PC Sampling API table, a fake CUDA driver
// for the shadow exec and a fake clock: the episode under way ended before a graph step (or the
// graph let in, counted), and a graph's kernels registered by a shadow exec with kernel activity
// held off, budgeted.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pc_episodes_fixture.h"

namespace parcagpu {
namespace {

using namespace fake_pc;

// What the shadow exec asked of the driver.
std::vector<std::string> g_cuda_calls;
CUresult g_upload_result = CUDA_SUCCESS;

CUresult fake_stream_create(CUstream *s, unsigned int) {
  g_cuda_calls.push_back("cuStreamCreate");
  *s = reinterpret_cast<CUstream>(uintptr_t{0x5e});
  return CUDA_SUCCESS;
}
CUresult fake_stream_sync(CUstream) {
  g_cuda_calls.push_back("cuStreamSynchronize");
  return CUDA_SUCCESS;
}
CUresult fake_instantiate(CUgraphExec *exec, CUgraph, unsigned long long) {
  g_cuda_calls.push_back("cuGraphInstantiateWithFlags");
  *exec = reinterpret_cast<CUgraphExec>(uintptr_t{0xe0});
  return CUDA_SUCCESS;
}
CUresult fake_upload(CUgraphExec, CUstream) {
  g_cuda_calls.push_back("cuGraphUpload");
  return g_upload_result;
}
CUresult fake_exec_destroy(CUgraphExec) {
  g_cuda_calls.push_back("cuGraphExecDestroy");
  return CUDA_SUCCESS;
}
CUresult fake_capture_mode(CUstreamCaptureMode *) { return CUDA_SUCCESS; }
CUresult fake_device_get(CUdevice *d, int ordinal) {
  *d = ordinal;
  return CUDA_SUCCESS;
}
CUresult fake_attribute(int *v, CUdevice_attribute, CUdevice) {
  *v = 0;
  return CUDA_SUCCESS;
}

class PcGraphRegistrationTest : public EpisodesFixture {
 protected:
  void SetUp() override {
    EpisodesFixture::SetUp();
    g_cuda_calls.clear();
    g_upload_result = CUDA_SUCCESS;
    fake_cuda_.cuStreamCreate = &fake_stream_create;
    fake_cuda_.cuStreamSynchronize = &fake_stream_sync;
    fake_cuda_.cuGraphInstantiateWithFlags = &fake_instantiate;
    fake_cuda_.cuGraphUpload = &fake_upload;
    fake_cuda_.cuGraphExecDestroy = &fake_exec_destroy;
    fake_cuda_.cuThreadExchangeStreamCaptureMode = &fake_capture_mode;
    fake_cuda_.cuDeviceGet = &fake_device_get;
    fake_cuda_.cuDeviceGetAttribute = &fake_attribute;
    cuda_ = &fake_cuda_;
  }
  CUgraph graph(uintptr_t i = 1) { return reinterpret_cast<CUgraph>(0x6000 + i); }
  size_t pc_calls(const char *call) const {
    return std::count(fake_.calls.begin(), fake_.calls.end(), call);
  }

  CudaApi fake_cuda_;
};

TEST_F(PcGraphRegistrationTest, TheEpisodeUnderWayEndsBeforeAGraphsFirstLaunch) {
  build();
  ASSERT_EQ(launch(0), PcAction::kEnable);
  episodes_->keep_graph_out(PcEpisodes::GraphStep::kFirstLaunch, /*inside_launch=*/false);
  EXPECT_EQ(fake_.calls.back(), "Disable");
  EXPECT_FALSE(state_.any_enabled.load());
  EXPECT_EQ(episodes_->stats().ended_for_graphs, 1u);
  // With nothing enabled: nothing to do, nothing counted.
  episodes_->keep_graph_out(PcEpisodes::GraphStep::kInstantiation, false);
  EXPECT_EQ(episodes_->stats().ended_for_instantiations, 0u);
}

TEST_F(PcGraphRegistrationTest, AGraphGoesInWithPcSamplingOnWhereTheEpisodeCannotEnd) {
  build();
  ASSERT_EQ(launch(0), PcAction::kEnable);
  // Inside a launch call already: its own gate would wait for itself.
  episodes_->keep_graph_out(PcEpisodes::GraphStep::kInstantiation, /*inside_launch=*/true);
  EXPECT_TRUE(state_.any_enabled.load());
  EXPECT_EQ(episodes_->stats().graphs_instantiated_enabled, 1u);
  EXPECT_EQ(episodes_->stats().ended_for_instantiations, 0u);
  // Another thread's launch that does not leave its call in time.
  gate_.enter(0);
  episodes_->keep_graph_out(PcEpisodes::GraphStep::kFirstLaunch, false);
  gate_.leave();
  EXPECT_TRUE(state_.any_enabled.load());
  EXPECT_EQ(episodes_->stats().graphs_uploaded_enabled, 1u);
  EXPECT_EQ(episodes_->stats().gate_timeouts, 1u);
}

TEST_F(PcGraphRegistrationTest, GraphsAreLetInWithPcGraphs) {
  config_.pc_graphs = true;
  build();
  ASSERT_EQ(launch(0), PcAction::kEnable);
  episodes_->keep_graph_out(PcEpisodes::GraphStep::kFirstLaunch, false);
  EXPECT_TRUE(state_.any_enabled.load());
  EXPECT_EQ(episodes_->stats().graphs_uploaded_enabled, 1u);
}

TEST_F(PcGraphRegistrationTest, AShadowExecRegistersAGraphsKernelsWithKernelActivityOff) {
  config_.pc_graph_shadows = true;
  config_.pc_start_quiet_ms = 1000;  // the first episode waits for modules to stop loading
  build();
  state_.last_module_load_ns = g_now;
  ASSERT_EQ(launch(0), PcAction::kNone) << "start-up not over";
  episodes_->register_graph(graph(), context(0));
  EXPECT_EQ(pc_calls("Enable"), 1u);
  EXPECT_EQ(pc_calls("Disable"), 1u);
  EXPECT_EQ(fake_.contexts.back(), context(0));
  EXPECT_EQ(g_cuda_calls, (std::vector<std::string>{"cuStreamCreate", "cuGraphInstantiateWithFlags",
                                                    "cuGraphUpload", "cuStreamSynchronize",
                                                    "cuGraphExecDestroy"}));
  EXPECT_FALSE(activity_.held_off) << "kernel activity given back";
  EXPECT_FALSE(activity_.held_on) << "not held on for a registration";
  EXPECT_FALSE(state_.any_enabled.load());
  EXPECT_EQ(episodes_->stats().graphs_registered, 1u);
  // The first episode waits no longer for start-up (PcScheduler::start_up_over): it begins at
  // the next launch.
  EXPECT_EQ(launch(0), PcAction::kEnable);
}

TEST_F(PcGraphRegistrationTest, AFailedUploadOrKernelActivityLeftOnIsNotARegistration) {
  config_.pc_graph_shadows = true;
  build();
  g_upload_result = CUDA_ERROR_INVALID_VALUE;
  episodes_->register_graph(graph(1), context(0));
  EXPECT_EQ(pc_calls("Disable"), 1u) << "disabled all the same";
  activity_.off_works = false;
  episodes_->register_graph(graph(2), context(0));
  EXPECT_EQ(pc_calls("Enable"), 1u) << "not enabled with kernel activity on (P33)";
  EXPECT_EQ(episodes_->stats().graphs_not_registered, 2u);
  EXPECT_EQ(episodes_->stats().graphs_registered, 0u);
  EXPECT_TRUE(state_.usable.load()) << "not a PC Sampling API failure";
}

TEST_F(PcGraphRegistrationTest, RegistrationsAreBudgetedAfterABurst) {
  config_.pc_graph_shadows = true;
  build();
  for (uintptr_t i = 0; i < 300; ++i) episodes_->register_graph(graph(i), context(0));
  EXPECT_EQ(episodes_->stats().graphs_registered, 256u);
  EXPECT_EQ(episodes_->stats().graphs_not_registered, 44u);
  g_now += kSec;  // two a second
  for (uintptr_t i = 0; i < 3; ++i) episodes_->register_graph(graph(i), context(0));
  EXPECT_EQ(episodes_->stats().graphs_registered, 258u);
}

TEST_F(PcGraphRegistrationTest, NoRegistrationWhileAnEpisodeIsUnderWayOrWithoutShadows) {
  build();
  episodes_->register_graph(graph(), context(0));  // PARCAGPU_PC_GRAPH_SHADOWS off
  EXPECT_TRUE(g_cuda_calls.empty());
  config_.pc_graph_shadows = true;
  ASSERT_EQ(launch(0), PcAction::kEnable);
  episodes_->register_graph(graph(), context(0));
  EXPECT_TRUE(g_cuda_calls.empty());
  EXPECT_EQ(episodes_->stats().graphs_registered + episodes_->stats().graphs_not_registered, 0u);
}

}  // namespace
}  // namespace parcagpu
