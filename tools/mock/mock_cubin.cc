// The cubin nvcc built from tools/mock/pc_kernels.cu (-arch=sm_90 -lineinfo), embedded in the mock
// driver: what its MODULE_LOADED callback hands to CUPTI, as a real driver hands it the module's
// cubin. MOCK_CUBIN_PATH is set by tools/mock/CMakeLists.txt.
#include "mock_cubin.h"

asm(".pushsection .rodata.mock_cubin, \"a\"\n"
    ".balign 64\n"
    "mock_cubin_begin:\n"
    ".incbin \"" MOCK_CUBIN_PATH "\"\n"
    "mock_cubin_end:\n"
    ".popsection\n");

extern "C" const char mock_cubin_begin[];
extern "C" const char mock_cubin_end[];

namespace mockcuda {

const char *embedded_cubin(size_t *size) {
  *size = static_cast<size_t>(mock_cubin_end - mock_cubin_begin);
  return mock_cubin_begin;
}

}  // namespace mockcuda
