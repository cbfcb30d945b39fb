// The check a shared object passes before dlopen maps it (elf_check.h), on fabricated ELF files
// and on the mock libcupti cut short.
#include "base/elf_check.h"

#include <elf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

namespace parcagpu {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
#endif

// A small, whole shared object: the ELF header, two program headers (a PT_LOAD of the first
// 0x1000 bytes, a PT_DYNAMIC inside it), 0x1000 bytes of content, then 3 section headers.
struct FakeElf {
  Elf64_Ehdr eh{};
  Elf64_Phdr ph[2]{};
  uint64_t content = 0x1000;
  FakeElf() {
    std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_DYN;
    eh.e_machine = kMachine;
    eh.e_version = EV_CURRENT;
    eh.e_ehsize = sizeof(Elf64_Ehdr);
    eh.e_phoff = sizeof(Elf64_Ehdr);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = 2;
    eh.e_shoff = content;
    eh.e_shentsize = sizeof(Elf64_Shdr);
    eh.e_shnum = 3;
    ph[0].p_type = PT_LOAD;
    ph[0].p_offset = 0;
    ph[0].p_filesz = ph[0].p_memsz = content;
    ph[1].p_type = PT_DYNAMIC;
    ph[1].p_offset = 0x800;
    ph[1].p_filesz = ph[1].p_memsz = 0x100;
  }
  // The file's bytes: the headers, zeros up to `content`, the section headers (zeros).
  std::string bytes() const {
    std::string b(content + 3 * sizeof(Elf64_Shdr), '\0');
    std::memcpy(&b[0], &eh, sizeof eh);
    if (eh.e_phoff == sizeof(Elf64_Ehdr)) std::memcpy(&b[sizeof eh], ph, sizeof ph);
    return b;
  }
};

TEST(ElfCheck, WholeFilePasses) {
  EXPECT_EQ(elf_bytes_problem(FakeElf().bytes()), "");
}

TEST(ElfCheck, TruncatedFilesAreRefused) {
  const std::string whole = FakeElf().bytes();
  EXPECT_EQ(elf_bytes_problem(""), "empty file");
  EXPECT_EQ(elf_bytes_problem(whole.substr(0, 3)), "truncated: 3 bytes, its ELF header needs 64");
  EXPECT_EQ(elf_bytes_problem(whole.substr(0, 40)),
            "truncated: 40 bytes, its ELF header needs 64");
  EXPECT_EQ(elf_bytes_problem(whole.substr(0, 64)),
            "truncated: 64 bytes, its program headers need 176");
  EXPECT_EQ(elf_bytes_problem(whole.substr(0, 200)),
            "truncated: 200 bytes, its segments need 4096");
  EXPECT_EQ(elf_bytes_problem(whole.substr(0, 4095)),
            "truncated: 4095 bytes, its segments need 4096");
  // Segments whole, the section header table (the file's last bytes) cut.
  EXPECT_EQ(elf_bytes_problem(whole.substr(0, 4096)),
            "truncated: 4096 bytes, its section headers need 4288");
  EXPECT_EQ(elf_bytes_problem(whole.substr(0, whole.size() - 1)),
            "truncated: 4287 bytes, its section headers need 4288");
}

TEST(ElfCheck, NotElfOrNotOurs) {
  EXPECT_EQ(elf_bytes_problem(std::string(4096, 'x')), "not an ELF file");
  EXPECT_EQ(elf_bytes_problem("#!/bin/sh\necho libcupti\n"), "not an ELF file");
  FakeElf e32;
  e32.eh.e_ident[EI_CLASS] = ELFCLASS32;
  EXPECT_EQ(elf_bytes_problem(e32.bytes()), "a 32-bit ELF file");
  EXPECT_EQ(elf_bytes_problem(e32.bytes().substr(0, 20)), "not a 64-bit ELF file");
  FakeElf big;
  big.eh.e_ident[EI_DATA] = ELFDATA2MSB;
  EXPECT_EQ(elf_bytes_problem(big.bytes()), "an ELF file of the other byte order");
  FakeElf other;
  other.eh.e_machine = EM_RISCV;
  EXPECT_NE(elf_bytes_problem(other.bytes()).find("an ELF file for machine 243, not "),
            std::string::npos);
  FakeElf exec;
  exec.eh.e_type = ET_REL;
  EXPECT_EQ(elf_bytes_problem(exec.bytes()), "not a shared object (ELF type 1)");
}

TEST(ElfCheck, HeadersPointingOutsideTheFile) {
  FakeElf far_ph;
  far_ph.eh.e_phoff = 1 << 20;  // program headers past the end
  EXPECT_EQ(elf_bytes_problem(far_ph.bytes()),
            "truncated: 4288 bytes, its program headers need 1048688");
  FakeElf wrapping;
  wrapping.eh.e_phoff = ~uint64_t{0} - 8;  // offset + size overflows
  EXPECT_EQ(elf_bytes_problem(wrapping.bytes()),
            "truncated: 4288 bytes, its program headers need more than a file can hold");
  FakeElf no_ph;
  no_ph.eh.e_phnum = 0;
  EXPECT_EQ(elf_bytes_problem(no_ph.bytes()), "no program headers");
  FakeElf odd_ph;
  odd_ph.eh.e_phentsize = 32;
  EXPECT_EQ(elf_bytes_problem(odd_ph.bytes()), "program headers of 32 bytes, not 56");
  FakeElf far_seg;
  far_seg.ph[0].p_filesz = 0x4000;  // a segment past the end
  EXPECT_EQ(elf_bytes_problem(far_seg.bytes()), "truncated: 4288 bytes, its segments need 16384");
  FakeElf far_dyn;
  far_dyn.ph[1].p_offset = 0x2000;  // the dynamic section past the end
  EXPECT_EQ(elf_bytes_problem(far_dyn.bytes()), "truncated: 4288 bytes, its segments need 8448");
  FakeElf seg_wrap;
  seg_wrap.ph[0].p_offset = ~uint64_t{0} - 0x10;
  EXPECT_EQ(elf_bytes_problem(seg_wrap.bytes()),
            "truncated: 4288 bytes, its segments need more than a file can hold");
  FakeElf no_load;
  no_load.ph[0].p_type = PT_NOTE;
  EXPECT_EQ(elf_bytes_problem(no_load.bytes()), "no loadable segments");
  FakeElf far_sh;
  far_sh.eh.e_shoff = 0x10000;
  EXPECT_EQ(elf_bytes_problem(far_sh.bytes()),
            "truncated: 4288 bytes, its section headers need 65728");
  FakeElf stripped;  // no section header table at all: nothing to check there
  stripped.eh.e_shoff = 0;
  stripped.eh.e_shnum = 0;
  EXPECT_EQ(elf_bytes_problem(stripped.bytes()), "");
}

std::string read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

TEST(ElfCheck, TheMockLibcuptiOnDiskWholeAndCut) {
  const std::string lib = PARCAGPU_MOCK_DIR "/libcupti.so.13";
  EXPECT_EQ(elf_file_problem(lib), "");
  const std::string whole = read_file(lib);
  ASSERT_GT(whole.size(), 8192u);
  EXPECT_EQ(elf_bytes_problem(whole), "");
  char dir[] = "/tmp/parcagpu-elf-check-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string cut = std::string(dir) + "/libcupti.so.13";
  for (size_t n : {size_t{64}, size_t{4096}, size_t{8192}, whole.size() - 1}) {
    std::ofstream(cut, std::ios::binary | std::ios::trunc) << whole.substr(0, n);
    const std::string problem = elf_file_problem(cut);
    EXPECT_EQ(problem.rfind("truncated: " + std::to_string(n) + " bytes, its ", 0), 0u)
        << n << ": " << problem;
  }
  unlink(cut.c_str());
  rmdir(dir);
  EXPECT_EQ(elf_file_problem(PARCAGPU_PROBES_D), "not an ELF file");
  EXPECT_EQ(elf_file_problem("/dev/null"), "not a regular file");
  EXPECT_EQ(elf_file_problem("/nonexistent/libcupti.so"),
            "cannot open: No such file or directory");
}

}  // namespace
}  // namespace parcagpu
