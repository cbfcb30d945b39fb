// Fault injection of the mock CUPTI, read from the environment once at load:
//   MOCK_CUPTI_FAIL=cuptiSubscribe,cuptiActivityEnable:OUT_OF_MEMORY,cuptiGetVersion:999
//     those entry points return an error (default CUPTI_ERROR_UNKNOWN; :NAME means
//     CUPTI_ERROR_NAME, the full name or a number work too) and do nothing else; with *N
//     (cuptiActivityDisable*3, cuptiActivityFlushAll:NOT_READY*2) only the first N calls fail.
//   MOCK_CUPTI_REFUSE=DRIVER:514,RUNTIME:311,RESOURCE:13
//     cuptiEnableCallback(1, ...) of those pairs returns CUPTI_SUCCESS and enables nothing, as if
//     the library had never asked: the tests use it to prove their guards go red.
// An entry that cannot be understood is reported on stderr and ignored.
#include <cupti.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cupti_mock_internal.h"
#include "fault_list.h"

namespace mockcupti {
namespace {

constexpr const char *kEntryNames[] = {
#define MOCK_CUPTI_NAME(name) #name,
    MOCK_CUPTI_ENTRY_POINTS(MOCK_CUPTI_NAME)
#undef MOCK_CUPTI_NAME
};
static_assert(sizeof(kEntryNames) / sizeof(kEntryNames[0]) == static_cast<size_t>(Entry::kCount));

// Armed once by the constructor, before any other thread can call in.
mockfault::Fault g_fail[static_cast<size_t>(Entry::kCount)];
std::vector<uint64_t> *g_refused;  // bitset per domain * 1024 cbids, null when nothing is refused

constexpr uint32_t kMaxCbid = 1024;
thread_local CUptiResult t_last_error = CUPTI_SUCCESS;

struct ResultName {
  CUptiResult value;
  const char *name;
};
// clang-format off
constexpr ResultName kResultNames[] = {
#define MOCK_CUPTI_RESULT(name) {name, #name},
    MOCK_CUPTI_RESULT(CUPTI_SUCCESS)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_PARAMETER)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_DEVICE)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_CONTEXT)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_EVENT_ID)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_EVENT_NAME)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_OPERATION)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_OUT_OF_MEMORY)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_HARDWARE)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_API_NOT_IMPLEMENTED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_MAX_LIMIT_REACHED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_NOT_READY)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_NOT_COMPATIBLE)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_NOT_INITIALIZED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_METRIC_ID)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_METRIC_NAME)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_QUEUE_EMPTY)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_HANDLE)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_STREAM)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_KIND)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_EVENT_VALUE)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_DISABLED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_MODULE)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_METRIC_VALUE)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_HARDWARE_BUSY)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_NOT_SUPPORTED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_NON_P2P_DEVICES)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_INVALID_CHIP_NAME)
    MOCK_CUPTI_RESULT(CUPTI_ERROR_UNKNOWN)
#undef MOCK_CUPTI_RESULT
};
// clang-format on

struct DomainInfo {
  CUpti_CallbackDomain domain;
  const char *name;
  uint32_t size;
};
constexpr DomainInfo kDomains[] = {
    {CUPTI_CB_DOMAIN_DRIVER_API, "DRIVER", CUPTI_DRIVER_TRACE_CBID_SIZE},
    {CUPTI_CB_DOMAIN_RUNTIME_API, "RUNTIME", CUPTI_RUNTIME_TRACE_CBID_SIZE},
    {CUPTI_CB_DOMAIN_RESOURCE, "RESOURCE", CUPTI_CBID_RESOURCE_SIZE},
    {CUPTI_CB_DOMAIN_SYNCHRONIZE, "SYNCHRONIZE", CUPTI_CBID_SYNCHRONIZE_SIZE},
    {CUPTI_CB_DOMAIN_NVTX, "NVTX", CUPTI_CBID_NVTX_SIZE},
    {CUPTI_CB_DOMAIN_STATE, "STATE", CUPTI_CBID_STATE_SIZE},
};
static_assert(CUPTI_DRIVER_TRACE_CBID_SIZE <= kMaxCbid &&
              CUPTI_RUNTIME_TRACE_CBID_SIZE <= kMaxCbid);

void warn(const std::string &message) {
  std::fprintf(stderr, "mock-cupti: warning: %s\n", message.c_str());
}

using mockfault::parse_uint;
using mockfault::split;

void load_fail(const char *list) {
  mockfault::arm_faults(list, "MOCK_CUPTI_FAIL",
                        "CUptiResult name (OUT_OF_MEMORY, CUPTI_ERROR_UNKNOWN, ...)",
                        CUPTI_ERROR_UNKNOWN, CUPTI_SUCCESS, "CUPTI_SUCCESS", kEntryNames, g_fail,
                        parse_result, warn);
}

void load_refuse(const char *list) {
  for (const std::string &item : split(list)) {
    const size_t colon = item.find(':');
    CUpti_CallbackDomain domain;
    unsigned long cbid = 0;
    if (colon == std::string::npos || !parse_domain(item.substr(0, colon), &domain) ||
        (domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API &&
         domain != CUPTI_CB_DOMAIN_RESOURCE) ||
        !parse_uint(item.substr(colon + 1), &cbid) || cbid >= domain_size(domain)) {
      warn("MOCK_CUPTI_REFUSE entry '" + item +
           "' is not DOMAIN:CBID with DOMAIN one of DRIVER, RUNTIME, RESOURCE and CBID a number "
           "below that domain's size; entry ignored");
      continue;
    }
    if (!g_refused) g_refused = new std::vector<uint64_t>(8 * kMaxCbid / 64, 0);
    const size_t bit = domain * kMaxCbid + cbid;
    (*g_refused)[bit / 64] |= 1ull << (bit % 64);
  }
}

}  // namespace

void load_fault_injection() {
  if (const char *v = std::getenv("MOCK_CUPTI_FAIL"); v && *v) load_fail(v);
  if (const char *v = std::getenv("MOCK_CUPTI_REFUSE"); v && *v) load_refuse(v);
}

CUptiResult injected_failure(Entry entry) {
  const auto r = static_cast<CUptiResult>(g_fail[static_cast<size_t>(entry)].take());
  if (r != CUPTI_SUCCESS) {
    Stats::add(stat::injected_failures);
    t_last_error = r;
  }
  return r;
}

bool enable_refused(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (!g_refused || domain >= 8 || cbid >= kMaxCbid) return false;
  const size_t bit = domain * kMaxCbid + cbid;
  return ((*g_refused)[bit / 64] >> (bit % 64)) & 1;
}

CUptiResult error(CUptiResult result) {
  if (result != CUPTI_SUCCESS) t_last_error = result;
  return result;
}

CUptiResult take_last_error() {
  const CUptiResult r = t_last_error;
  t_last_error = CUPTI_SUCCESS;
  return r;
}

const char *result_name(CUptiResult result) {
  for (const ResultName &r : kResultNames)
    if (r.value == result) return r.name;
  return nullptr;
}

bool parse_result(const std::string &text, CUptiResult *result) {
  return mockfault::parse_named_result(text, kResultNames, "CUPTI_ERROR_", result);
}

const char *domain_name(uint32_t domain) {
  for (const DomainInfo &d : kDomains)
    if (d.domain == domain) return d.name;
  return "INVALID";
}

bool parse_domain(const std::string &text, CUpti_CallbackDomain *domain) {
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const DomainInfo &d : kDomains)
    if (upper == d.name) {
      *domain = d.domain;
      return true;
    }
  return false;
}

uint32_t domain_size(uint32_t domain) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return runtime_cbid_limit();  // by personality
  for (const DomainInfo &d : kDomains)
    if (d.domain == domain) return d.size;
  return 0;
}

}  // namespace mockcupti
