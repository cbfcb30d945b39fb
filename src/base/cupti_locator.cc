#include "base/cupti_locator.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "base/elf_check.h"
#include "base/log.h"

namespace parcagpu {
namespace {

// CUPTI older than CUDA 12 is not supported: the library is built and tested against the
// callbacks and kernel records of CUDA 12 (CUpti_ActivityKernel9) and 13 (CUpti_ActivityKernel10).
constexpr int kOldestMajor = 12;
// No two CUDA majors this library knows: the loader names are tried wanted-first.
constexpr int kKnownMajors[] = {13, 12};

// Where the toolkit keeps the per-architecture libraries (lib64 is usually a link to it).
std::vector<std::string> target_lib_dirs() {
#if defined(__x86_64__)
  return {"targets/x86_64-linux/lib"};
#elif defined(__aarch64__)
  return {"targets/sbsa-linux/lib", "targets/aarch64-linux/lib"};
#else
  return {};
#endif
}

bool starts_with(const std::string &s, const char *prefix) {
  return s.compare(0, std::strlen(prefix), prefix) == 0;
}

namespace fs = std::filesystem;

std::string basename_of(const std::string &path) { return fs::path(path).filename().string(); }

// Lexical clean-up: no trailing '/', no empty or "." components, ".." folded where possible.
std::string clean_path(const std::string &path) {
  std::string out = fs::path(path).lexically_normal().string();
  if (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string parent_of(const std::string &path) { return clean_path(path + "/.."); }

// The file's real path, links resolved; "" if it does not exist.
std::string real_path(const std::string &path) {
  std::error_code ec;
  const fs::path real = fs::canonical(path, ec);
  return ec ? std::string() : real.string();
}

// The names in directory `dir` that begin with `prefix`, sorted; *exists whether dir could be read.
std::vector<std::string> names_in(const std::string &dir, const char *prefix,
                                  bool *exists = nullptr) {
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

// The toolkit root a runtime directory belongs to: X for X/lib64 and X/lib, and for
// X/targets/<arch>/lib; "" otherwise.
std::string toolkit_root_of(const std::string &dir) {
  const std::string base = basename_of(dir);
  if (base != "lib" && base != "lib64") return "";
  const std::string up = parent_of(dir);
  const std::string up2 = parent_of(up);
  if (basename_of(up2) == "targets") return parent_of(up2);
  return up;
}

// "/x/lib/python3.12/site-packages/torch/lib/libtorch.so" -> "/x/lib/python3.12/site-packages".
std::string python_dir_of(const std::string &path) {
  for (const char *marker : {"/site-packages/", "/dist-packages/"}) {
    const size_t at = path.find(marker);
    if (at != std::string::npos) return path.substr(0, at + std::strlen(marker) - 1);
  }
  return "";
}

void push_unique(std::vector<std::string> *v, const std::string &s) {
  if (!s.empty() && std::find(v->begin(), v->end(), s) == v->end()) v->push_back(s);
}

// "/usr/local/cuda-12.8" sorts after "/usr/local/cuda-13.0": newest first.
bool newer_toolkit_first(const std::string &a, const std::string &b) {
  auto version = [](const std::string &p) {
    const size_t dash = p.rfind('-');
    int major = 0, minor = 0;
    if (dash != std::string::npos) std::sscanf(p.c_str() + dash + 1, "%d.%d", &major, &minor);
    return major * 1000 + minor;
  };
  return version(a) > version(b);
}

}  // namespace

int soname_major(const std::string &soname, const char *stem) {
  const std::string prefix = std::string(stem) + ".";
  if (!starts_with(soname, prefix.c_str())) return 0;
  const char *p = soname.c_str() + prefix.size();
  char *end = nullptr;
  const long n = std::strtol(p, &end, 10);
  if (end == p || (*end != '\0' && *end != '.') || n <= 0 || n > 99) return 0;  // not a major
  return static_cast<int>(n);
}

int cupti_api_major(uint32_t v) {
  // cupti_version.h: since CUDA 13 the version is xxyyzz (xx the CUDA major); before, a counter:
  // 19 was CUDA 12.0, 28 CUDA 12.9 Update 1, 13..18 CUDA 11.x.
  if (v >= 10000) return static_cast<int>(v / 10000);
  if (v >= 19) return 12;
  if (v >= 13) return 11;
  return 0;
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

std::vector<SearchPlace> search_places(const SearchInputs &in) {
  using Kind = SearchPlace::Kind;
  std::vector<SearchPlace> places;
  std::set<std::string> seen;
  auto add = [&](Kind kind, const std::string &path, const std::string &why) {
    if (path.empty()) return;
    const std::string p = kind == Kind::LoaderName ? path : clean_path(path);
    if (seen.insert(std::to_string(static_cast<int>(kind)) + p).second)
      places.push_back({kind, p, why});
  };
  auto add_toolkit = [&](const std::string &root, const std::string &why) {
    add(Kind::Directory, root + "/extras/CUPTI/lib64", why);
    for (const std::string &t : target_lib_dirs()) add(Kind::Directory, root + "/" + t, why);
    add(Kind::Directory, root + "/lib64", why);
    add(Kind::Directory, root + "/lib", why);
  };

  if (!in.explicit_path.empty()) {
    add(Kind::File, in.explicit_path, "PARCAGPU_CUPTI_PATH");
    return places;
  }
  // A profiler in the application (Kineto, say) may have loaded one already: share that copy.
  for (const std::string &p : in.loaded_cupti) add(Kind::Loaded, p, "already in the process");
  for (const std::string &d : in.cudart_dirs) {
    // The toolkit's lib64, a conda prefix's lib and the CUDA 13 wheel (nvidia/cu13/lib) keep
    // libcupti beside libcudart.
    add(Kind::Directory, d, "next to libcudart");
    // CUDA 12 wheels: nvidia/cuda_runtime/lib/libcudart.so.12, nvidia/cuda_cupti/lib.
    const std::string nvidia = parent_of(parent_of(d));
    if (basename_of(nvidia) == "nvidia") {
      add(Kind::Directory, nvidia + "/cuda_cupti/lib", "pip wheel beside libcudart");
      add(Kind::Directory, nvidia + "/cu13/lib", "pip wheel beside libcudart");
    }
    const std::string root = toolkit_root_of(d);
    if (!root.empty()) add_toolkit(root, "toolkit of libcudart");
  }
  for (const std::string &sp : in.python_dirs) {
    add(Kind::Directory, sp + "/nvidia/cuda_cupti/lib", "pip wheel in " + sp);
    add(Kind::Directory, sp + "/nvidia/cu13/lib", "pip wheel in " + sp);
    add(Kind::Directory, sp + "/triton/backends/nvidia/lib/cupti", "bundled with Triton");
  }
  if (!in.cuda_home.empty()) add_toolkit(in.cuda_home, "$CUDA_HOME");
  if (!in.cuda_path.empty()) add_toolkit(in.cuda_path, "$CUDA_PATH");
  if (!in.conda_prefix.empty()) {
    add(Kind::Directory, in.conda_prefix + "/lib", "$CONDA_PREFIX");
    for (const std::string &t : target_lib_dirs())
      add(Kind::Directory, in.conda_prefix + "/" + t, "$CONDA_PREFIX");
  }
  // LD_LIBRARY_PATH, ld.so.cache and the system directories, the wanted major first.
  if (in.wanted_major > 0)
    add(Kind::LoaderName, "libcupti.so." + std::to_string(in.wanted_major), "loader path");
  for (int m : kKnownMajors)
    add(Kind::LoaderName, "libcupti.so." + std::to_string(m), "loader path");
  add(Kind::LoaderName, "libcupti.so", "loader path");
  for (const std::string &root : in.toolkit_roots) add_toolkit(root, "toolkit prefix");
  return places;
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

// The regular file the loader would open for a bare name, looked up as it looks: the
// directories of loader_dirs() but the system ones, ld.so.cache, the system directories.
// "" when none (then the loader finds none either).
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

struct Scan {
  std::vector<std::string> cupti, cudart, python;
};

int collect_object(dl_phdr_info *info, size_t, void *arg) {
  auto *scan = static_cast<Scan *>(arg);
  if (!info->dlpi_name || !*info->dlpi_name) return 0;  // the executable, the vDSO
  const std::string path = info->dlpi_name;
  const std::string base = basename_of(path);
  if (starts_with(base, "libcupti.so")) push_unique(&scan->cupti, path);
  if (starts_with(base, "libcudart.so")) push_unique(&scan->cudart, path);
  push_unique(&scan->python, python_dir_of(path));
  return 0;
}

// The runtime's major: its SONAME (libcudart.so.12), else its own cudaRuntimeGetVersion.
int cudart_major(const std::string &path, std::string *soname) {
  *soname = read_elf_soname(path);
  if (int m = soname_major(*soname, "libcudart.so")) return m;
  void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!h) return 0;
  int version = 0;
  using GetVersion = int (*)(int *);
  if (auto fn = reinterpret_cast<GetVersion>(dlsym(h, "cudaRuntimeGetVersion")))
    if (fn(&version) != 0) version = 0;
  dlclose(h);
  return version / 1000;
}

int driver_major(int *version) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // kept: load_cuda uses it too
  if (!h) return 0;
  using GetVersion = int (*)(int *);
  auto fn = reinterpret_cast<GetVersion>(dlsym(h, "cuDriverGetVersion"));
  if (!fn || fn(version) != 0) *version = 0;
  return *version / 1000;
}

}  // namespace

SearchInputs gather_search_inputs(const std::string &explicit_path, CudaInUse *cuda) {
  SearchInputs in;
  in.explicit_path = explicit_path;
  Scan scan;
  dl_iterate_phdr(&collect_object, &scan);
  in.loaded_cupti = scan.cupti;
  in.python_dirs = scan.python;
  for (const std::string &rt : scan.cudart) {
    const std::string dir = parent_of(rt);
    // As loaded (a link such as lib64 names the toolkit layout) and as it really is
    // (lib64 -> targets/<arch>/lib); a relative name only as it really is.
    if (!dir.empty() && dir[0] == '/') push_unique(&in.cudart_dirs, dir);
    push_unique(&in.cudart_dirs, real_path(dir));
    std::string soname;
    const int major = cudart_major(rt, &soname);
    if (major == 0) continue;
    if (cuda->major == 0) {
      cuda->major = major;
      cuda->from = (soname.empty() ? basename_of(rt) : soname) + " in " + dir;
    } else if (major != cuda->major) {
      debug_log("cupti search: CUDA %d runtime %s is loaded too; going by the first, CUDA %d",
                major, rt.c_str(), cuda->major);
    }
  }
  if (cuda->major == 0) {
    int version = 0;
    cuda->major = driver_major(&version);
    if (cuda->major) cuda->from = "the driver, cuDriverGetVersion " + std::to_string(version);
  }
  in.wanted_major = cuda->major;
  auto env = [](const char *name) {
    const char *v = std::getenv(name);
    return std::string(v ? v : "");
  };
  in.cuda_home = env("CUDA_HOME");
  in.cuda_path = env("CUDA_PATH");
  in.conda_prefix = env("CONDA_PREFIX");
  std::vector<std::string> roots;
  for (const std::string &name : names_in("/usr/local", "cuda-"))
    roots.push_back("/usr/local/" + name);
  std::sort(roots.begin(), roots.end(), newer_toolkit_first);
  roots.insert(roots.begin(), "/usr/local/cuda");
  roots.push_back("/opt/cuda");
  std::error_code ec;
  for (const std::string &r : roots)
    if (fs::is_directory(r, ec)) in.toolkit_roots.push_back(r);
  return in;
}

namespace {

struct Candidate {
  std::string path;  // file, or a bare name for the loader
  const SearchPlace *place;
  int major;  // from the SONAME or the name; 0: unknown until loaded
};

// The libcupti files of a directory, one per real file (libcupti.so -> .so.12 -> .so.12.8.90),
// those of the wanted major first.
std::vector<Candidate> cupti_files_in(const SearchPlace &place, int wanted, bool *exists) {
  std::vector<Candidate> out;
  std::set<std::string> files;
  for (const std::string &n : names_in(place.path, "libcupti.so", exists)) {
    const std::string path = place.path + "/" + n;
    const std::string real = real_path(path);
    if (real.empty() || !files.insert(real).second) continue;
    out.push_back({path, &place, soname_major(read_elf_soname(path), "libcupti.so")});
  }
  std::stable_partition(out.begin(), out.end(),
                        [wanted](const Candidate &c) { return c.major == wanted; });
  return out;
}

std::string loaded_path(void *handle, const std::string &fallback) {
  link_map *lm = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && *lm->l_name)
    return lm->l_name;
  return fallback;
}

// The one error line: where it looked, by kind of place (PARCAGPU_DEBUG has every path).
std::string not_found_message(const SearchInputs &in, const CudaInUse &cuda,
                              const std::string &first_rejection) {
  std::string m = "no usable libcupti";
  if (cuda.major) m += " for CUDA " + std::to_string(cuda.major) + " (" + cuda.from + ")";
  if (!first_rejection.empty()) m += " (" + first_rejection + ")";
  m += ": looked in the process, ";
  m += in.cudart_dirs.empty() ? "beside libcudart (none loaded)"
                              : "beside libcudart " + in.cudart_dirs[0];
  if (!in.python_dirs.empty()) m += ", " + in.python_dirs[0];
  std::string unset;
  const std::pair<const char *, const std::string *> vars[] = {{"CUDA_HOME", &in.cuda_home},
                                                               {"CUDA_PATH", &in.cuda_path},
                                                               {"CONDA_PREFIX", &in.conda_prefix}};
  for (const auto &[name, value] : vars) {
    if (value->empty())
      unset += std::string(unset.empty() ? "" : "/") + "$" + name;
    else
      m += std::string(", $") + name + "=" + *value;
  }
  if (!unset.empty()) m += ", " + unset + " (unset)";
  m += ", the loader path";
  for (const std::string &r : in.toolkit_roots) m += ", " + r;
  if (in.toolkit_roots.empty()) m += ", /usr/local/cuda* (none)";
  const std::string want =
      cuda.major ? "libcupti.so." + std::to_string(cuda.major) : std::string("libcupti.so");
  m += "; set PARCAGPU_CUPTI_PATH to your CUDA's " + want + " (PARCAGPU_DEBUG=1 lists each path)";
  return m;
}

// One search (locate_cupti): the candidates tried and rejected so far, and the first rejection
// for the error line.
class CuptiSearch {
 public:
  CuptiSearch(int wanted, bool explicit_only, const CuptiUsable &usable, LocatedCupti *out)
      : wanted_(wanted), explicit_only_(explicit_only), usable_(usable), out_(out) {}

  // Every candidate of a place; true once one is the one. Candidates of another major go to
  // the deferred ones.
  bool try_place(const SearchPlace &place) {
    for (const Candidate &c : candidates_at(place)) {
      if (!explicit_only_ && wanted_ && c.major && c.major != wanted_) {
        debug_log("cupti search: %s: %s: CUPTI %d, skipped: CUDA %d in use", place.why.c_str(),
                  c.path.c_str(), c.major, wanted_);
        deferred_.push_back(c);
        continue;
      }
      if (try_load(c, explicit_only_)) return true;
    }
    return false;
  }
  // No CUPTI of the CUDA in use anywhere: one of another major still sees the driver API.
  bool try_deferred() {
    for (const Candidate &c : std::vector<Candidate>(deferred_))
      if (try_load(c, true)) return true;
    return false;
  }
  const std::string &first_rejection() const { return first_rejection_; }
  const std::string &first_rejection_why() const { return first_rejection_why_; }

 private:
  std::vector<Candidate> candidates_at(const SearchPlace &place) const {
    switch (place.kind) {
      case SearchPlace::Kind::File:
      case SearchPlace::Kind::Loaded:
        return {{place.path, &place, soname_major(read_elf_soname(place.path), "libcupti.so")}};
      case SearchPlace::Kind::LoaderName:
        return {{place.path, &place, soname_major(place.path, "libcupti.so")}};
      case SearchPlace::Kind::Directory: {
        bool exists = false;
        std::vector<Candidate> found = cupti_files_in(place, wanted_, &exists);
        if (found.empty())
          debug_log("cupti search: %s: %s: %s", place.why.c_str(), place.path.c_str(),
                    exists ? "no libcupti" : "no such directory");
        return found;
      }
    }
    return {};
  }

  void reject(const Candidate &c, const std::string &why) {
    debug_log("cupti search: %s: %s: %s", c.place->why.c_str(), c.path.c_str(), why.c_str());
    if (first_rejection_.empty()) {
      first_rejection_ = c.path + ": " + why;
      first_rejection_why_ = why;
    }
  }
  // A bare name's candidate as rejections name it: with the file the loader would pick.
  static Candidate as_named(const Candidate &c, const std::string &file) {
    const bool bare = c.place->kind == SearchPlace::Kind::LoaderName;
    return bare ? Candidate{c.path + " = " + file, c.place, c.major} : c;
  }

  // What dlopen is given: the file itself; for a bare name, the file the loader would pick. A
  // bare name our lookup does not resolve (a loader detail it does not copy, such as
  // glibc-hwcaps directories) is left to the loader, unchecked, as before the check existed:
  // better an unchecked CUPTI than none. False if the candidate is out before dlopen; *real is
  // its real path ("" if left to the loader).
  bool checked_before_open(const Candidate &c, std::string *open_path, std::string *real) {
    const bool bare = c.place->kind == SearchPlace::Kind::LoaderName;
    *open_path = c.path;
    if (bare) {
      std::string file = loader_file_for(c.path);
      if (file.empty()) {
        debug_log(
            "cupti search: loader path: %s: not found by our lookup, left to the loader "
            "unchecked",
            c.path.c_str());
        return true;
      }
      *open_path = std::move(file);
    }
    *real = real_path(*open_path);
    if (real->empty()) {
      reject(c, "no such file");
      return false;
    }
    if (tried_.count(*real)) {
      if (bare)
        debug_log("cupti search: loader path: %s = %s: tried already", c.path.c_str(),
                  open_path->c_str());
      return false;
    }
    // Never map a file that would crash the process (elf_check.h). One already in the process
    // is not opened again.
    if (c.place->kind == SearchPlace::Kind::Loaded) return true;
    const std::string problem = elf_file_problem(*open_path);
    if (problem.empty()) return true;
    tried_.insert(*real);
    reject(as_named(c, *open_path), problem);
    return false;
  }

  // Loads one candidate; true if it is the one.
  bool try_load(const Candidate &c, bool accept_mismatch) {
    std::string open_path, real;
    if (!checked_before_open(c, &open_path, &real)) return false;
    const bool loaded = c.place->kind == SearchPlace::Kind::Loaded;
    void *h = dlopen(open_path.c_str(), RTLD_NOW | (loaded ? RTLD_NOLOAD : RTLD_LOCAL));
    if (!h) {
      const char *e = dlerror();
      reject(as_named(c, open_path), std::string("cannot load: ") + (e ? e : "unknown"));
      return false;
    }
    return take_if_usable(c, h, loaded_path(h, open_path), real, accept_mismatch);
  }

  // A loaded candidate: kept (out_) if its version and `usable` say so, else closed again.
  bool take_if_usable(const Candidate &c, void *h, const std::string &file, const std::string &real,
                      bool accept_mismatch) {
    auto give_up = [&](const std::string &why) {
      reject(as_named(c, file), why);
      const std::string loaded_real = real_path(file);
      tried_.insert(loaded_real.empty() ? real : loaded_real);
      dlclose(h);
      return false;
    };
    using GetVersion = int (*)(uint32_t *);
    auto get_version = reinterpret_cast<GetVersion>(dlsym(h, "cuptiGetVersion"));
    uint32_t version = 0;
    if (!get_version) return give_up("no cuptiGetVersion: not CUPTI");
    if (const int r = get_version(&version); r != 0)
      return give_up("cuptiGetVersion failed (CUptiResult " + std::to_string(r) + ")");
    const int major = cupti_api_major(version);
    if (major < kOldestMajor)
      return give_up("API version " + std::to_string(version) + " is older than CUDA " +
                     std::to_string(kOldestMajor));
    if (!accept_mismatch && !explicit_only_ && wanted_ && major != wanted_) {
      // Its name said nothing (libcupti.so) or disagreed with its version: keep it for later.
      debug_log("cupti search: %s: %s: CUPTI %d (API version %u), skipped: CUDA %d in use",
                c.place->why.c_str(), file.c_str(), major, version, wanted_);
      deferred_.push_back({file, c.place, major});
      dlclose(h);
      return false;
    }
    std::string why_not;
    if (!usable_(h, &why_not)) return give_up(why_not);
    *out_ = {h, file, c.place->why, version, major, wanted_ && major != wanted_};
    debug_log("cupti search: using %s (%s), API version %u, CUDA %d", file.c_str(),
              c.place->why.c_str(), version, major);
    return true;
  }

  const int wanted_;
  const bool explicit_only_;
  const CuptiUsable &usable_;
  LocatedCupti *const out_;
  std::set<std::string> tried_;  // real paths already loaded and rejected
  std::vector<Candidate> deferred_;
  std::string first_rejection_, first_rejection_why_;
};

}  // namespace

bool locate_cupti(const std::string &explicit_path, const CuptiUsable &usable, LocatedCupti *out,
                  std::string *error) {
  CudaInUse cuda;
  const SearchInputs in = gather_search_inputs(explicit_path, &cuda);
  const int wanted = cuda.major;
  if (wanted)
    debug_log("cupti search: CUDA %d in use (%s)", wanted, cuda.from.c_str());
  else
    debug_log("cupti search: CUDA in use unknown (no libcudart loaded, no driver answered)");
  const std::vector<SearchPlace> places = search_places(in);
  const bool explicit_only = !explicit_path.empty();
  CuptiSearch search(wanted, explicit_only, usable, out);
  for (const SearchPlace &place : places)
    if (search.try_place(place)) return true;
  if (explicit_only) {
    *error = "cannot use PARCAGPU_CUPTI_PATH=" + explicit_path + ": " +
             (search.first_rejection_why().empty() ? "not found" : search.first_rejection_why());
    return false;
  }
  if (search.try_deferred()) return true;
  *error = not_found_message(in, cuda, search.first_rejection());
  return false;
}

}  // namespace parcagpu
