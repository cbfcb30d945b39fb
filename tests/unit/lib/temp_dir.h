// A directory of the test's own under /tmp, made empty and removed with everything in it when the
// object goes. For the tests that need files (library_files_test.cc, cupti_search_test.cc,
// pc_gpu_locks_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace parcagpu {

class TempDir {
 public:
  explicit TempDir(const char *name) {
    std::string tmpl = std::string("/tmp/parcagpu-") + name + "-XXXXXX";
    if (mkdtemp(tmpl.data())) path_ = tmpl;
    EXPECT_FALSE(path_.empty()) << "mkdtemp " << tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::string &path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace parcagpu
