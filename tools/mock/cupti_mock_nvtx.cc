// The mock CUPTI as NVTX's injection, as libcupti is when NVTX_INJECTION64_PATH names it (or a
// library that forwards to it, as libparcagpu does): NVTX v3's loader calls
// InitializeInjectionNvtx2(getExportTable); the injection asks for the callbacks export table and
// writes its own functions into the slots of NVTX's core module (nvtx3/nvtxDetail/nvtxTypes.h),
// and from then on every such NVTX call of the application lands here and is dispatched to the
// subscriber as CUPTI_CB_DOMAIN_NVTX with CUPTI's parameter structs (generated_nvtx_meta.h), if
// it enabled that cbid. Slots left alone stay NVTX's no-ops.
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCuda.h>
#include <nvtx3/nvToolsExtCudaRt.h>
#include <nvtx3/nvToolsExtSync.h>
// After NVTX's types: CUPTI's structs of each NVTX call's parameters.
#include <generated_nvtx_meta.h>

#include <atomic>
#include <cstdio>

#include "cupti_mock_internal.h"

namespace mockcupti {
namespace {

std::atomic<uint64_t> g_next_range_id{1};
thread_local int t_depth = 0;  // nvtxRangePush's return: the nesting level

void callback(CUpti_nvtx_api_trace_cbid cbid, const char *name, const void *params,
              const void *ret) {
  CUpti_NvtxData d{name, params, ret};
  nvtx_event(cbid, &d);
}

void mark_a(const char *message) {
  nvtxMarkA_params p{message};
  callback(CUPTI_CBID_NVTX_nvtxMarkA, "nvtxMarkA", &p, nullptr);
}
void mark_ex(const nvtxEventAttributes_t *a) {
  nvtxMarkEx_params p{a};
  callback(CUPTI_CBID_NVTX_nvtxMarkEx, "nvtxMarkEx", &p, nullptr);
}
nvtxRangeId_t range_start_a(const char *message) {
  nvtxRangeStartA_params p{message};
  const nvtxRangeId_t id = g_next_range_id.fetch_add(1);
  callback(CUPTI_CBID_NVTX_nvtxRangeStartA, "nvtxRangeStartA", &p, &id);
  return id;
}
nvtxRangeId_t range_start_ex(const nvtxEventAttributes_t *a) {
  nvtxRangeStartEx_params p{a};
  const nvtxRangeId_t id = g_next_range_id.fetch_add(1);
  callback(CUPTI_CBID_NVTX_nvtxRangeStartEx, "nvtxRangeStartEx", &p, &id);
  return id;
}
void range_end(nvtxRangeId_t id) {
  nvtxRangeEnd_params p{id};
  callback(CUPTI_CBID_NVTX_nvtxRangeEnd, "nvtxRangeEnd", &p, nullptr);
}
int range_push_a(const char *message) {
  nvtxRangePushA_params p{message};
  const int level = t_depth++;
  callback(CUPTI_CBID_NVTX_nvtxRangePushA, "nvtxRangePushA", &p, &level);
  return level;
}
int range_push_ex(const nvtxEventAttributes_t *a) {
  nvtxRangePushEx_params p{a};
  const int level = t_depth++;
  callback(CUPTI_CBID_NVTX_nvtxRangePushEx, "nvtxRangePushEx", &p, &level);
  return level;
}
int range_pop() {
  nvtxRangePop_params p{};
  const int level = t_depth > 0 ? --t_depth : -1;
  callback(CUPTI_CBID_NVTX_nvtxRangePop, "nvtxRangePop", &p, &level);
  return level;
}
void name_os_thread_a(uint32_t thread_id, const char *name) {
  nvtxNameOsThreadA_params p{thread_id, name};
  callback(CUPTI_CBID_NVTX_nvtxNameOsThreadA, "nvtxNameOsThreadA", &p, nullptr);
}

template <typename F>
NvtxFunctionPointer fn(F f) {
  return reinterpret_cast<NvtxFunctionPointer>(f);
}

// Writes the mock's functions into NVTX's core module slots. False if NVTX offers no such table.
bool install(NvtxGetExportTableFunc_t get_export_table) {
  const auto *cb = static_cast<const NvtxExportTableCallbacks *>(
      get_export_table ? get_export_table(NVTX_ETID_CALLBACKS) : nullptr);
  if (!cb || cb->struct_size < sizeof(NvtxExportTableCallbacks) || !cb->GetModuleFunctionTable)
    return false;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) || !table ||
      size < NVTX_CBID_CORE_NameOsThreadA)  // size: the last slot's index
    return false;
  const struct {
    int slot;
    NvtxFunctionPointer f;
  } slots[] = {
      {NVTX_CBID_CORE_MarkA, fn(&mark_a)},
      {NVTX_CBID_CORE_MarkEx, fn(&mark_ex)},
      {NVTX_CBID_CORE_RangeStartA, fn(&range_start_a)},
      {NVTX_CBID_CORE_RangeStartEx, fn(&range_start_ex)},
      {NVTX_CBID_CORE_RangeEnd, fn(&range_end)},
      {NVTX_CBID_CORE_RangePushA, fn(&range_push_a)},
      {NVTX_CBID_CORE_RangePushEx, fn(&range_push_ex)},
      {NVTX_CBID_CORE_RangePop, fn(&range_pop)},
      {NVTX_CBID_CORE_NameOsThreadA, fn(&name_os_thread_a)},
  };
  for (const auto &s : slots)
    if (table[s.slot]) *table[s.slot] = s.f;
  return true;
}

}  // namespace
}  // namespace mockcupti

// libcupti's NVTX injection entry point. Nonzero: the injection took over.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  if (mockcupti::install(get_export_table)) return 1;
  std::fprintf(stderr, "mock-cupti: InitializeInjectionNvtx2: NVTX offered no core table\n");
  return 0;
}
