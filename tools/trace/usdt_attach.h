// The attach loop both BPF sessions use (bpf_session.cc, the tracer; pc_bpf_session.cc, PC
// sampling): one bpf_program__attach_usdt per handled probe that a library file has, all or none.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

struct bpf_program;
struct bpf_link;

namespace parcagpu::trace {

struct UsdtProgram {
  const char *probe;     // probe name of provider "parcagpu"
  bpf_program *program;  // the program attached to it
};

// A probe name and its program in a BPF skeleton (Progs: decltype(skeleton::progs)), typed: a
// table row for a probe without a program does not compile.
template <class Progs>
struct ProbeProgram {
  const char *probe;
  bpf_program *Progs::*prog;
};

// The skeleton's programs of the rows of `probes`.
template <class Progs, size_t N>
std::vector<UsdtProgram> usdt_programs(const ProbeProgram<Progs> (&probes)[N], const Progs &progs) {
  std::vector<UsdtProgram> v;
  for (const ProbeProgram<Progs> &p : probes) v.push_back({p.probe, progs.*p.prog});
  return v;
}

struct UsdtLink {
  const char *probe;
  std::string path;
  bpf_link *link;
};

// Attaches each of `programs` whose probe is in `present` (the file's probes) to `path`, with
// `pid`'s filter (-1: every process), appending to `links`. Returns how many were attached; on a
// refusal, -1 with *error ("cannot attach [WHAT ]to parcagpu:PROBE in PATH: ...") and *err
// (errno), and every link of `path` is destroyed: a file is attached whole or not at all.
int attach_usdt(const std::vector<UsdtProgram> &programs, const std::string &path, int pid,
                const std::vector<std::string> &present, const char *what, std::vector<UsdtLink> *links,
                std::string *error, int *err);

// Destroys the links of `probe`, or all of them when it is null.
void destroy_links(std::vector<UsdtLink> *links, const char *probe = nullptr);
// Takes the links whose probe `keep` does not want out of `links`, for the caller to destroy.
std::vector<bpf_link *> take_links(std::vector<UsdtLink> *links, bool (*keep)(const char *probe));
// Destroys `links` (what take_links took), one after the other: libbpf's USDT links of one BPF
// object share its USDT manager's bookkeeping, which is not thread-safe. The kernel's uprobe
// unregistration waits 0.1-0.3 s per link.
void destroy_links(const std::vector<bpf_link *> &links);

}  // namespace parcagpu::trace
