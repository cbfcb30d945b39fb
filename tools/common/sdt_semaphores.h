// Raising a loaded library's USDT semaphores from inside the process, the way the kernel does when
// a consumer attaches a uprobe with a reference counter. The library then sees a consumer exactly
// as it would with eBPF attached, while its probe sites stay no-ops (nothing traps). Used where
// "a consumer is attached" must happen without eBPF or at an exact point of the program:
// tools/bench/launch_overhead.cu --fake-consumer (the library's own cost, without the uprobe
// traps), parcagpu-mockapp --fake-consumer (callgrind under the mock, attach/detach in the middle
// of a launch). Linux, ELF64, header-only, no dependencies beyond libc.
//
// The semaphore addresses come from the library's .note.stapsdt notes (what every USDT consumer
// reads; parsed by tools/common/sdt_notes.h), adjusted for the load address and for prelinking
// (.stapsdt.base), so a stripped library works too.
#pragma once

#include <limits.h>
#include <link.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "sdt_notes.h"

namespace sdtsem {

struct Semaphore {
  std::string probe;
  volatile unsigned short *counter;
};

namespace detail {

struct Found {
  std::string want;
  uintptr_t bias = 0;
  bool found = false;
};

inline int match_object(struct dl_phdr_info *info, size_t, void *arg) {
  auto *f = static_cast<Found *>(arg);
  if (!info->dlpi_name || !*info->dlpi_name) return 0;
  char buf[PATH_MAX];
  if (!realpath(info->dlpi_name, buf) || f->want != buf) return 0;
  f->bias = info->dlpi_addr;
  f->found = true;
  return 1;
}

}  // namespace detail

// The distinct semaphores of `provider`'s probes in the loaded object `lib_path` (any path that
// resolves to the same file). Empty if the object is not loaded or has no such notes; *error
// says why.
inline std::vector<Semaphore> find(const char *lib_path, const char *provider,
                                   std::string *error = nullptr) {
  std::vector<Semaphore> out;
  auto fail = [&](const std::string &why) {
    if (error) *error = why;
    return std::vector<Semaphore>{};
  };
  char real[PATH_MAX];
  if (!realpath(lib_path, real)) return fail(std::string("no such file: ") + lib_path);
  detail::Found f;
  f.want = real;
  dl_iterate_phdr(&detail::match_object, &f);
  if (!f.found) return fail(std::string("not loaded in this process: ") + real);

  std::ifstream in(real, std::ios::binary);
  const std::string elf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<parcagpu::sdt::Note> notes;
  uint64_t base_addr = 0;
  std::string why;
  if (!parcagpu::sdt::parse_notes(elf, &notes, &base_addr, &why))
    return fail(why + ": " + real);
  for (const parcagpu::sdt::Note &n : notes) {
    if (n.provider != provider || n.semaphore == 0) continue;
    const uint64_t sem = n.semaphore + (base_addr ? base_addr - n.base : 0);
    auto *counter = reinterpret_cast<volatile unsigned short *>(f.bias + sem);
    bool dup = false;
    for (const Semaphore &s : out) dup |= s.counter == counter;
    if (!dup) out.push_back(Semaphore{n.name, counter});
  }
  if (out.empty()) return fail(std::string("no semaphores of provider ") + provider);
  return out;
}

// Adds `delta` (+1 attach, -1 detach) to the semaphores of the named probes ("all": every one).
// Returns how many semaphores changed.
inline int raise(const std::vector<Semaphore> &sems, const std::string &probes, int delta) {
  int n = 0;
  for (const Semaphore &s : sems) {
    if (probes != "all" && ("," + probes + ",").find("," + s.probe + ",") == std::string::npos)
      continue;
    __atomic_fetch_add(const_cast<unsigned short *>(s.counter), static_cast<unsigned short>(delta),
                       __ATOMIC_RELAXED);
    ++n;
  }
  return n;
}

}  // namespace sdtsem
