// What parcagpu-trace needs from the kernel, said precisely when it is refused: the
// capabilities this process has (capget) are compared with what the failing step needs.
//
//   load the BPF programs and maps        CAP_BPF + CAP_PERFMON (or CAP_SYS_ADMIN)
//   mapping records (perf dummy events)   CAP_PERFMON (CPU-wide events, perf_event_paranoid >= 1)
//   attach a uprobe (perf_event_open)     CAP_SYS_ADMIN on kernels with commit ba677dbe77af
//                                         ("perf: Revert to requiring CAP_SYS_ADMIN for uprobes",
//                                         Linux 6.16 and stable updates since July 2025);
//                                         CAP_PERFMON before that
//   other users' processes: /proc/PID/maps and /proc/PID/root   CAP_SYS_PTRACE
#pragma once

#include <string>

namespace parcagpu::trace {

enum class Step { LoadBpf, AttachUprobe, MappingRecords };

// The capabilities of this process, e.g. "CAP_BPF, CAP_PERFMON" ("none" when empty; only the
// ones that matter here are named).
std::string effective_capabilities();

// One sentence on why `step` failed with `err` (EPERM / EACCES) and what to grant; "" when the
// error is not about privileges.
std::string privilege_hint(Step step, int err);

}  // namespace parcagpu::trace
