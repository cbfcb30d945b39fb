#include "sdt_notes.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace parcagpu::trace {
namespace {

constexpr uint32_t kStapsdtNoteType = 3;

// desc = pc, base, semaphore (each address-sized), then provider\0 name\0 args\0.
bool parse_note(const char *desc, size_t size, bool is64, SdtNote *out) {
  const size_t asz = is64 ? 8 : 4;
  if (size < 3 * asz) return false;
  uint64_t addr[3] = {};
  for (int i = 0; i < 3; i++) {
    if (is64) {
      std::memcpy(&addr[i], desc + i * asz, 8);
    } else {
      uint32_t a;
      std::memcpy(&a, desc + i * asz, 4);
      addr[i] = a;
    }
  }
  const char *p = desc + 3 * asz;
  const char *end = desc + size;
  std::string fields[3];
  for (auto &f : fields) {
    const char *z = static_cast<const char *>(std::memchr(p, 0, end - p));
    if (!z) return false;
    f.assign(p, z);
    p = z + 1;
  }
  out->pc = addr[0];
  out->base = addr[1];
  out->semaphore = addr[2];
  out->provider = std::move(fields[0]);
  out->name = std::move(fields[1]);
  out->args = std::move(fields[2]);
  return true;
}

}  // namespace

bool read_sdt_notes(const std::string &path, std::vector<SdtNote> *notes, std::string *error) {
  notes->clear();
  if (elf_version(EV_CURRENT) == EV_NONE) {
    *error = "libelf initialisation failed";
    return false;
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  Elf *elf = elf_begin(fd, ELF_C_READ, nullptr);
  if (!elf || elf_kind(elf) != ELF_K_ELF) {
    if (elf) elf_end(elf);
    close(fd);
    *error = path + " is not an ELF file";
    return false;
  }
  const bool is64 = gelf_getclass(elf) == ELFCLASS64;
  size_t shstrndx = 0;
  bool ok = elf_getshdrstrndx(elf, &shstrndx) == 0;
  for (Elf_Scn *scn = nullptr; ok && (scn = elf_nextscn(elf, scn)) != nullptr;) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_NOTE) continue;
    const char *sname = elf_strptr(elf, shstrndx, shdr.sh_name);
    if (!sname || std::strcmp(sname, ".note.stapsdt") != 0) continue;
    Elf_Data *data = elf_getdata(scn, nullptr);
    if (!data) continue;
    GElf_Nhdr nhdr;
    size_t off = 0, name_off = 0, desc_off = 0;
    while ((off = gelf_getnote(data, off, &nhdr, &name_off, &desc_off)) > 0) {
      const char *buf = static_cast<const char *>(data->d_buf);
      if (nhdr.n_type != kStapsdtNoteType || nhdr.n_namesz != sizeof("stapsdt") ||
          std::memcmp(buf + name_off, "stapsdt", sizeof("stapsdt")) != 0)
        continue;
      SdtNote note;
      if (parse_note(buf + desc_off, nhdr.n_descsz, is64, &note)) notes->push_back(note);
    }
  }
  elf_end(elf);
  close(fd);
  if (!ok) {
    *error = path + ": cannot read the ELF section headers";
    return false;
  }
  return true;
}

}  // namespace parcagpu::trace
