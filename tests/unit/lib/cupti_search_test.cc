// gather_search_inputs, what the CUPTI search is derived from (search_places' order is
// cupti_locator_test.cc's): a libcudart the process loaded gives its directory (as loaded and as
// it really is), the CUDA major in use (its SONAME) and, from a wheel's path, the site-packages
// its siblings are looked for in; the environment's CUDA_HOME, CUDA_PATH and CONDA_PREFIX are
// taken as given. The mock libcudart is copied into the layouts and loaded from there.
#include "base/cupti_search.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "temp_dir.h"

namespace parcagpu {
namespace {

namespace fs = std::filesystem;

bool has(const std::vector<std::string> &v, const std::string &s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

class CuptiSearchInputsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (void *h : loaded_) dlclose(h);
  }
  // The mock libcudart copied to dir (made) and loaded from `as` (default: there).
  void load_cudart(const std::string &dir, const std::string &as = "") {
    fs::create_directories(dir);
    fs::copy_file(PARCAGPU_MOCK_DIR "/cudart/libcudart.so.12", dir + "/libcudart.so.12");
    const std::string path = (as.empty() ? dir : as) + "/libcudart.so.12";
    void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(h, nullptr) << dlerror();
    loaded_.push_back(h);
  }
  TempDir temp_{"cupti-search"};
  const std::string root_ = temp_.path();
  std::vector<void *> loaded_;
};

TEST_F(CuptiSearchInputsTest, ALoadedWheelsRuntimeGivesItsDirMajorAndSitePackages) {
  const std::string sp = root_ + "/venv/lib/python3.12/site-packages";
  const std::string lib = sp + "/nvidia/cuda_runtime/lib";
  load_cudart(lib);
  CudaInUse cuda;
  const SearchInputs in = gather_search_inputs("", &cuda);
  EXPECT_TRUE(has(in.cudart_dirs, lib));
  EXPECT_TRUE(has(in.python_dirs, sp));
  EXPECT_EQ(in.wanted_major, cuda.major);
  if (cuda.from.find(lib) != std::string::npos)  // else another runtime was loaded first
    EXPECT_EQ(cuda.from, "libcudart.so.12 in " + lib);
  EXPECT_EQ(cuda.major, 12);
  // And so the wheel's sibling is searched.
  const auto places = search_places(in);
  EXPECT_TRUE(std::any_of(places.begin(), places.end(), [&](const SearchPlace &p) {
    return p.path == sp + "/nvidia/cuda_cupti/lib";
  }));
}

TEST_F(CuptiSearchInputsTest, ARuntimeLoadedThroughALinkGivesBothDirectories) {
  const std::string real = root_ + "/cuda-12.8/targets/x86_64-linux/lib";
  fs::create_directories(real);
  fs::create_directory_symlink("targets/x86_64-linux/lib", root_ + "/cuda-12.8/lib64");
  load_cudart(real, root_ + "/cuda-12.8/lib64");
  CudaInUse cuda;
  const SearchInputs in = gather_search_inputs("/given/libcupti.so.12", &cuda);
  EXPECT_EQ(in.explicit_path, "/given/libcupti.so.12");
  EXPECT_TRUE(has(in.cudart_dirs, root_ + "/cuda-12.8/lib64"));
  EXPECT_TRUE(has(in.cudart_dirs, real));
}

TEST_F(CuptiSearchInputsTest, TheEnvironmentsPrefixesAsGiven) {
  setenv("CUDA_HOME", "/opt/home-cuda", 1);
  setenv("CUDA_PATH", "/opt/path-cuda", 1);
  setenv("CONDA_PREFIX", "/opt/conda-env", 1);
  CudaInUse cuda;
  const SearchInputs in = gather_search_inputs("", &cuda);
  unsetenv("CUDA_HOME");
  unsetenv("CUDA_PATH");
  unsetenv("CONDA_PREFIX");
  EXPECT_EQ(in.cuda_home, "/opt/home-cuda");
  EXPECT_EQ(in.cuda_path, "/opt/path-cuda");
  EXPECT_EQ(in.conda_prefix, "/opt/conda-env");
  EXPECT_TRUE(in.explicit_path.empty());
  for (const std::string &r : in.toolkit_roots) EXPECT_TRUE(fs::is_directory(r)) << r;
}

}  // namespace
}  // namespace parcagpu
