// The processes the tool heard from, and what labels their GPU time so that several processes of
// one job (the ranks of a distributed run) can be told apart in one view: pid, command, and the
// rank the launcher gave each (RANK / LOCAL_RANK in its environment, as torchrun, torch.distributed,
// DeepSpeed and Horovod's launchers set them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace parcagpu::trace {

struct ProcessInfo {
  uint32_t pid = 0;
  std::string comm;                 // /proc/PID/comm; "" when it could not be read
  std::optional<int64_t> rank;      // RANK=N in its environment
  std::optional<int64_t> local_rank;  // LOCAL_RANK=N
};

// The value of `name` in a NUL-separated environment block (/proc/PID/environ) when it is a
// decimal integer; nothing when absent or not a number.
std::optional<int64_t> environ_integer(std::string_view environ, std::string_view name);

// comm, RANK and LOCAL_RANK of a live process, read from /proc once. A process that cannot be
// read (it exited before its first event was read, or another user's without CAP_SYS_PTRACE)
// gets an empty comm and no rank: its GPU time is still counted under its pid, unlabelled.
// /proc/PID/environ is the environment the process was started (exec'd) with: a rank set later
// by the program itself with setenv is not seen (launchers set it before exec).
ProcessInfo read_process_info(uint32_t pid);

// Processes by a dense id (the GPU profile's key): the process now running as a pid, read when
// first seen. A pid forgotten (its process gone) and seen again is another process with a new id.
class ProcessTable {
 public:
  static constexpr uint32_t kUnknown = UINT32_MAX;  // no process (counted without one)

  // The id of the process now running as `pid`; reads its info on first sight (`read`).
  uint32_t id(uint32_t pid);
  void forget(uint32_t pid) { current_.erase(pid); }
  const ProcessInfo &info(uint32_t id) const { return infos_[id]; }
  size_t size() const { return infos_.size(); }

  // How a process is read: /proc (read_process_info) unless replaced (unit tests give infos).
  ProcessInfo (*read)(uint32_t pid) = read_process_info;

 private:
  std::unordered_map<uint32_t, uint32_t> current_;
  std::vector<ProcessInfo> infos_;
};

}  // namespace parcagpu::trace
