// Shared library files (library_files.h).
#include "base/library_files.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

namespace parcagpu {

namespace fs = std::filesystem;

bool starts_with(const std::string &s, const char *prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

std::string basename_of(const std::string &path) { return fs::path(path).filename().string(); }

std::string clean_path(const std::string &path) {
  std::string out = fs::path(path).lexically_normal().string();
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string parent_of(const std::string &path) { return clean_path(path + "/.."); }

std::string real_path(const std::string &path) {
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  return ec ? std::string() : real.string();
}

std::vector<std::string> names_in(const std::string &dir, const char *prefix, bool *exists) {
  std::vector<std::string> names;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (exists) *exists = !ec;
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (starts_with(name, prefix)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

void push_unique(std::vector<std::string> *v, const std::string &s) {
  if (!s.empty() && std::find(v->begin(), v->end(), s) == v->end()) v->push_back(s);
}

int soname_major(const std::string &soname, const char *stem) {
  const std::string prefix = std::string(stem) + ".";
  if (!starts_with(soname, prefix.c_str())) return 0;
  const char *p = soname.c_str() + prefix.size();
  char *end = nullptr;
  const long n = std::strtol(p, &end, 10);
  if (end == p || (*end != '\0' && *end != '.') || n <= 0 || n > 99) return 0;  // not a major
  return static_cast<int>(n);
}

std::string read_elf_soname(const std::string &path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string soname;
  auto read_at = [fd](void *buf, size_t n, off_t off) {
    return pread(fd, buf, n, off) == static_cast<ssize_t>(n);
  };
  do {
    Elf64_Ehdr eh;
    if (!read_at(&eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
        eh.e_phnum == 0 || eh.e_phnum > 512)
      break;
    std::vector<Elf64_Phdr> ph(eh.e_phnum);
    if (!read_at(ph.data(), ph.size() * sizeof(Elf64_Phdr), static_cast<off_t>(eh.e_phoff))) break;
    const Elf64_Phdr *dynamic = nullptr;
    for (const auto &p : ph)
      if (p.p_type == PT_DYNAMIC) dynamic = &p;
    if (!dynamic || dynamic->p_filesz == 0 || dynamic->p_filesz > (1 << 20)) break;
    std::vector<Elf64_Dyn> dyn(dynamic->p_filesz / sizeof(Elf64_Dyn));
    if (!read_at(dyn.data(), dyn.size() * sizeof(Elf64_Dyn), static_cast<off_t>(dynamic->p_offset)))
      break;
    uint64_t strtab = 0, name = 0;
    bool has_name = false;
    for (const auto &d : dyn) {
      if (d.d_tag == DT_NULL) break;
      if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
      if (d.d_tag == DT_SONAME) {
        name = d.d_un.d_val;
        has_name = true;
      }
    }
    if (!has_name) break;
    // DT_STRTAB is an address: find the file offset through the segment that maps it.
    for (const auto &p : ph) {
      if (p.p_type != PT_LOAD || strtab < p.p_vaddr || strtab >= p.p_vaddr + p.p_filesz) continue;
      char buf[256] = {};
      const off_t off = static_cast<off_t>(strtab - p.p_vaddr + p.p_offset + name);
      const ssize_t n = pread(fd, buf, sizeof buf - 1, off);
      if (n > 0) soname.assign(buf, strnlen(buf, static_cast<size_t>(n)));
      break;
    }
  } while (false);
  close(fd);
  return soname;
}

namespace {

// ld.so.cache's entries for this machine's libraries (glibc's dl-cache.h: FLAG_ELF_LIBC6 and the
// FLAG_*_LIB64 of the architecture).
#if defined(__x86_64__)
constexpr int32_t kCacheFlags = 0x0303;
#elif defined(__aarch64__)
constexpr int32_t kCacheFlags = 0x0a03;
#else
constexpr int32_t kCacheFlags = -1;  // no lookup
#endif

// The file /etc/ld.so.cache names for `name`, or "". The new format ("glibc-ld.so.cache1.1"),
// alone or after the old one ("ld.so-1.7.0"); its string offsets count from its own header.
std::string cache_lookup(const std::string &name) {
  if (kCacheFlags < 0) return "";
  std::ifstream f("/etc/ld.so.cache", std::ios::binary);
  std::string d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto u32 = [&d](size_t at) {
    uint32_t v = 0;
    if (at + 4 <= d.size()) std::memcpy(&v, d.data() + at, 4);
    return v;
  };
  static constexpr char kOld[] = "ld.so-1.7.0", kNew[] = "glibc-ld.so.cache1.1";
  size_t base = 0;
  if (d.compare(0, sizeof kOld - 1, kOld) == 0)
    base = (16 + static_cast<size_t>(u32(12)) * 12 + 7) & ~size_t{7};
  if (base >= d.size() || d.compare(base, sizeof kNew - 1, kNew) != 0) return "";
  const size_t n = u32(base + 20);
  auto str = [&d, base](uint32_t off) {
    const size_t at = base + off;
    if (at >= d.size()) return std::string();
    const size_t end = d.find('\0', at);
    return end == std::string::npos ? std::string() : d.substr(at, end - at);
  };
  for (size_t i = 0, at = base + 48; i < n && at + 24 <= d.size(); ++i, at += 24) {
    if (static_cast<int32_t>(u32(at)) != kCacheFlags || str(u32(at + 4)) != name) continue;
    return str(u32(at + 8));
  }
  return "";
}

bool is_system_dir(const std::string &dir) {
  static const std::set<std::string> system = {
    "/lib",
    "/usr/lib",
    "/lib64",
    "/usr/lib64",
#if defined(__x86_64__)
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
#elif defined(__aarch64__)
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
#endif
  };
  return system.count(clean_path(dir)) > 0;
}

// The directories the loader searches for a dlopen(name) of this library, in its order: RPATH,
// LD_LIBRARY_PATH, RUNPATH and the system directories (dlinfo RTLD_DI_SERINFO).
std::vector<std::string> loader_dirs() {
  std::vector<std::string> dirs;
  Dl_info info{};
  void *self = nullptr;
  if (dladdr(reinterpret_cast<void *>(&loader_dirs), &info) && info.dli_fname)
    self = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!self) self = dlopen(nullptr, RTLD_LAZY);
  if (!self) return dirs;
  Dl_serinfo size{};
  if (dlinfo(self, RTLD_DI_SERINFOSIZE, &size) == 0 && size.dls_size >= sizeof(Dl_serinfo)) {
    std::vector<uint64_t> storage((size.dls_size + 7) / 8);  // aligned for Dl_serinfo
    auto *si = reinterpret_cast<Dl_serinfo *>(storage.data());
    if (dlinfo(self, RTLD_DI_SERINFOSIZE, si) == 0 && dlinfo(self, RTLD_DI_SERINFO, si) == 0)
      for (unsigned i = 0; i < si->dls_cnt; ++i)
        if (si->dls_serpath[i].dls_name && *si->dls_serpath[i].dls_name)
          push_unique(&dirs, si->dls_serpath[i].dls_name);
  }
  dlclose(self);
  return dirs;
}

}  // namespace

std::string loader_file_for(const std::string &name) {
  auto regular = [](const std::string &path) {
    std::error_code ec;
    return fs::is_regular_file(path, ec);  // links followed; a device (a bound /dev/null) is not
  };
  const std::vector<std::string> dirs = loader_dirs();
  for (const std::string &d : dirs)
    if (!is_system_dir(d) && regular(d + "/" + name)) return d + "/" + name;
  const std::string cached = cache_lookup(name);
  if (!cached.empty() && regular(cached)) return cached;
  for (const std::string &d : dirs)
    if (is_system_dir(d) && regular(d + "/" + name)) return d + "/" + name;
  return "";
}

}  // namespace parcagpu
