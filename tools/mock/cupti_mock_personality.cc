// Which CUPTI the mock presents, and which entry points it pretends not to have.
//
//   MOCK_CUPTI_PERSONALITY=12|13
//     12: the CUPTI of CUDA 12.0: cuptiGetVersion says 19, kernel records are
//     CUpti_ActivityKernel9 (208 bytes, as every CUDA 12 CUPTI writes them), runtime callback ids
//     from 445 on (the first of a CUDA 12.2 API) are unknown to it, and the entry points CUDA 12.0
//     did not have yet are absent (cuptiGetGraphExecId came with 12.3).
//     13: CUDA 13.0 Update 1 (130001, CUpti_ActivityKernel10), as the H100 of docs/cupti-facts.md.
//     Default: the major of the library file's SONAME (libcupti.so.12 / libcupti.so.13 builds).
//   MOCK_CUPTI_HIDE=cuptiGetGraphExecId,cuptiGetTimestamp,...
//     any exported names: dlsym() does not find them, as in a libcupti that never had them.
//
// Hiding is done on the symbol table itself, so it holds for every lookup in the process,
// including the library's own dlsym() calls: the constructor zeroes st_value of the hidden
// names' .dynsym entries in this library's mapping, and glibc's lookup skips an entry whose
// value is 0 (elf/dl-lookup.c, check_match). The library is linked with -z now, so nothing of
// its own is resolved lazily through a name that is gone by then.
#include <cupti.h>
#include <cupti_activity_deprecated.h>
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cupti_mock_internal.h"

namespace mockcupti {
namespace {

int g_personality = 13;

void warn(const std::string &message) {
  std::fprintf(stderr, "mock-cupti: warning: %s\n", message.c_str());
}

std::vector<std::string> split_names(const char *list) {
  std::vector<std::string> names;
  std::string item;
  for (const char *p = list;; ++p) {
    if (*p == ',' || *p == ' ' || *p == '\0') {
      if (!item.empty()) names.push_back(item);
      item.clear();
      if (*p == '\0') break;
    } else {
      item += *p;
    }
  }
  return names;
}

struct SegmentQuery {
  uintptr_t address;
  int prot;  // -1: not found
};

int find_segment(dl_phdr_info *info, size_t, void *arg) {
  auto *q = static_cast<SegmentQuery *>(arg);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    const uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type != PT_LOAD || q->address < start || q->address >= start + ph.p_memsz) continue;
    q->prot = ((ph.p_flags & PF_R) ? PROT_READ : 0) | ((ph.p_flags & PF_W) ? PROT_WRITE : 0) |
              ((ph.p_flags & PF_X) ? PROT_EXEC : 0);
    return 1;
  }
  return 0;
}

// Makes `name` unresolvable in this library. Returns false with a reason if it cannot.
bool unpublish(const char *name, std::string *why) {
  Dl_info self{};
  if (!dladdr(reinterpret_cast<void *>(&unpublish), &self) || !self.dli_fname) {
    *why = "cannot find this library";
    return false;
  }
  void *handle = dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  void *address = handle ? dlsym(handle, name) : nullptr;
  if (handle) dlclose(handle);
  Dl_info info{};
  void *entry = nullptr;
  if (!address || !dladdr1(address, &info, &entry, RTLD_DL_SYMENT) || !entry ||
      info.dli_fbase != self.dli_fbase || !info.dli_sname ||
      std::strcmp(info.dli_sname, name) != 0) {
    *why = "not an entry point of this library";
    return false;
  }
  auto *sym = static_cast<ElfW(Sym) *>(entry);
  SegmentQuery q{reinterpret_cast<uintptr_t>(sym), -1};
  dl_iterate_phdr(&find_segment, &q);
  if (q.prot < 0) {
    *why = "its symbol table entry is not mapped";
    return false;
  }
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(sym) & ~(page - 1);
  const uintptr_t last = (reinterpret_cast<uintptr_t>(sym + 1) - 1) & ~(page - 1);
  const size_t length = last - first + page;
  if (mprotect(reinterpret_cast<void *>(first), length, q.prot | PROT_WRITE) != 0) {
    *why = std::string("mprotect: ") + std::strerror(errno);
    return false;
  }
  sym->st_value = 0;
  mprotect(reinterpret_cast<void *>(first), length, q.prot);
  return true;
}

// What the CUPTI of CUDA 12.0 did not export yet, among the mock's entry points.
constexpr const char *kAbsentIn12[] = {"cuptiGetGraphExecId"};

}  // namespace

void load_personality() {
  g_personality = build_soname_major();
  if (const char *v = std::getenv("MOCK_CUPTI_PERSONALITY"); v && *v) {
    if (std::strcmp(v, "12") == 0 || std::strcmp(v, "13") == 0)
      g_personality = std::atoi(v);
    else
      warn(std::string("MOCK_CUPTI_PERSONALITY='") + v + "' is not 12 or 13; using " +
           std::to_string(g_personality));
  }
  std::vector<std::string> hide;
  if (g_personality == 12)
    for (const char *n : kAbsentIn12) hide.push_back(n);
  if (const char *v = std::getenv("MOCK_CUPTI_HIDE"); v && *v)
    for (const std::string &n : split_names(v)) hide.push_back(n);
  std::sort(hide.begin(), hide.end());
  hide.erase(std::unique(hide.begin(), hide.end()), hide.end());
  for (const std::string &n : hide) {
    std::string why;
    if (!unpublish(n.c_str(), &why))
      warn("MOCK_CUPTI_HIDE entry '" + n + "': " + why + "; entry ignored");
  }
}

int personality() { return g_personality; }

uint32_t api_version() { return g_personality == 12 ? 19 : CUPTI_API_VERSION; }

size_t kernel_record_size() {
  return g_personality == 12 ? sizeof(CUpti_ActivityKernel9) : sizeof(CUpti_ActivityKernel10);
}

uint32_t runtime_cbid_limit() {
  // cupti_runtime_cbid.h: 445 is the first id of a CUDA 12.2 API (the _v12020 ones).
  return g_personality == 12 ? 445 : CUPTI_RUNTIME_TRACE_CBID_SIZE;
}

}  // namespace mockcupti
