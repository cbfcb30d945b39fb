// One process at a time samples PCs on a GPU. PC sampling enabled in two processes on one GPU
// at once makes cuptiPCSamplingStart (or Disable) fail with CUPTI_ERROR_UNKNOWN in one of them,
// and from then on CUPTI itself crashes that process at its next activity call
// (cuptiActivityEnable, cuptiActivityFlushAll; H100, docs/pc-sampling.md P27), whatever the
// library does after the failure. So before enabling PC sampling on a GPU the library takes that
// GPU's lock, a file lock (flock) on /dev/shm/parcagpu-pc-<GPU>.lock, and gives it back after
// Disable; a process that finds it taken puts its episode off. The kernel drops a dead process's
// lock. Processes that do not share /dev/shm (other containers on the GPU) are not coordinated.
// A lock that cannot be had at all (PARCAGPU_PC_LOCK_DIR missing or not writable) keeps PC
// sampling off for that GPU: sampling without it is what crashes processes.
#pragma once

#include <map>
#include <string>

namespace parcagpu {

class PcDeviceLocks {
 public:
  enum class Result {
    kAcquired,     // this process holds it now
    kBusy,         // another process holds it
    kUnavailable,  // the lock file cannot be opened or locked (a missing or read-only
                   // directory, a file system without flock): that GPU must not be sampled
  };
  explicit PcDeviceLocks(std::string dir = "/dev/shm") : dir_(std::move(dir)) {}
  ~PcDeviceLocks();
  PcDeviceLocks(const PcDeviceLocks &) = delete;
  PcDeviceLocks &operator=(const PcDeviceLocks &) = delete;

  // Never waits. `gpu` names the physical GPU the same way in every process (its PCI address;
  // "any" where unknown, which makes one lock for all GPUs).
  Result try_acquire(const std::string &gpu);
  void release(const std::string &gpu);
  std::string path(const std::string &gpu) const;
  // Why the last kUnavailable: "open", "flock", and its errno.
  const char *failed_call() const { return failed_call_; }
  int failed_errno() const { return failed_errno_; }

 private:
  std::string dir_;
  std::map<std::string, int> fds_;  // an open lock file per GPU, held or not
  const char *failed_call_ = "";
  int failed_errno_ = 0;
};

}  // namespace parcagpu
