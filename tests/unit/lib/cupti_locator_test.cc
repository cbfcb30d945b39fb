// The CUPTI search's order and its version arithmetic, and which callbacks each CUDA's CUPTI
// knows, without loading anything (the entry point table: cupti_api_test.cc).
#include "base/cupti_locator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "base/cupti_api.h"
#include "base/cupti_search.h"
#include "base/library_files.h"
#include "parcagpu/cbid_table.h"

namespace parcagpu {
namespace {

std::vector<std::string> listed(const std::vector<SearchPlace> &places) {
  std::vector<std::string> out;
  for (const auto &p : places) out.push_back(p.path);
  return out;
}

size_t index_of(const std::vector<SearchPlace> &places, const std::string &path) {
  for (size_t i = 0; i < places.size(); ++i)
    if (places[i].path == path) return i;
  ADD_FAILURE() << path << " is not searched";
  return places.size();
}

TEST(CuptiSearch, ExplicitPathIsTheOnlyPlace) {
  SearchInputs in;
  in.explicit_path = "/opt/x/libcupti.so.12";
  in.cuda_home = "/usr/local/cuda";
  in.loaded_cupti = {"/a/libcupti.so.13"};
  const auto places = search_places(in);
  ASSERT_EQ(places.size(), 1u);
  EXPECT_EQ(places[0].kind, SearchPlace::Kind::File);
  EXPECT_EQ(places[0].path, "/opt/x/libcupti.so.12");
}

TEST(CuptiSearch, OrderFollowsTheInstall) {
  SearchInputs in;
  in.loaded_cupti = {"/k/libcupti.so.12"};
  in.cudart_dirs = {"/venv/lib/python3.12/site-packages/nvidia/cuda_runtime/lib"};
  in.python_dirs = {"/venv/lib/python3.12/site-packages"};
  in.cuda_home = "/opt/cuda-home";
  in.cuda_path = "/opt/cuda-path/";
  in.conda_prefix = "/conda";
  in.toolkit_roots = {"/usr/local/cuda", "/usr/local/cuda-12.8"};
  in.wanted_major = 12;
  const auto p = search_places(in);
  const std::string sp = "/venv/lib/python3.12/site-packages";
  const size_t loaded = index_of(p, "/k/libcupti.so.12");
  const size_t beside = index_of(p, sp + "/nvidia/cuda_runtime/lib");
  const size_t wheel12 = index_of(p, sp + "/nvidia/cuda_cupti/lib");
  const size_t wheel13 = index_of(p, sp + "/nvidia/cu13/lib");
  const size_t triton = index_of(p, sp + "/triton/backends/nvidia/lib/cupti");
  const size_t home = index_of(p, "/opt/cuda-home/extras/CUPTI/lib64");
  const size_t path = index_of(p, "/opt/cuda-path/extras/CUPTI/lib64");
  const size_t conda = index_of(p, "/conda/lib");
  const size_t loader12 = index_of(p, "libcupti.so.12");
  const size_t loader13 = index_of(p, "libcupti.so.13");
  const size_t loader = index_of(p, "libcupti.so");
  const size_t usr = index_of(p, "/usr/local/cuda/extras/CUPTI/lib64");
  const size_t usr128 = index_of(p, "/usr/local/cuda-12.8/lib64");
  EXPECT_EQ(loaded, 0u);
  EXPECT_LT(loaded, beside);
  EXPECT_LT(beside, wheel12);
  EXPECT_LT(wheel12, wheel13);
  EXPECT_LT(wheel13, triton);
  EXPECT_LT(triton, home);
  EXPECT_LT(home, path);
  EXPECT_LT(path, conda);
  EXPECT_LT(conda, loader12);
  EXPECT_LT(loader12, loader13);  // the wanted major first
  EXPECT_LT(loader13, loader);
  EXPECT_LT(loader, usr);
  EXPECT_LT(usr, usr128);
  EXPECT_EQ(p[loaded].kind, SearchPlace::Kind::Loaded);
  EXPECT_EQ(p[loader12].kind, SearchPlace::Kind::LoaderName);
  EXPECT_EQ(p[home].why, "$CUDA_HOME");
}

TEST(CuptiSearch, ToolkitLayoutsAroundLibcudart) {
  SearchInputs in;
  in.cudart_dirs = {"/usr/local/cuda-13.0/targets/x86_64-linux/lib", "/opt/tk/lib64"};
  const auto p = listed(search_places(in));
  auto has = [&](const std::string &s) { return std::find(p.begin(), p.end(), s) != p.end(); };
  EXPECT_TRUE(has("/usr/local/cuda-13.0/extras/CUPTI/lib64"));
  EXPECT_TRUE(has("/usr/local/cuda-13.0/lib64"));
  EXPECT_TRUE(has("/opt/tk/extras/CUPTI/lib64"));
#if defined(__x86_64__)
  EXPECT_TRUE(has("/opt/tk/targets/x86_64-linux/lib"));
#endif
  // Not a wheel: no nvidia/ siblings.
  EXPECT_FALSE(std::any_of(p.begin(), p.end(), [](const std::string &s) {
    return s.find("cuda_cupti") != std::string::npos;
  }));
}

TEST(CuptiSearch, PlacesAreNotRepeated) {
  SearchInputs in;
  in.cudart_dirs = {"/usr/local/cuda/lib64", "/usr/local/cuda/lib64/"};
  in.cuda_home = "/usr/local/cuda";
  in.toolkit_roots = {"/usr/local/cuda"};
  const auto p = listed(search_places(in));
  EXPECT_EQ(std::count(p.begin(), p.end(), "/usr/local/cuda/extras/CUPTI/lib64"), 1);
  EXPECT_EQ(std::count(p.begin(), p.end(), "/usr/local/cuda/lib64"), 1);
}

TEST(CuptiSearch, SonameMajor) {
  EXPECT_EQ(soname_major("libcupti.so.12", "libcupti.so"), 12);
  EXPECT_EQ(soname_major("libcupti.so.13", "libcupti.so"), 13);
  EXPECT_EQ(soname_major("libcudart.so.12", "libcudart.so"), 12);
  EXPECT_EQ(soname_major("libcupti.so.12.8.90", "libcupti.so"), 12);
  EXPECT_EQ(soname_major("libcupti.so.2025.1.0", "libcupti.so"), 0);  // a release, not a major
  EXPECT_EQ(soname_major("libcupti.so", "libcupti.so"), 0);
  EXPECT_EQ(soname_major("libcudart.so.12", "libcupti.so"), 0);
}

TEST(CuptiSearch, ApiVersionToCudaMajor) {
  EXPECT_EQ(cupti_api_major(130001), 13);
  EXPECT_EQ(cupti_api_major(130100), 13);
  EXPECT_EQ(cupti_api_major(19), 12);  // CUDA 12.0
  EXPECT_EQ(cupti_api_major(28), 12);  // CUDA 12.9 Update 1
  EXPECT_EQ(cupti_api_major(18), 11);  // CUDA 11.8
  EXPECT_EQ(cupti_api_major(12), 0);
}

TEST(CuptiSearch, ReadsSonameFromTheFile) {
  EXPECT_EQ(read_elf_soname(PARCAGPU_MOCK_DIR "/libcupti.so.13"), "libcupti.so.13");
  EXPECT_EQ(read_elf_soname(PARCAGPU_MOCK_DIR "/libcupti.so.12"), "libcupti.so.12");
  EXPECT_EQ(read_elf_soname(PARCAGPU_MOCK_DIR "/cudart/libcudart.so.12"), "libcudart.so.12");
  EXPECT_EQ(read_elf_soname("/nonexistent/libcupti.so"), "");
  EXPECT_EQ(read_elf_soname(PARCAGPU_PROBES_D), "");  // not ELF
}

TEST(CuptiTable, CallbacksOfNewerCudaAreLeftToNewerCupti) {
  const SubscribedCallback *launch13 = find_subscribed(CbDomain::Runtime, 505);
  ASSERT_NE(launch13, nullptr);
  EXPECT_FALSE(callback_known_to(*launch13, 12));
  EXPECT_TRUE(callback_known_to(*launch13, 13));
  EXPECT_TRUE(callback_known_to(*launch13, 0));  // unknown: try
  EXPECT_TRUE(callback_known_to(*find_subscribed(CbDomain::Driver, 514), 12));
}

}  // namespace
}  // namespace parcagpu
