// Compiled once per build of the mock libcupti: the CUDA major its SONAME carries, which is the
// personality it presents unless MOCK_CUPTI_PERSONALITY says otherwise.
#include "cupti_mock_internal.h"

int mockcupti::build_soname_major() { return MOCK_CUPTI_SONAME_MAJOR; }
