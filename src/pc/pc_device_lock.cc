#include "pc/pc_device_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>

namespace parcagpu {

PcDeviceLocks::~PcDeviceLocks() {
  for (auto &[gpu, fd] : fds_)
    if (fd >= 0) close(fd);  // drops the lock too
}

std::string PcDeviceLocks::path(const std::string &gpu) const {
  return dir_ + "/parcagpu-pc-" + gpu + ".lock";
}

PcDeviceLocks::Result PcDeviceLocks::try_acquire(const std::string &gpu) {
  auto it = fds_.find(gpu);
  if (it == fds_.end()) {
    // Read-only: flock needs no more, and a file another user created (0644 under the usual
    // umask) can still be opened. CLOEXEC: a program this one execs holds no lock of ours.
    const int fd = open(path(gpu).c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0666);
    it = fds_.emplace(gpu, fd).first;
  }
  if (it->second < 0) {
    failed_call_ = "open";
    failed_errno_ = errno;
    return Result::kUnavailable;
  }
  if (flock(it->second, LOCK_EX | LOCK_NB) == 0) return Result::kAcquired;
  if (errno == EWOULDBLOCK) return Result::kBusy;
  failed_call_ = "flock";
  failed_errno_ = errno;
  return Result::kUnavailable;
}

void PcDeviceLocks::release(const std::string &gpu) {
  auto it = fds_.find(gpu);
  if (it != fds_.end() && it->second >= 0) flock(it->second, LOCK_UN);
}

}  // namespace parcagpu
