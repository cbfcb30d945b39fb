#include <cupti.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

#include "parcagpu/cbid_table.h"

namespace parcagpu {
namespace {

TEST(CbidTable, DriverGraphLaunchesAreSubscribedAndTaggedGraph) {
  for (uint32_t cbid : {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
                        CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz}) {
    const SubscribedCallback *cb = find_subscribed(CbDomain::Driver, cbid);
    ASSERT_NE(cb, nullptr) << cbid;
    EXPECT_EQ(cb->role, CbRole::GraphLaunch) << cb->name;
  }
}

TEST(CbidTable, RuntimeGraphLaunchesAreGraph) {
  for (uint32_t cbid : {CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                        CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000}) {
    const SubscribedCallback *cb = find_subscribed(CbDomain::Runtime, cbid);
    ASSERT_NE(cb, nullptr) << cbid;
    EXPECT_EQ(cb->role, CbRole::GraphLaunch);
  }
}

TEST(CbidTable, EveryEagerPathOfTheGroundTruthIsSubscribed) {
  // Runtime / driver cbids real CUPTI fired per launch path on the H100 (docs/cupti-facts.md,
  // fact 2).
  const std::pair<CbDomain, uint32_t> seen[] = {
      {CbDomain::Runtime, 211}, {CbDomain::Driver, 307}, {CbDomain::Runtime, 430},
      {CbDomain::Driver, 652},  {CbDomain::Runtime, 269}, {CbDomain::Driver, 477},
      {CbDomain::Runtime, 214}, {CbDomain::Driver, 442}, {CbDomain::Runtime, 311},
      {CbDomain::Driver, 514},  {CbDomain::Driver, 515},  {CbDomain::Runtime, 505},
      {CbDomain::Runtime, 506}};
  for (auto [d, cbid] : seen) EXPECT_TRUE(is_subscribed(d, cbid)) << cbid;
}

TEST(CbidTable, NoStreamCaptureOrOtherApiCbids) {
  const uint32_t capture_rt[] = {CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000,
                                 CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000,
                                 CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_ptsz_v10000,
                                 CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000};
  for (uint32_t cbid : capture_rt) EXPECT_FALSE(is_subscribed(CbDomain::Runtime, cbid)) << cbid;
  const uint32_t capture_drv[] = {CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture,
                                  CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture};
  for (uint32_t cbid : capture_drv) EXPECT_FALSE(is_subscribed(CbDomain::Driver, cbid)) << cbid;
  // Every API-domain entry is a launch, a graph upload or a graph instantiation.
  for (const auto &cb : kSubscribedCallbacks) {
    if (cb.domain == CbDomain::Resource) continue;
    EXPECT_NE(cb.role, CbRole::GraphResource) << cb.name;
    EXPECT_NE(cb.role, CbRole::ModuleResource) << cb.name;
  }
}

// A graph instantiated while PC sampling is enabled stays dearer, however it is uploaded (P26):
// every instantiate entry point, from process start.
TEST(CbidTable, GraphInstantiationsAreSubscribedFromTheStart) {
  const std::pair<CbDomain, uint32_t> calls[] = {
      {CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v10000},
      {CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithFlags_v11040},
      {CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_v12000},
      {CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_ptsz_v12000},
      {CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000},
      {CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate},
      {CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2},
      {CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags},
      {CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams},
      {CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz}};
  for (const auto &[domain, cbid] : calls) {
    const SubscribedCallback *cb = find_subscribed(domain, cbid);
    ASSERT_NE(cb, nullptr) << cbid;
    EXPECT_EQ(cb->role, CbRole::GraphInstantiate) << cb->name;
    EXPECT_TRUE(enabled_from_start(cb->role)) << cb->name;
  }
}

// A graph uploaded while PC sampling is enabled stays dearer (P21): the library must see every
// upload, the explicit ones too (tools/bench/launch_overhead.cu uploads right after instantiation),
// from process start.
TEST(CbidTable, GraphUploadsAreSubscribedFromTheStart) {
  const std::pair<CbDomain, uint32_t> uploads[] = {
      {CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphUpload_v10000},
      {CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphUpload_ptsz_v10000},
      {CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuGraphUpload},
      {CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuGraphUpload_ptsz}};
  for (auto [d, cbid] : uploads) {
    const SubscribedCallback *cb = find_subscribed(d, cbid);
    ASSERT_NE(cb, nullptr) << cbid;
    EXPECT_EQ(cb->role, CbRole::GraphUpload) << cb->name;
    EXPECT_TRUE(enabled_from_start(cb->role)) << cb->name;
  }
}

// PC sampling needs the cubins and the context lifetime from process start (issue 10).
TEST(CbidTable, ModuleAndContextResourcesForPcSampling) {
  for (uint32_t cbid : {uint32_t(CUPTI_CBID_RESOURCE_MODULE_LOADED), uint32_t(CUPTI_CBID_RESOURCE_CONTEXT_CREATED),
                        uint32_t(CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING),
                        uint32_t(CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING)}) {
    const SubscribedCallback *cb = find_subscribed(CbDomain::Resource, cbid);
    ASSERT_NE(cb, nullptr) << cbid;
    EXPECT_EQ(cb->role, CbRole::ModuleResource) << cb->name;
  }
  for (const auto &cb : kSubscribedCallbacks) {
    if (cb.role == CbRole::ModuleResource) {
      EXPECT_EQ(cb.domain, CbDomain::Resource) << cb.name;
    }
  }
}

TEST(CbidTable, EntriesAreUniqueAndNamesMatchCuptiNames) {
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (const auto &cb : kSubscribedCallbacks)
    EXPECT_TRUE(seen.insert({static_cast<uint32_t>(cb.domain), cb.cbid}).second) << cb.name;
  // Spot-check that literal ids carry the names CUPTI gives them.
  EXPECT_STREQ(find_subscribed(CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)->name,
               "cuLaunchKernelEx");
  EXPECT_STREQ(find_subscribed(CbDomain::Runtime,
                               CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000)
                   ->name,
               "cudaLaunchCooperativeKernelMultiDevice");
  size_t launches = 0, memory = 0;
  for (const auto &cb : kSubscribedCallbacks) {
    launches += is_kernel_launch_role(cb.role);
    memory += cb.role == CbRole::MemoryLaunch;
    EXPECT_EQ(is_launch_role(cb.role), is_kernel_launch_role(cb.role) || cb.role == CbRole::MemoryLaunch);
  }
  EXPECT_EQ(launches, 25u);  // 12 driver + 13 runtime launch cbids
  EXPECT_EQ(memory, 30u + 58u);  // runtime + driver copies and fills
}

// Copies and fills carry the names CUPTI gives their ids.
TEST(CbidTable, MemoryLaunchIdsMatchTheHeaders) {
  struct {
    CbDomain d;
    uint32_t id;
    const char *name;
  } const want[] = {
      {CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, "cudaMemcpy"},
      {CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, "cudaMemcpyAsync"},
      {CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_ptsz_v7000,
       "cudaMemcpy3DPeerAsync_ptsz"},
      {CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, "cudaMemsetAsync"},
      {CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_ptsz_v7000,
       "cudaMemset3DAsync_ptsz"},
      {CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync_v2"},
      {CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz, "cuMemcpyPeerAsync_ptsz"},
      {CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async_ptsz, "cuMemsetD2D32Async_ptsz"},
      {CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2, "cuMemsetD8_v2"},
  };
  for (const auto &w : want) {
    const SubscribedCallback *cb = find_subscribed(w.d, w.id);
    ASSERT_NE(cb, nullptr) << w.name;
    EXPECT_STREQ(cb->name, w.name);
    EXPECT_EQ(cb->role, CbRole::MemoryLaunch) << w.name;
  }
}

// CUDA's rule (cbid_table.h, HostSync): the copy and fill APIs without "Async" block their
// caller; those with it do not (as far as their API tells). Kernel launches are never Blocking.
TEST(CbidTable, CopiesAndFillsWithoutAsyncBlockTheirCaller) {
  size_t blocking = 0;
  for (const auto &cb : kSubscribedCallbacks) {
    const bool is_async = std::string(cb.name).find("Async") != std::string::npos;
    if (cb.role != CbRole::MemoryLaunch) {
      EXPECT_EQ(cb.host_sync, HostSync::No) << cb.name;
      continue;
    }
    EXPECT_EQ(cb.host_sync == HostSync::Blocking, !is_async) << cb.name;
    EXPECT_EQ(is_host_blocking_launch(signed_cbid(cb.domain, cb.cbid)), !is_async) << cb.name;
    blocking += cb.host_sync == HostSync::Blocking;
  }
  EXPECT_EQ(blocking, 15u + 30u);  // runtime + driver
  EXPECT_TRUE(is_host_blocking_launch(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020));
  EXPECT_TRUE(is_host_blocking_launch(-CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2));
  EXPECT_FALSE(is_host_blocking_launch(CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020));
}

TEST(CbidTable, SignedCbid) {
  EXPECT_EQ(signed_cbid(CbDomain::Driver, 514), -514);
  EXPECT_EQ(signed_cbid(CbDomain::Runtime, 311), 311);
  EXPECT_STREQ(launch_api_name(-515), "cuGraphLaunch_ptsz");
  EXPECT_STREQ(launch_api_name(211), "cudaLaunchKernel");
  EXPECT_STREQ(launch_api_name(-9999), "unknown");
}

}  // namespace
}  // namespace parcagpu
