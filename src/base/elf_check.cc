#include "base/elf_check.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace parcagpu {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
constexpr const char *kMachineName = "x86-64";
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
constexpr const char *kMachineName = "aarch64";
#else
constexpr uint16_t kMachine = EM_NONE;  // not checked
constexpr const char *kMachineName = "";
#endif

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr unsigned char kData = ELFDATA2LSB;
#else
constexpr unsigned char kData = ELFDATA2MSB;
#endif

// offset + length, or UINT64_MAX where that overflows (then beyond any file).
uint64_t end_of(uint64_t offset, uint64_t length) {
  return length > UINT64_MAX - offset ? UINT64_MAX : offset + length;
}

// "truncated: 8192 bytes, its segments need 4939264"; `what` carries its verb.
std::string need_more(uint64_t size, const char *what, uint64_t need) {
  return "truncated: " + std::to_string(size) + " bytes, its " + what + " " +
         (need == UINT64_MAX ? std::string("more than a file can hold") : std::to_string(need));
}

}  // namespace

std::string elf_image_problem(uint64_t size, const ReadAt &read_at) {
  unsigned char ident[EI_NIDENT] = {};
  const size_t ident_have = size < EI_NIDENT ? static_cast<size_t>(size) : EI_NIDENT;
  if (ident_have > 0 && !read_at(ident, ident_have, 0)) return "cannot read its ELF header";
  if (std::memcmp(ident, ELFMAG, ident_have < SELFMAG ? ident_have : SELFMAG) != 0 || size == 0)
    return size == 0 ? "empty file" : "not an ELF file";
  if (size < sizeof(Elf64_Ehdr)) {
    if (size > EI_CLASS && ident[EI_CLASS] != ELFCLASS64) return "not a 64-bit ELF file";
    return need_more(size, "ELF header needs", sizeof(Elf64_Ehdr));
  }
  Elf64_Ehdr eh;
  if (!read_at(&eh, sizeof eh, 0)) return "cannot read its ELF header";
  if (eh.e_ident[EI_CLASS] != ELFCLASS64)
    return eh.e_ident[EI_CLASS] == ELFCLASS32 ? "a 32-bit ELF file" : "not a 64-bit ELF file";
  if (eh.e_ident[EI_DATA] != kData) return "an ELF file of the other byte order";
  if (kMachine != EM_NONE && eh.e_machine != kMachine)
    return "an ELF file for machine " + std::to_string(eh.e_machine) + ", not " + kMachineName;
  if (eh.e_type != ET_DYN)
    return "not a shared object (ELF type " + std::to_string(eh.e_type) + ")";
  if (eh.e_phnum == 0 || eh.e_phnum == PN_XNUM) return "no program headers";
  if (eh.e_phentsize != sizeof(Elf64_Phdr))
    return "program headers of " + std::to_string(eh.e_phentsize) + " bytes, not " +
           std::to_string(sizeof(Elf64_Phdr));
  const uint64_t ph_end = end_of(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr));
  if (ph_end > size) return need_more(size, "program headers need", ph_end);
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!read_at(ph.data(), ph.size() * sizeof(Elf64_Phdr), eh.e_phoff))
    return "cannot read its program headers";
  // Every byte the loader maps or reads: the loadable segments and the dynamic section.
  uint64_t segments_end = 0;
  bool loadable = false;
  for (const Elf64_Phdr &p : ph) {
    if (p.p_type != PT_LOAD && p.p_type != PT_DYNAMIC) continue;
    loadable |= p.p_type == PT_LOAD;
    const uint64_t end = end_of(p.p_offset, p.p_filesz);
    if (end > segments_end) segments_end = end;
  }
  if (!loadable) return "no loadable segments";
  if (segments_end > size) return need_more(size, "segments need", segments_end);
  // The section headers are not loaded, but they are the file's last bytes: a table beyond the
  // end is a cut file even where the segments happen to fit.
  if (eh.e_shoff != 0) {
    const uint64_t count = eh.e_shnum != 0 ? eh.e_shnum : 1;  // 0: the count is in entry 0
    const uint64_t sh_end = end_of(eh.e_shoff, count * eh.e_shentsize);
    if (sh_end > size) return need_more(size, "section headers need", sh_end);
  }
  return "";
}

std::string elf_bytes_problem(const std::string &bytes) {
  return elf_image_problem(bytes.size(), [&bytes](void *buf, size_t n, uint64_t offset) {
    if (offset > bytes.size() || n > bytes.size() - offset) return false;
    std::memcpy(buf, bytes.data() + offset, n);
    return true;
  });
}

std::string elf_file_problem(const std::string &path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string("cannot open: ") + std::strerror(errno);
  std::string problem;
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    problem = std::string("cannot stat: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    problem = "not a regular file";
  } else {
    problem = elf_image_problem(
        static_cast<uint64_t>(st.st_size), [fd](void *buf, size_t n, uint64_t offset) {
          size_t done = 0;
          while (done < n) {
            const ssize_t r = pread(fd, static_cast<char *>(buf) + done, n - done,
                                    static_cast<off_t>(offset + done));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return false;
            done += static_cast<size_t>(r);
          }
          return true;
        });
  }
  close(fd);
  return problem;
}

}  // namespace parcagpu
