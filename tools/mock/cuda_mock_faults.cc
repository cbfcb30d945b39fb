// Fault injection of the mock driver, read from the environment once at load:
//   MOCK_CUDA_FAIL=cuGraphNodeGetType,cuDeviceGetAttribute:INVALID_VALUE*3
//     those entry points return an error (default CUDA_ERROR_UNKNOWN; :NAME means
//     CUDA_ERROR_NAME, the full name or a number work too) and do nothing else; with *N only
//     the first N calls fail. The half of the fault matrix that MOCK_CUPTI_FAIL does not cover:
//     the library asks the driver for device facts (gpu_config) and graph node types.
// An entry that cannot be understood is reported on stderr and ignored.
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda_mock_internal.h"
#include "fault_list.h"

namespace mockcuda {
namespace {

constexpr const char *kEntryNames[] = {
#define MOCK_CUDA_NAME(name) #name,
    MOCK_CUDA_ENTRY_POINTS(MOCK_CUDA_NAME)
#undef MOCK_CUDA_NAME
};
static_assert(sizeof(kEntryNames) / sizeof(kEntryNames[0]) ==
              static_cast<size_t>(DriverEntry::kCount));

mockfault::Fault g_fail[static_cast<size_t>(DriverEntry::kCount)];

struct ResultName {
  CUresult value;
  const char *name;
};
constexpr ResultName kResults[] = {
#define MOCK_CU_ERROR(name, text) {name, #name},
#include "cuda_mock_errors.inc"
#undef MOCK_CU_ERROR
};

bool parse_result(const std::string &text, CUresult *result) {
  return mockfault::parse_named_result(text, kResults, "CUDA_ERROR_", result);
}

void warn(const std::string &message) {
  std::fprintf(stderr, "mock-cuda: warning: %s\n", message.c_str());
}

__attribute__((constructor)) void load_fault_injection() {
  const char *list = std::getenv("MOCK_CUDA_FAIL");
  if (!list || !*list) return;
  mockfault::arm_faults(
      list, "MOCK_CUDA_FAIL", "CUresult name (INVALID_VALUE, CUDA_ERROR_UNKNOWN, ...)",
      CUDA_ERROR_UNKNOWN, CUDA_SUCCESS, "CUDA_SUCCESS", kEntryNames, g_fail, parse_result, warn);
}

}  // namespace

CUresult injected_failure(DriverEntry entry) {
  const auto r = static_cast<CUresult>(g_fail[static_cast<size_t>(entry)].take());
  if (r != CUDA_SUCCESS) Counters::add(stat::cuda_injected_failures);
  return r;
}

}  // namespace mockcuda
