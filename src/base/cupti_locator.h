// Loading libcupti: the places of the search (cupti_search.h) walked in order, every candidate
// checked before it is loaded, the CUDA major in use preferred.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace parcagpu {

// The libcupti chosen.
struct LocatedCupti {
  void *handle = nullptr;
  std::string path;  // the file loaded
  std::string why;   // the place it came from ("next to libcudart", "$CUDA_HOME", ...)
  uint32_t api_version = 0;
  int major = 0;
  bool mismatched = false;  // no CUPTI of the CUDA in use was found: this one is of another major
};

// Whether a loaded libcupti can serve (its entry points resolve); else a reason.
using CuptiUsable = std::function<bool(void *handle, std::string *why_not)>;

// Walks search_places() in order and loads the first libcupti whose major matches the CUDA in use
// and that reports a usable API version (CUDA 12 or newer) and passes `usable`; a mismatched one
// only if no matching one loads. PARCAGPU_CUPTI_PATH, when set, is the only place tried. Every
// file is checked before dlopen (elf_file_problem: a truncated file would map into a SIGBUS) and
// refused with the reason; a bare loader name is first looked up as the loader would, and that
// file checked and loaded; one already in the process is only re-opened (RTLD_NOLOAD).
// PARCAGPU_DEBUG logs every place tried and what became of it. On failure: false, and *error is
// one line saying where it looked and how to point at CUPTI.
bool locate_cupti(const std::string &explicit_path, const CuptiUsable &usable, LocatedCupti *out,
                  std::string *error);

}  // namespace parcagpu
