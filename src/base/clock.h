// The library's two clocks, for every subsystem that reads time (none of them needs another's
// header for it).
#pragma once

#include <time.h>

#include <cstdint>

namespace parcagpu {

inline uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The clock of the launch path (token buckets, tracker ages): CLOCK_MONOTONIC_COARSE is read
// from the vDSO without touching the clocksource, which on some VMs costs a system call
// (~1 us) per read; its few-ms resolution is plenty for rates of tens per second.
inline uint64_t coarse_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace parcagpu
