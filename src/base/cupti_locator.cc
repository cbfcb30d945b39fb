#include "base/cupti_locator.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include "base/cupti_search.h"
#include "base/elf_check.h"
#include "base/library_files.h"
#include "base/log.h"

namespace parcagpu {
namespace {

// CUPTI older than CUDA 12 is not supported: the library is built and tested against the
// callbacks and kernel records of CUDA 12 (CUpti_ActivityKernel9) and 13 (CUpti_ActivityKernel10).
constexpr int kOldestMajor = 12;

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
