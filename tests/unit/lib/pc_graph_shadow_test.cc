// upload_shadow_exec on a fake driver: the graph is instantiated into an exec of the library's
// own, uploaded on the context's stream (made once), waited for and destroyed, all marked as the
// library's own calls and under the relaxed stream-capture mode, the thread's mode given back
// whatever failed.
#include "pc/pc_graph_shadow.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/cupti_api.h"
#include "base/own_cuda_calls.h"

namespace parcagpu {
namespace {

struct FakeDriver {
  std::vector<std::string> calls;
  std::string failing;  // the call that fails
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
  CUgraph instantiated_from = nullptr;
  CUstream uploaded_on = nullptr;
  CUgraphExec destroyed = nullptr;
  int own_calls = 0;  // calls made with t_in_own_cuda_calls set
};
FakeDriver *g_driver = nullptr;

const auto kExec = reinterpret_cast<CUgraphExec>(0xe1);
const auto kStream = reinterpret_cast<CUstream>(0x51);
const auto kGraph = reinterpret_cast<CUgraph>(0x61);

CUresult called(const char *name) {
  g_driver->calls.push_back(name);
  if (t_in_own_cuda_calls) ++g_driver->own_calls;
  return g_driver->failing == name ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
class PcGraphShadowTest : public ::testing::Test {
 protected:
  // The driver's six entry points the shadow upload calls, each recorded by called().
  void SetUp() override {
    g_driver = &driver_;
    cuda_.cuThreadExchangeStreamCaptureMode = [](CUstreamCaptureMode *mode) {
      const CUresult r = called("exchange");
      if (r == CUDA_SUCCESS) std::swap(*mode, g_driver->mode);
      return r;
    };
    cuda_.cuStreamCreate = [](CUstream *s, unsigned int flags) {
      EXPECT_EQ(flags, unsigned{CU_STREAM_NON_BLOCKING});
      const CUresult r = called("stream_create");
      *s = r == CUDA_SUCCESS ? kStream : reinterpret_cast<CUstream>(0xbad);
      return r;
    };
    cuda_.cuGraphInstantiateWithFlags = [](CUgraphExec *exec, CUgraph graph, unsigned long long) {
      EXPECT_EQ(g_driver->mode, CU_STREAM_CAPTURE_MODE_RELAXED);
      g_driver->instantiated_from = graph;
      *exec = kExec;
      return called("instantiate");
    };
    cuda_.cuGraphUpload = [](CUgraphExec exec, CUstream s) {
      EXPECT_EQ(exec, kExec);
      g_driver->uploaded_on = s;
      return called("upload");
    };
    cuda_.cuStreamSynchronize = [](CUstream s) {
      EXPECT_EQ(g_driver->mode, CU_STREAM_CAPTURE_MODE_RELAXED) << "a global capture elsewhere";
      EXPECT_EQ(s, kStream);
      return called("synchronize");
    };
    cuda_.cuGraphExecDestroy = [](CUgraphExec exec) {
      g_driver->destroyed = exec;
      return called("exec_destroy");
    };
  }
  void TearDown() override { g_driver = nullptr; }
  using Calls = std::vector<std::string>;
  FakeDriver driver_;
  CudaApi cuda_{};
  CUstream stream_ = nullptr;
};

TEST_F(PcGraphShadowTest, AnExecOfItsOwnIsUploadedWaitedForAndDestroyed) {
  ASSERT_TRUE(upload_shadow_exec(cuda_, kGraph, stream_));
  EXPECT_EQ(driver_.calls, (Calls{"exchange", "stream_create", "instantiate", "upload",
                                  "synchronize", "exec_destroy", "exchange"}));
  EXPECT_EQ(driver_.own_calls, 7) << "every call is the library's own (OwnCudaCalls)";
  EXPECT_FALSE(t_in_own_cuda_calls);
  EXPECT_EQ(driver_.mode, CU_STREAM_CAPTURE_MODE_GLOBAL) << "the thread's mode given back";
  EXPECT_EQ(driver_.instantiated_from, kGraph);
  EXPECT_EQ(driver_.uploaded_on, kStream);
  EXPECT_EQ(driver_.destroyed, kExec);
  EXPECT_EQ(stream_, kStream);
  // The stream is made once per context.
  driver_.calls.clear();
  ASSERT_TRUE(upload_shadow_exec(cuda_, kGraph, stream_));
  EXPECT_EQ(driver_.calls, (Calls{"exchange", "instantiate", "upload", "synchronize",
                                  "exec_destroy", "exchange"}));
}

TEST_F(PcGraphShadowTest, AFailedUploadStillDestroysTheExecAndGivesTheModeBack) {
  driver_.failing = "upload";
  EXPECT_FALSE(upload_shadow_exec(cuda_, kGraph, stream_));
  EXPECT_EQ(driver_.destroyed, kExec);
  EXPECT_EQ(driver_.mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
  EXPECT_EQ(driver_.calls.back(), "exchange");
  driver_.failing = "synchronize";
  driver_.destroyed = nullptr;
  EXPECT_FALSE(upload_shadow_exec(cuda_, kGraph, stream_));
  EXPECT_EQ(driver_.destroyed, kExec);
}

TEST_F(PcGraphShadowTest, NoStreamNoUploadAndTheNextTryMakesOne) {
  driver_.failing = "stream_create";
  EXPECT_FALSE(upload_shadow_exec(cuda_, kGraph, stream_));
  EXPECT_EQ(stream_, nullptr) << "not the failed call's output";
  EXPECT_EQ(driver_.calls, (Calls{"exchange", "stream_create", "exchange"}));
  EXPECT_EQ(driver_.mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
  driver_.failing.clear();
  EXPECT_TRUE(upload_shadow_exec(cuda_, kGraph, stream_));
  EXPECT_EQ(stream_, kStream);
}

TEST_F(PcGraphShadowTest, AModeThatCannotBeRelaxedUploadsNothing) {
  driver_.failing = "exchange";
  EXPECT_FALSE(upload_shadow_exec(cuda_, kGraph, stream_));
  EXPECT_EQ(driver_.calls, (Calls{"exchange"}));
  EXPECT_FALSE(t_in_own_cuda_calls);
}

}  // namespace
}  // namespace parcagpu
