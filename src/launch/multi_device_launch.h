// How many GPUs one launch runs on: cu/cudaLaunchCooperativeKernelMultiDevice launches a kernel
// on each of its parameters' numDevices devices, all under the launch's one correlation ID (the
// tracker then expects that many kernels and gives the launch IDs of its own for the agent,
// correlation_tracker.h); every other launch runs on one.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "parcagpu/cbid_table.h"

namespace parcagpu {

// More devices than any machine has: a numDevices past it is taken as this many.
inline constexpr uint32_t kMaxLaunchDevices = 64;

// Both launches' parameters start {launch parameter list, unsigned int numDevices, flags}
// (cuLaunchCooperativeKernelMultiDevice_params; the runtime's, removed from CUDA 13's headers,
// has the same layout).
inline uint32_t launch_devices(CbDomain domain, uint32_t cbid, const void *params) {
  const bool multi =
      (domain == CbDomain::Driver &&
       cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice) ||
      (domain == CbDomain::Runtime &&
       cbid == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000);
  if (__builtin_expect(!multi, 1) || !params) return 1;
  unsigned int n = 0;
  std::memcpy(&n, static_cast<const char *>(params) + sizeof(void *), sizeof n);
  return n < 1 ? 1 : n > kMaxLaunchDevices ? kMaxLaunchDevices : n;
}

static_assert(offsetof(cuLaunchCooperativeKernelMultiDevice_params, numDevices) == sizeof(void *),
              "numDevices follows the list pointer");

}  // namespace parcagpu
