// Internals of the mock CUPTI shared by cupti_mock*.cc: entry points (for fault injection), the
// statistics, and the activity side's interface to the callback side.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#pragma GCC visibility push(default)
#include "mock_cupti_control.h"  // MOCK_CUPTI_STATS
#pragma GCC visibility pop
#include "driver_cupti_bridge.h"
#include "per_thread_counters.h"

namespace mockcupti {

// Every entry point the library may call, by name, for MOCK_CUPTI_FAIL.
// clang-format off
#define MOCK_CUPTI_ENTRY_POINTS(X)  \
  X(cuptiSubscribe)                 \
  X(cuptiUnsubscribe)               \
  X(cuptiEnableCallback)            \
  X(cuptiEnableDomain)              \
  X(cuptiEnableAllDomains)          \
  X(cuptiGetCallbackState)          \
  X(cuptiActivityEnable)            \
  X(cuptiActivityDisable)           \
  X(cuptiActivityEnableContext)     \
  X(cuptiActivityDisableContext)    \
  X(cuptiActivityRegisterCallbacks) \
  X(cuptiActivityFlushAll)          \
  X(cuptiActivityFlushPeriod)       \
  X(cuptiActivityGetNextRecord)     \
  X(cuptiActivityGetNumDroppedRecords) \
  X(cuptiActivitySetAttribute)      \
  X(cuptiGetResultString)           \
  X(cuptiGetVersion)                \
  X(cuptiGetLastError)              \
  X(cuptiGetTimestamp)              \
  X(cuptiFinalize)                  \
  X(cuptiGetGraphId)                \
  X(cuptiGetGraphNodeId)            \
  X(cuptiGetGraphExecId)            \
  X(cuptiGetContextId)              \
  X(cuptiGetStreamIdEx)             \
  X(cuptiGetDeviceId)               \
  X(cuptiGetCubinCrc)               \
  X(cuptiPCSamplingEnable)          \
  X(cuptiPCSamplingDisable)         \
  X(cuptiPCSamplingStart)           \
  X(cuptiPCSamplingStop)            \
  X(cuptiPCSamplingGetData)         \
  X(cuptiPCSamplingSetConfigurationAttribute) \
  X(cuptiPCSamplingGetConfigurationAttribute) \
  X(cuptiPCSamplingGetNumStallReasons) \
  X(cuptiPCSamplingGetStallReasons)
// clang-format on

enum class Entry : uint32_t {
#define MOCK_CUPTI_ENUM(name) name,
  MOCK_CUPTI_ENTRY_POINTS(MOCK_CUPTI_ENUM)
#undef MOCK_CUPTI_ENUM
      kCount
};

// Personality (cupti_mock_personality.cc): which CUPTI the mock presents. Read once, at load,
// before anything else; it also hides the entry points MOCK_CUPTI_HIDE names.
void load_personality();
int build_soname_major();       // 12 or 13: the SONAME this build of the library carries
int personality();              // 12 or 13
uint32_t api_version();         // what cuptiGetVersion reports
size_t kernel_record_size();    // CUpti_ActivityKernel9 (12) or CUpti_ActivityKernel10 (13)
uint32_t runtime_cbid_limit();  // runtime callback ids at or above it are unknown

// Reads MOCK_CUPTI_FAIL and MOCK_CUPTI_REFUSE (once, at load).
void load_fault_injection();
// The error MOCK_CUPTI_FAIL asks `entry` to return, or CUPTI_SUCCESS.
CUptiResult injected_failure(Entry entry);
// Whether MOCK_CUPTI_REFUSE turns enabling (domain, cbid) into a silent no-op.
bool enable_refused(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

// Remembers a failed result for cuptiGetLastError (per thread) and returns it.
CUptiResult error(CUptiResult result);
// cuptiGetLastError: the last failure on this thread, reset to CUPTI_SUCCESS.
CUptiResult take_last_error();

const char *result_name(CUptiResult result);  // nullptr if unknown
// "OUT_OF_MEMORY" / "CUPTI_ERROR_OUT_OF_MEMORY" / "8" -> the result; false if none.
bool parse_result(const std::string &text, CUptiResult *result);

// Callback domains: names and sizes (cbids per domain).
const char *domain_name(uint32_t domain);
bool parse_domain(const std::string &text, CUpti_CallbackDomain *domain);
uint32_t domain_size(uint32_t domain);  // 0 for an invalid domain

// The counters of MockCuptiStats, named as its fields (stat::records_written).
namespace stat {
enum Stat : size_t {
#define MOCK_CUPTI_STAT_ENUM(name) name,
  MOCK_CUPTI_STATS(MOCK_CUPTI_STAT_ENUM)
#undef MOCK_CUPTI_STAT_ENUM
      kCount
};
}  // namespace stat
struct StatTag {};
using Stats = mockstats::PerThreadCounters<StatTag, stat::kCount>;
static_assert(sizeof(MockCuptiStats) == stat::kCount * sizeof(uint64_t));

// Activity side (cupti_mock_activity.cc), used by the hooks and by cuptiFinalize.
uint32_t kernel_activity_enabled(uint32_t context_id);  // record kind collected now, 0 = none
void kernel_ran(const mockbridge::KernelRun *run);
// Copies and fills (cupti_mock_activity.cc): whether `kind` is collected now for the context,
// and the record of one that ran (if it was).
bool activity_kind_enabled(uint32_t context_id, uint32_t kind);
void memory_ran(const mockbridge::MemoryRun *run);
void finalize_activity();
// Kinds enabled now (globally or for a context) / ever, as JSON arrays of names.
std::vector<std::string> activity_kinds(bool ever);
// Where kernel activity's buffers for the GPU's timestamps went when kernel activity was first
// enabled: "device" (CUPTI's default since CUDA 12.0 Update 1: GPU memory the application
// misses), "host" (CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED set before), "none" yet.
const char *activity_buffers_placed();

// PC sampling side (cupti_mock_pcsampling.cc): the module a context loaded, kernels run, report.
void pc_module_loaded(uint32_t context_id, const void *cubin, size_t size);
void pc_module_unloaded(uint32_t context_id);
void pc_kernel_ran(const mockbridge::KernelRun *run);
void pc_graph_uploaded(uint32_t context_id, uint32_t graph_id, const char *const *kernels,
                       size_t n);
void pc_graph_instantiated(uint32_t context_id, uint32_t graph_id);
void pc_graph_destroyed(uint32_t context_id, uint32_t graph_id);
nlohmann::ordered_json pc_report();
// PC sampling is enabled on some context. Real CUPTI (13.0, H100) then refuses to enable kernel
// activity: cuptiActivityEnable(CONCURRENT_KERNEL) returns CUPTI_ERROR_NOT_COMPATIBLE (kernel
// activity enabled before cuptiPCSamplingEnable stays on). docs/cupti-facts.md.
bool pc_sampling_enabled_anywhere();

// Callback side (cupti_mock.cc), for the report.
std::string report_json();
// An NVTX call (cupti_mock_nvtx.cc) to the subscriber, if it enabled the cbid (cupti_mock.cc).
void nvtx_event(CUpti_CallbackId cbid, const void *data);

}  // namespace mockcupti

// Entry points start with this: MOCK_CUPTI_FAIL makes the named ones return the injected error
// and do nothing else.
#define MOCK_CUPTI_FAULT_POINT(entry)                                                           \
  do {                                                                                          \
    if (const CUptiResult injected = injected_failure(Entry::entry); injected) return injected; \
  } while (0)
