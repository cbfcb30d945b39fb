#include "privileges.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

namespace parcagpu::trace {
namespace {

bool has_cap(int cap) {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[cap / 32].effective >> (cap % 32)) & 1u;
}

struct Named {
  int cap;
  const char *name;
};
const Named kRelevant[] = {{CAP_BPF, "CAP_BPF"},
                           {CAP_PERFMON, "CAP_PERFMON"},
                           {CAP_SYS_ADMIN, "CAP_SYS_ADMIN"},
                           {CAP_SYS_PTRACE, "CAP_SYS_PTRACE"}};

std::string missing(std::initializer_list<int> caps) {
  std::string out;
  for (int c : caps)
    for (const Named &n : kRelevant)
      if (n.cap == c && !has_cap(c)) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

}  // namespace

std::string effective_capabilities() {
  std::string out;
  for (const Named &n : kRelevant)
    if (has_cap(n.cap)) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out.empty() ? "none of CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, CAP_SYS_PTRACE" : out;
}

std::string privilege_hint(Step step, int err) {
  if (err != EPERM && err != EACCES) return "";
  const std::string have = "this process has " + effective_capabilities();
  switch (step) {
    case Step::LoadBpf:
      if (has_cap(CAP_SYS_ADMIN) || (has_cap(CAP_BPF) && has_cap(CAP_PERFMON)))
        return "refused although " + have + " (a security module or locked-down kernel?)";
      return "loading BPF programs needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); missing " +
             missing({CAP_BPF, CAP_PERFMON}) + "; " + have;
    case Step::AttachUprobe:
      if (has_cap(CAP_SYS_ADMIN))
        return "refused although " + have + " (a security module?)";
      if (has_cap(CAP_PERFMON))
        return "this kernel requires CAP_SYS_ADMIN to attach uprobes (CAP_PERFMON is not enough "
               "since commit ba677dbe77af, Linux 6.16 and stable updates since July 2025); " + have;
      return "attaching uprobes needs CAP_SYS_ADMIN (CAP_PERFMON on kernels before 6.16); " + have;
    case Step::MappingRecords:
      return "CPU-wide perf events need CAP_PERFMON (perf_event_paranoid >= 1); " + have;
  }
  return "";
}

}  // namespace parcagpu::trace
