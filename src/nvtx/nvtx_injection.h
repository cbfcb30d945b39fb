// The library as NVTX's injection (NVTX_INJECTION64_PATH): NVTX v3's loader dlopens the file
// named there and calls its InitializeInjectionNvtx2(getExportTable); a nonzero return means the
// injection took over, 0 leaves every NVTX call a no-op (nvtx3/nvtxDetail/nvtxInit.h). CUPTI's
// NVTX callbacks come from libcupti's own injection, so the library forwards the call to the
// libcupti its search finds (cupti_locator.h) -- the one the profiler then subscribes with, found
// again "already in the process". So NVTX_INJECTION64_PATH may name the same file as
// CUDA_INJECTION64_PATH. NVTX may initialise before cuInit (before InitializeInjection): the
// forwarding needs no profiler.
#pragma once

#include <cstdint>

namespace parcagpu {

// NVTX's NvtxGetExportTableFunc_t.
using NvtxGetExportTable = const void *(*)(uint32_t export_table_id);

class NvtxInjection {
 public:
  // libcupti's InitializeInjectionNvtx2(get_export_table)'s result; 0 if libcupti or its entry
  // point cannot be had (said once, and the error probe). Never throws. Each copy of NVTX in the
  // process (every library built with its headers) calls it once.
  static int forward(NvtxGetExportTable get_export_table) noexcept;

 private:
  using Entry = int (*)(NvtxGetExportTable);
  static Entry find_entry();  // loads libcupti once; null if it cannot be had (said)
};

}  // namespace parcagpu
