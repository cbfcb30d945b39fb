#include "usdt_attach.h"

#include <bpf/libbpf.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "parcagpu/abi.h"

namespace parcagpu::trace {

int attach_usdt(const std::vector<UsdtProgram> &programs, const std::string &path, int pid,
                const std::vector<std::string> &present, const char *what, std::vector<UsdtLink> *links,
                std::string *error, int *err) {
  int n = 0;
  for (const UsdtProgram &p : programs) {
    if (std::find(present.begin(), present.end(), p.probe) == present.end()) continue;
    bpf_link *link = bpf_program__attach_usdt(p.program, pid, path.c_str(), PARCAGPU_PROVIDER, p.probe, nullptr);
    if (!link) {
      *err = errno;
      *error = std::string("cannot attach ") + (*what ? std::string(what) + " " : "") + "to " + PARCAGPU_PROVIDER + ":" + p.probe + " in " + path +
               ": " + std::strerror(*err);
      std::erase_if(*links, [&path](const UsdtLink &l) {
        if (l.path != path) return false;
        bpf_link__destroy(l.link);
        return true;
      });
      return -1;
    }
    links->push_back({p.probe, path, link});
    ++n;
  }
  return n;
}

std::vector<bpf_link *> take_links(std::vector<UsdtLink> *links, bool (*keep)(const char *probe)) {
  std::vector<bpf_link *> taken;
  std::erase_if(*links, [keep, &taken](const UsdtLink &l) {
    if (keep(l.probe)) return false;
    taken.push_back(l.link);
    return true;
  });
  return taken;
}

void destroy_links(std::vector<UsdtLink> *links, const char *probe) {
  std::vector<bpf_link *> doomed;
  std::erase_if(*links, [probe, &doomed](const UsdtLink &l) {
    if (probe && std::strcmp(l.probe, probe) != 0) return false;
    doomed.push_back(l.link);
    return true;
  });
  destroy_links(doomed);
}

void destroy_links(const std::vector<bpf_link *> &links) {
  for (bpf_link *l : links) bpf_link__destroy(l);
}

}  // namespace parcagpu::trace
