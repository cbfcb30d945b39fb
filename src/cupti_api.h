// libcupti and libcuda, loaded at run time (volk style): one flat table of function pointers,
// filled by one init call. Nothing links libcupti or libcuda at build time, so one binary serves
// CUDA 12 and 13 and a machine without CUDA just leaves the library inert.
#pragma once

#include <cuda.h>
#include <cupti.h>
#include <cupti_pcsampling.h>

#include <string>

namespace parcagpu {

#define PARCAGPU_CUPTI_FUNCTIONS(X)    \
  X(cuptiGetVersion)                   \
  X(cuptiGetResultString)              \
  X(cuptiSubscribe)                    \
  X(cuptiUnsubscribe)                  \
  X(cuptiEnableCallback)               \
  X(cuptiActivityEnable)               \
  X(cuptiActivityDisable)              \
  X(cuptiActivityRegisterCallbacks)    \
  X(cuptiActivityFlushAll)             \
  X(cuptiActivityGetNextRecord)        \
  X(cuptiActivityGetNumDroppedRecords) \
  X(cuptiGetGraphId)                   \
  X(cuptiGetGraphNodeId)               \
  X(cuptiGetGraphExecId)               \
  X(cuptiGetTimestamp)

// PC sampling (src/pc_sampling.h). Optional: a libcupti without them leaves these null, and
// PC sampling off with one error, while everything else works.
#define PARCAGPU_CUPTI_PC_FUNCTIONS(X)            \
  X(cuptiPCSamplingEnable)                        \
  X(cuptiPCSamplingDisable)                       \
  X(cuptiPCSamplingStart)                         \
  X(cuptiPCSamplingStop)                          \
  X(cuptiPCSamplingGetData)                       \
  X(cuptiPCSamplingSetConfigurationAttribute)     \
  X(cuptiPCSamplingGetConfigurationAttribute)     \
  X(cuptiPCSamplingGetNumStallReasons)            \
  X(cuptiPCSamplingGetStallReasons)               \
  X(cuptiGetCubinCrc)                             \
  X(cuptiGetDeviceId)

#define PARCAGPU_CUDA_FUNCTIONS(X) \
  X(cuDeviceGetCount)              \
  X(cuDeviceGet)                   \
  X(cuDeviceGetAttribute)          \
  X(cuGraphNodeGetType)

struct CuptiApi {
#define PARCAGPU_DECLARE(fn) decltype(&::fn) fn = nullptr;
  PARCAGPU_CUPTI_FUNCTIONS(PARCAGPU_DECLARE)
  PARCAGPU_CUPTI_PC_FUNCTIONS(PARCAGPU_DECLARE)
  void *handle = nullptr;
  std::string path;  // what was loaded, for the log
};

struct CudaApi {
  PARCAGPU_CUDA_FUNCTIONS(PARCAGPU_DECLARE)
#undef PARCAGPU_DECLARE
  void *handle = nullptr;
};

// Reuses a libcupti already loaded in the process, else loads `explicit_path` if given, else
// libcupti.so, libcupti.so.13, libcupti.so.12 in that order. Resolves every entry point.
// On failure returns false with a one-line reason in *error and leaves *api empty.
bool load_cupti(const std::string &explicit_path, CuptiApi *api, std::string *error);

// libcuda is needed only for device facts (gpu_config); failure is not fatal.
bool load_cuda(CudaApi *api, std::string *error);

// "CUPTI_ERROR_..." text, also when the table is incomplete.
const char *cupti_result_string(const CuptiApi &api, CUptiResult r);

}  // namespace parcagpu
