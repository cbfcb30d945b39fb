#include "pc/pc_graph_shadow.h"

#include "base/cupti_api.h"
#include "base/own_cuda_calls.h"

namespace parcagpu {
namespace {

bool upload_relaxed(const CudaApi &cuda, CUgraph graph, CUstream &stream) {
  if (!stream && cuda.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    stream = nullptr;
    return false;
  }
  CUgraphExec shadow = nullptr;
  if (cuda.cuGraphInstantiateWithFlags(&shadow, graph, 0) != CUDA_SUCCESS) return false;
  const bool uploaded = cuda.cuGraphUpload(shadow, stream) == CUDA_SUCCESS &&
                        cuda.cuStreamSynchronize(stream) == CUDA_SUCCESS;
  cuda.cuGraphExecDestroy(shadow);
  return uploaded;
}

}  // namespace

bool upload_shadow_exec(const CudaApi &cuda, CUgraph graph, CUstream &stream) {
  OwnCudaCalls own;
  // Relaxed for these calls: another thread's stream capture in global mode (PyTorch's default)
  // would otherwise be invalidated by a synchronize here; set back before returning.
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (cuda.cuThreadExchangeStreamCaptureMode(&mode) != CUDA_SUCCESS) return false;
  const bool uploaded = upload_relaxed(cuda, graph, stream);
  cuda.cuThreadExchangeStreamCaptureMode(&mode);
  return uploaded;
}

}  // namespace parcagpu
