// libcupti and libcuda, loaded at run time (volk style): one flat table of function pointers,
// filled by one init call. Nothing links libcupti or libcuda at build time, so one binary serves
// CUDA 12 and 13 and a machine without CUDA just leaves the library inert.
#pragma once

#include <cuda.h>
#include <cupti.h>
#include <cupti_pcsampling.h>

#include <functional>
#include <string>
#include <vector>

namespace parcagpu {

// Entry points the eager launch path needs: a libcupti lacking one is not used.
#define PARCAGPU_CUPTI_REQUIRED(X)  \
  X(cuptiGetVersion)                \
  X(cuptiSubscribe)                 \
  X(cuptiUnsubscribe)               \
  X(cuptiEnableCallback)            \
  X(cuptiActivityEnable)            \
  X(cuptiActivityDisable)           \
  X(cuptiActivityRegisterCallbacks) \
  X(cuptiActivityFlushAll)          \
  X(cuptiActivityGetNextRecord)

// Everything else, with what goes without it. Older CUPTIs lack some (cuptiGetGraphExecId came
// with CUDA 12.3) and other builds may lack any: a missing one is replaced by a stub that returns
// CUPTI_ERROR_NOT_SUPPORTED and leaves its outputs alone, so call sites need no null checks;
// `CuptiApi::available()` tells a feature whether its entry points are real. One `error` probe
// and one log line at start name the missing ones and the features that are off.
// To add entry points (PC sampling, ...): one X(name, "what goes without it") line here.
#define PARCAGPU_CUPTI_OPTIONAL(X)                                        \
  X(cuptiGetResultString, "error names")                                  \
  X(cuptiActivityGetNumDroppedRecords, "counts of records CUPTI dropped") \
  X(cuptiGetGraphId, "graph ids, conditional-body kernels")               \
  X(cuptiGetGraphNodeId, "graph node ids, graph_node_clone")              \
  X(cuptiGetGraphExecId, "exec ids in the debug log")                     \
  X(cuptiGetTimestamp, "launch times of conditional graphs")              \
  X(cuptiPCSamplingEnable, "PC sampling")                                 \
  X(cuptiPCSamplingDisable, "PC sampling")                                \
  X(cuptiPCSamplingStart, "PC sampling")                                  \
  X(cuptiPCSamplingStop, "PC sampling")                                   \
  X(cuptiPCSamplingGetData, "PC sampling")                                \
  X(cuptiPCSamplingSetConfigurationAttribute, "PC sampling")              \
  X(cuptiPCSamplingGetConfigurationAttribute, "PC sampling")              \
  X(cuptiPCSamplingGetNumStallReasons, "PC sampling")                     \
  X(cuptiPCSamplingGetStallReasons, "PC sampling")                        \
  X(cuptiGetCubinCrc, "PC sampling (cubins)")                             \
  X(cuptiGetDeviceId, "PC sampling (gpu_config of devices other than 0)") \
  X(cuptiActivitySetAttribute, "kernel timestamps kept in host memory, not GPU memory")

#define PARCAGPU_CUDA_FUNCTIONS(X) \
  X(cuDeviceGetCount)              \
  X(cuDeviceGet)                   \
  X(cuDeviceGetAttribute)          \
  X(cuGraphNodeGetType)            \
  X(cuEventCreate)                 \
  X(cuEventRecord)                 \
  X(cuEventQuery)                  \
  X(cuEventDestroy_v2)

// A missing optional entry point: does nothing, reports CUPTI_ERROR_NOT_SUPPORTED.
template <typename Fn>
struct MissingEntryPoint;
template <typename... Args>
struct MissingEntryPoint<CUptiResult (*)(Args...)> {
  static CUptiResult CUPTIAPI call(Args...) { return CUPTI_ERROR_NOT_SUPPORTED; }
};

struct CuptiApi {
#define PARCAGPU_DECLARE(fn, ...) decltype(&::fn) fn = nullptr;
  PARCAGPU_CUPTI_REQUIRED(PARCAGPU_DECLARE)
  PARCAGPU_CUPTI_OPTIONAL(PARCAGPU_DECLARE)
  void *handle = nullptr;
  std::string path;                   // what was loaded, for the log
  std::string found_in;               // the place of the search it came from
  uint32_t api_version = 0;           // cuptiGetVersion
  int major = 0;                      // the CUDA major of that version
  std::vector<const char *> missing;  // optional entry points replaced by stubs

  // Whether `fn` (a member of this table) is the library's own, not a stub.
  template <typename Fn>
  bool available(Fn fn) const {
    return fn != nullptr && fn != &MissingEntryPoint<Fn>::call;
  }
};

// What registering a graph's kernels with PC sampling calls (PcEpisodes::register_graph):
// optional, null where libcuda lacks one (graphs are then not registered).
#define PARCAGPU_CUDA_GRAPH_FUNCTIONS(X) \
  X(cuStreamCreate)                      \
  X(cuStreamSynchronize)                 \
  X(cuGraphInstantiateWithFlags)         \
  X(cuGraphUpload)                       \
  X(cuGraphExecDestroy)                  \
  X(cuThreadExchangeStreamCaptureMode)

struct CudaApi {
  PARCAGPU_CUDA_FUNCTIONS(PARCAGPU_DECLARE)
  PARCAGPU_CUDA_GRAPH_FUNCTIONS(PARCAGPU_DECLARE)
#undef PARCAGPU_DECLARE
  void *handle = nullptr;
  // Every entry of PARCAGPU_CUDA_GRAPH_FUNCTIONS resolved.
  bool can_register_graphs() const {
#define PARCAGPU_RESOLVED(fn) &&fn != nullptr
    return true PARCAGPU_CUDA_GRAPH_FUNCTIONS(PARCAGPU_RESOLVED);
#undef PARCAGPU_RESOLVED
  }
};

// Resolves the table through `lookup` (dlsym on a libcupti; a fake one in unit tests). False,
// with the names in *error, if a required entry point is missing; optional ones become stubs.
bool resolve_cupti(const std::function<void *(const char *name)> &lookup, CuptiApi *api,
                   std::string *error);

// Finds and loads libcupti (cupti_search.h says where it looks) and resolves the table. On
// failure returns false with a one-line reason in *error and leaves *api empty. A libcupti that
// lacks optional entry points, or whose CUDA major differs from the application's because no
// matching one exists, is used and reported once (error probe and a line).
bool load_cupti(const std::string &explicit_path, CuptiApi *api, std::string *error);

// libcuda is needed only for device facts (gpu_config); failure is not fatal.
bool load_cuda(CudaApi *api, std::string *error);

// "CUPTI_ERROR_..." text, also when the table is incomplete.
const char *cupti_result_string(const CuptiApi &api, CUptiResult r);

}  // namespace parcagpu
