// The real cubin of tools/mock/pc_kernels.cu, embedded in the mock driver (mock_cubin.cc).
#pragma once

#include <cstddef>

namespace mockcuda {

const char *embedded_cubin(size_t *size);

}  // namespace mockcuda
