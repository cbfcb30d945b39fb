// The CUPTI entry point table: resolved through a fake lookup (which entry points are required,
// which become stubs) and loaded for real from the mock libcupti builds in build/mock (CUDA 13's,
// complete; CUDA 12.0's, which lacks cuptiGetGraphExecId; a copy that hides a required one).
#include "base/cupti_api.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace parcagpu {
namespace {

// A fake libcupti: every entry point resolves except those named.
std::function<void *(const char *)> fake_cupti(std::vector<std::string> absent) {
  return [absent](const char *name) -> void * {
    if (std::find(absent.begin(), absent.end(), name) != absent.end()) return nullptr;
    static int dummy;
    return &dummy;  // never called
  };
}

// The mock driver, loaded as the application's libcuda would be: it says CUDA 13, so a CUPTI of
// another major is a mismatch. Kept loaded (as libcuda stays).
void load_mock_driver() {
  static void *driver = dlopen(PARCAGPU_MOCK_DIR "/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(driver, nullptr) << dlerror();
}

constexpr char kMismatch[] = "no CUPTI of the CUDA the application runs";

size_t count_of(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// load_cupti of the mock CUPTI at `path` under the mock driver: what it made of it and what it
// said on stderr.
struct MockCuptiLoad {
  bool loaded = false;
  std::string error, said;
  CuptiApi api;
};
MockCuptiLoad load_mock_cupti(const char *path) {
  load_mock_driver();
  MockCuptiLoad l;
  testing::internal::CaptureStderr();
  l.loaded = load_cupti(path, &l.api, &l.error);
  l.said = testing::internal::GetCapturedStderr();
  return l;
}

TEST(CuptiTable, MissingOptionalEntryPointsBecomeStubs) {
  CuptiApi api;
  std::string error;
  ASSERT_TRUE(
      resolve_cupti(fake_cupti({"cuptiGetGraphExecId", "cuptiGetTimestamp"}), &api, &error));
  // As strings: identical literals need not share an address (they do not under ASan).
  EXPECT_EQ(std::vector<std::string>(api.missing.begin(), api.missing.end()),
            (std::vector<std::string>{"cuptiGetGraphExecId", "cuptiGetTimestamp"}));
  EXPECT_FALSE(api.available(api.cuptiGetGraphExecId));
  EXPECT_FALSE(api.available(api.cuptiGetTimestamp));
  EXPECT_TRUE(api.available(api.cuptiGetGraphId));
  // The stubs do nothing and say so.
  uint64_t ts = 7;
  EXPECT_EQ(api.cuptiGetTimestamp(&ts), CUPTI_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(ts, 7u);
  uint32_t id = 9;
  EXPECT_EQ(api.cuptiGetGraphExecId(nullptr, &id), CUPTI_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(id, 9u);
}

TEST(CuptiTable, MissingRequiredEntryPointsAreNamed) {
  CuptiApi api;
  std::string error;
  EXPECT_FALSE(
      resolve_cupti(fake_cupti({"cuptiSubscribe", "cuptiActivityFlushAll"}), &api, &error));
  EXPECT_NE(error.find("cuptiSubscribe"), std::string::npos) << error;
  EXPECT_NE(error.find("cuptiActivityFlushAll"), std::string::npos) << error;
  EXPECT_EQ(api.handle, nullptr);
  EXPECT_EQ(api.cuptiGetVersion, nullptr) << "a refused table is left as it was";
}

TEST(CuptiTable, ResultStringsWithoutCuptiGetResultString) {
  CuptiApi empty;
  EXPECT_STREQ(cupti_result_string(empty, CUPTI_ERROR_UNKNOWN), "CUPTI error");
  CuptiApi stubbed;
  std::string error;
  ASSERT_TRUE(resolve_cupti(fake_cupti({"cuptiGetResultString"}), &stubbed, &error));
  EXPECT_STREQ(cupti_result_string(stubbed, CUPTI_ERROR_UNKNOWN), "CUPTI error");
}

TEST(CuptiLoad, ACompleteCuptiIsLoadedSilently) {
  const MockCuptiLoad l = load_mock_cupti(PARCAGPU_MOCK_DIR "/libcupti.so.13");
  ASSERT_TRUE(l.loaded) << l.error;
  const CuptiApi &api = l.api;
  const std::string &said = l.said;
  EXPECT_NE(api.handle, nullptr);
  EXPECT_EQ(api.path, PARCAGPU_MOCK_DIR "/libcupti.so.13");
  EXPECT_EQ(api.major, 13);
  EXPECT_TRUE(api.missing.empty());
  EXPECT_TRUE(api.available(api.cuptiGetGraphExecId));
  EXPECT_TRUE(api.available(api.cuptiPCSamplingGetData));
  EXPECT_EQ(count_of(said, "lacks"), 0u) << said;
  EXPECT_EQ(count_of(said, kMismatch), 0u) << said;
  // The table calls into the library it loaded.
  uint32_t version = 0;
  EXPECT_EQ(api.cuptiGetVersion(&version), CUPTI_SUCCESS);
  EXPECT_EQ(version, api.api_version);
  EXPECT_STREQ(cupti_result_string(api, CUPTI_ERROR_INVALID_PARAMETER),
               "CUPTI_ERROR_INVALID_PARAMETER");
}

// CUDA 12.0's CUPTI under a CUDA 13 driver, named explicitly: used all the same, with one line
// about the mismatch and one about the gap (no cuptiGetGraphExecId) naming what goes without it.
TEST(CuptiLoad, AnOlderCuptiIsUsedAndWhatItLacksIsSaidOnce) {
  const MockCuptiLoad l = load_mock_cupti(PARCAGPU_MOCK_DIR "/libcupti.so.12");
  ASSERT_TRUE(l.loaded) << l.error;
  const CuptiApi &api = l.api;
  const std::string &said = l.said;
  EXPECT_EQ(api.major, 12);
  EXPECT_EQ(std::vector<std::string>(api.missing.begin(), api.missing.end()),
            std::vector<std::string>{"cuptiGetGraphExecId"});
  EXPECT_FALSE(api.available(api.cuptiGetGraphExecId));
  EXPECT_TRUE(api.available(api.cuptiGetGraphId));
  EXPECT_EQ(count_of(said, "lacks"), 1u) << said;
  EXPECT_EQ(count_of(said, "cuptiGetGraphExecId (exec ids in the debug log)"), 1u) << said;
  EXPECT_EQ(count_of(said, kMismatch), 1u) << said;
}

// A libcupti without a required entry point is not used: the mock hides cuptiSubscribe from
// every lookup when MOCK_CUPTI_HIDE names it (read when it is loaded, so a copy of its own).
TEST(CuptiLoad, ACuptiLackingARequiredEntryPointIsRefusedByName) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("parcagpu_cupti_api_test." + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(PARCAGPU_MOCK_DIR "/libcupti.so.13", dir / "libcupti.so.13",
                fs::copy_options::overwrite_existing);
  std::error_code ec;
  fs::create_symlink(PARCAGPU_MOCK_DIR "/libcuda.so.1", dir / "libcuda.so.1", ec);
  setenv("MOCK_CUPTI_HIDE", "cuptiSubscribe,cuptiGetTimestamp", 1);
  CuptiApi api;
  std::string error;
  const bool loaded = load_cupti((dir / "libcupti.so.13").string(), &api, &error);
  unsetenv("MOCK_CUPTI_HIDE");
  fs::remove_all(dir);
  EXPECT_FALSE(loaded);
  EXPECT_NE(error.find("lacks cuptiSubscribe"), std::string::npos) << error;
  EXPECT_EQ(error.find("cuptiGetTimestamp"), std::string::npos) << "optional: " << error;
  EXPECT_EQ(api.handle, nullptr);
  EXPECT_EQ(api.cuptiSubscribe, nullptr);
}

TEST(CuptiLoad, AFileThatIsNotCuptiIsRefused) {
  CuptiApi api;
  std::string error;
  EXPECT_FALSE(load_cupti(PARCAGPU_MOCK_DIR "/cudart/libcudart.so.12", &api, &error));
  EXPECT_NE(error.find("cuptiGetVersion"), std::string::npos) << error;
  EXPECT_EQ(api.handle, nullptr);
  error.clear();
  EXPECT_FALSE(load_cupti("/nonexistent/libcupti.so.13", &api, &error));
  EXPECT_NE(error.find("/nonexistent/libcupti.so.13"), std::string::npos) << error;
}

// libcuda is the one the application loaded (found by its SONAME), with the optional entry points
// graph registration needs.
TEST(CudaLoad, TheLoadedDriverIsUsed) {
  load_mock_driver();
  CudaApi api;
  std::string error;
  ASSERT_TRUE(load_cuda(&api, &error)) << error;
  void *driver = dlopen(PARCAGPU_MOCK_DIR "/libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(driver, nullptr);
  EXPECT_EQ(api.handle, driver);
  EXPECT_EQ(reinterpret_cast<void *>(api.cuDeviceGetCount), dlsym(driver, "cuDeviceGetCount"));
  EXPECT_EQ(reinterpret_cast<void *>(api.cuEventDestroy_v2), dlsym(driver, "cuEventDestroy_v2"));
  EXPECT_TRUE(api.can_register_graphs());
  EXPECT_EQ(reinterpret_cast<void *>(api.cuGraphUpload), dlsym(driver, "cuGraphUpload"));
  dlclose(driver);
}

}  // namespace
}  // namespace parcagpu
