// Where libcupti is looked for, and what the search is derived from (cupti_search.h).
#include "base/cupti_search.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "base/library_files.h"
#include "base/log.h"

namespace parcagpu {
namespace {

namespace fs = std::filesystem;

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

int cupti_api_major(uint32_t v) {
  // cupti_version.h: since CUDA 13 the version is xxyyzz (xx the CUDA major); before, a counter:
  // 19 was CUDA 12.0, 28 CUDA 12.9 Update 1, 13..18 CUDA 11.x.
  if (v >= 10000) return static_cast<int>(v / 10000);
  if (v >= 19) return 12;
  if (v >= 13) return 11;
  return 0;
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

}  // namespace parcagpu
