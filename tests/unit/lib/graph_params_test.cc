// LaunchCallbacks reads the graph of an instantiation as the second pointer of the call's
// parameters, whichever instantiate entry point it is (PC sampling registers that graph's kernels,
// PcEpisodes::register_graph). The toolkit's parameter structs, held to that.
#include <cuda.h>
// The pre-v2 driver APIs' types, which cuda.h declares only when building the driver
// (tools/mock/cuda_mock_internal.h says the same): named, never filled.
typedef unsigned int CUdeviceptr_v1;
typedef struct CUDA_MEMCPY2D_v1_st CUDA_MEMCPY2D_v1;
typedef struct CUDA_MEMCPY3D_v1_st CUDA_MEMCPY3D_v1;
typedef struct CUDA_ARRAY_DESCRIPTOR_v1_st CUDA_ARRAY_DESCRIPTOR_v1;
typedef struct CUDA_ARRAY3D_DESCRIPTOR_v1_st CUDA_ARRAY3D_DESCRIPTOR_v1;
#include <generated_cuda_meta.h>
#include <generated_cuda_runtime_api_meta.h>
#include <gtest/gtest.h>

#include <cstddef>

namespace {

#define PARCAGPU_GRAPH_SECOND(Params, field)                                           \
  static_assert(offsetof(Params, field) == sizeof(void *) &&                           \
                    sizeof(Params::field) == sizeof(void *),                           \
                #Params "'s graph is not its second pointer")

PARCAGPU_GRAPH_SECOND(cuGraphInstantiate_params, hGraph);
PARCAGPU_GRAPH_SECOND(cuGraphInstantiate_v2_params, hGraph);
PARCAGPU_GRAPH_SECOND(cuGraphInstantiateWithFlags_params, hGraph);
PARCAGPU_GRAPH_SECOND(cuGraphInstantiateWithParams_params, hGraph);
PARCAGPU_GRAPH_SECOND(cuGraphInstantiateWithParams_ptsz_params, hGraph);
PARCAGPU_GRAPH_SECOND(cudaGraphInstantiate_v12000_params, graph);
PARCAGPU_GRAPH_SECOND(cudaGraphInstantiateWithFlags_v11040_params, graph);
PARCAGPU_GRAPH_SECOND(cudaGraphInstantiateWithParams_v12000_params, graph);
PARCAGPU_GRAPH_SECOND(cudaGraphInstantiateWithParams_ptsz_v12000_params, graph);

TEST(GraphParams, TheGraphIsTheSecondPointerOfEveryInstantiation) {
  // What the callback does, on a filled struct of each kind.
  CUgraph g = reinterpret_cast<CUgraph>(0x1234);
  CUgraphExec e = nullptr;
  cuGraphInstantiateWithFlags_params drv{&e, g, 0};
  cudaGraphInstantiateWithParams_v12000_params rt{nullptr, g, nullptr};
  EXPECT_EQ(static_cast<void *const *>(static_cast<const void *>(&drv))[1], g);
  EXPECT_EQ(static_cast<void *const *>(static_cast<const void *>(&rt))[1], g);
}

}  // namespace
