// What library_files.h says of names, paths and files, past what cupti_locator_test.cc covers
// (soname_major, the mock libraries' SONAMEs): paths cleaned lexically, a directory's names by
// prefix, a link's real file, an ELF file without a SONAME or cut short, and the file the loader
// would open for a bare name.
#include "base/library_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "temp_dir.h"

namespace parcagpu {
namespace {

namespace fs = std::filesystem;
using Names = std::vector<std::string>;

class LibraryFilesTest : public ::testing::Test {
 protected:
  void touch(const std::string &name, const std::string &bytes = "x") {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << bytes;
  }
  TempDir temp_{"library-files"};
  const std::string dir_ = temp_.path();
};

TEST(LibraryPaths, CleanedLexically) {
  const std::pair<const char *, const char *> cleaned[] = {
      {"/usr/./local//cuda/", "/usr/local/cuda"},
      {"/usr/local/cuda/lib64/../extras/CUPTI/lib64", "/usr/local/cuda/extras/CUPTI/lib64"},
      {"/", "/"}};
  for (const auto &[path, want] : cleaned) EXPECT_EQ(clean_path(path), want) << path;
  EXPECT_EQ(parent_of("/usr/local/cuda/lib64/libcudart.so.12"), "/usr/local/cuda/lib64");
  EXPECT_EQ(parent_of("/usr/local/cuda/lib64/"), "/usr/local/cuda");
  EXPECT_EQ(basename_of("/usr/local/cuda/lib64/libcupti.so.12"), "libcupti.so.12");
  EXPECT_TRUE(starts_with("libcupti.so.12", "libcupti.so"));
  EXPECT_FALSE(starts_with("libcupti", "libcupti.so"));
}

TEST(LibraryPaths, PushUniqueKeepsTheFirstOrderAndNoEmpties) {
  std::vector<std::string> v;
  push_unique(&v, "/b");
  push_unique(&v, "");
  push_unique(&v, "/a");
  push_unique(&v, "/b");
  EXPECT_EQ(v, (Names{"/b", "/a"}));
}

TEST_F(LibraryFilesTest, NamesInADirectoryByPrefixSorted) {
  for (const char *n : {"libcupti.so.13", "libcudart.so.12", "libcupti.so", "libcupti.so.12"})
    touch(n);
  bool exists = false;
  EXPECT_EQ(names_in(dir_, "libcupti.so", &exists),
            (Names{"libcupti.so", "libcupti.so.12", "libcupti.so.13"}));
  EXPECT_TRUE(exists);
  EXPECT_TRUE(names_in(dir_ + "/missing", "libcupti.so", &exists).empty());
  EXPECT_FALSE(exists);
}

TEST_F(LibraryFilesTest, RealPathFollowsLinksAndIsEmptyForNothing) {
  touch("libcupti.so.12.8.90");
  fs::create_symlink("libcupti.so.12.8.90", dir_ + "/libcupti.so.12");
  EXPECT_EQ(real_path(dir_ + "/libcupti.so.12"),
            fs::canonical(dir_).string() + "/libcupti.so.12.8.90");
  EXPECT_EQ(real_path(dir_ + "/libcupti.so.13"), "");
}

TEST_F(LibraryFilesTest, NoSonameFromAnElfWithoutOneOrCutShort) {
  // The test program: an ELF executable with a dynamic section and no DT_SONAME.
  EXPECT_EQ(read_elf_soname("/proc/self/exe"), "");
  // The mock libcupti's first 200 bytes: its ELF header, its program headers cut off.
  std::ifstream lib(PARCAGPU_MOCK_DIR "/libcupti.so.13", std::ios::binary);
  std::string head(200, '\0');
  ASSERT_TRUE(lib.read(head.data(), head.size()));
  touch("libcupti.so.13", head);
  EXPECT_EQ(read_elf_soname(dir_ + "/libcupti.so.13"), "");
  EXPECT_EQ(read_elf_soname(dir_), "") << "a directory";
}

TEST(LoaderFile, TheFileTheLoaderOpensOrNone) {
  const std::string libc = loader_file_for("libc.so.6");
  ASSERT_FALSE(libc.empty());
  EXPECT_EQ(basename_of(libc), "libc.so.6");
  EXPECT_TRUE(fs::is_regular_file(libc));
  EXPECT_EQ(read_elf_soname(libc), "libc.so.6");
  EXPECT_EQ(loader_file_for("libparcagpu-no-such-library.so.1"), "");
}

}  // namespace
}  // namespace parcagpu
