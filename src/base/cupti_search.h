// Where libcupti is looked for: the places, in order, and what they are derived from (loading
// the first that serves is cupti_locator.h). Real installs rarely put CUPTI on the loader's
// path: the toolkit keeps it in extras/CUPTI/lib64 or targets/<arch>/lib, pip wheels next to the
// wheel's libcudart, conda in $CONDA_PREFIX/lib, and frameworks bundle their own. So the search
// starts from what the process already holds (a libcupti, a libcudart) and from the usual
// environment variables, and only then asks the loader and the usual toolkit prefixes.
//
// A process may hold CUDA 12 and CUDA 13 libraries side by side; a CUPTI whose major differs from
// the CUDA the application runs subscribes to callbacks that never come. So every candidate's
// major (its SONAME, read from the file before anything is loaded) is compared with the CUDA in
// use, and a mismatched one is taken only when no matching one exists anywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parcagpu {

// The CUDA major the application runs, and how that was decided (for the log).
struct CudaInUse {
  int major = 0;     // 0: unknown
  std::string from;  // "libcudart.so.12 at /x/lib", "the driver (cuDriverGetVersion 13000)"
};

// One place of the search, in search order.
struct SearchPlace {
  enum class Kind {
    File,        // this file (PARCAGPU_CUPTI_PATH)
    Loaded,      // a libcupti already in the process, at this path
    Directory,   // every libcupti.so* file in this directory
    LoaderName,  // this bare name, found by the dynamic loader's own search
  };
  Kind kind;
  std::string path;
  std::string why;  // "PARCAGPU_CUPTI_PATH", "next to libcudart", "$CUDA_HOME", "loader path", ...
};

// What the search is derived from: gathered from the process by gather_search_inputs(), or
// written out by a unit test.
struct SearchInputs {
  std::string explicit_path;              // PARCAGPU_CUPTI_PATH
  std::vector<std::string> loaded_cupti;  // paths of libcupti objects in the process
  std::vector<std::string> cudart_dirs;   // directories of the libcudart objects in the process
  std::vector<std::string> python_dirs;   // site-packages / dist-packages of loaded objects
  std::string cuda_home, cuda_path, conda_prefix;
  std::vector<std::string> toolkit_roots;  // /usr/local/cuda, /usr/local/cuda-13.0, ...
  int wanted_major = 0;                    // the CUDA in use (0: unknown)
};

// The places to look, in order, duplicates removed. Pure: no file system access.
std::vector<SearchPlace> search_places(const SearchInputs &in);

// CUPTI API version (cuptiGetVersion) -> CUDA major: 130001 -> 13, 19..28 -> 12, 13..18 -> 11.
int cupti_api_major(uint32_t api_version);

// The process's own inputs: PARCAGPU_CUPTI_PATH as given, the loaded objects
// (dl_iterate_phdr), CUDA_HOME / CUDA_PATH / CONDA_PREFIX, the toolkit prefixes that exist, and
// the CUDA in use: the loaded libcudart's major, else the driver's (cuDriverGetVersion).
SearchInputs gather_search_inputs(const std::string &explicit_path, CudaInUse *cuda);

}  // namespace parcagpu
