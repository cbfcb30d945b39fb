// The SystemTap SDT notes (.note.stapsdt) of an ELF64 file, parsed from its bytes: header-only,
// libc only (no libelf), so that every part of the project can use it: the mock application and
// the GPU benchmark raise the library's semaphores with it (tools/common/sdt_semaphores.h).
// tools/agent keeps its own, agent-faithful parser on purpose.
#pragma once

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace parcagpu::sdt {

struct Note {
  std::string provider;
  std::string name;
  std::string args;        // e.g. "4@%eax -4@%edx 8@%rcx"
  uint64_t pc = 0;         // probe address (link-time)
  uint64_t base = 0;       // .stapsdt.base address at link time
  uint64_t semaphore = 0;  // semaphore address, 0 = none
};

namespace detail {

// The NUL-terminated string at `at` of `elf`, empty if out of bounds or unterminated.
inline std::string_view string_at(std::string_view elf, uint64_t at, uint64_t end) {
  if (at >= end || end > elf.size()) return {};
  const std::string_view rest = elf.substr(at, end - at);
  const size_t z = rest.find('\0');
  return z == std::string_view::npos ? std::string_view() : rest.substr(0, z);
}

// One stapsdt note's descriptor, [desc_at, desc_end) of `elf`: pc, base, semaphore, then
// provider\0 name\0 args\0. False when its strings run out of it.
inline bool parse_note_desc(std::string_view elf, uint64_t desc_at, uint64_t desc_end,
                            Note *note) {
  uint64_t addr[3];
  std::memcpy(addr, elf.data() + desc_at, sizeof addr);
  note->pc = addr[0];
  note->base = addr[1];
  note->semaphore = addr[2];
  uint64_t at = desc_at + sizeof addr;
  bool ok = true;
  for (std::string *field : {&note->provider, &note->name, &note->args}) {
    const std::string_view f = string_at(elf, at, desc_end);
    ok &= at < desc_end && elf[at + f.size()] == '\0';
    field->assign(f);
    at += f.size() + 1;
  }
  return ok;
}

// Appends the stapsdt notes of the note section `s`.
inline void append_section_notes(std::string_view elf, const Elf64_Shdr &s,
                                 std::vector<Note> *notes) {
  auto align4 = [](uint64_t v) { return (v + 3) & ~uint64_t(3); };
  uint64_t off = s.sh_offset;
  const uint64_t end = s.sh_offset + s.sh_size;
  while (off + sizeof(Elf64_Nhdr) <= end && end <= elf.size()) {
    Elf64_Nhdr nh;
    std::memcpy(&nh, elf.data() + off, sizeof nh);
    const uint64_t name_at = off + sizeof nh;
    const uint64_t desc_at = name_at + align4(nh.n_namesz);
    const uint64_t desc_end = desc_at + nh.n_descsz;
    off = desc_at + align4(nh.n_descsz);
    if (off > end || nh.n_type != 3 || string_at(elf, name_at, desc_at) != "stapsdt" ||
        nh.n_descsz < 3 * sizeof(uint64_t))
      continue;
    Note note;
    if (parse_note_desc(elf, desc_at, desc_end, &note)) notes->push_back(std::move(note));
  }
}

}  // namespace detail

// Fills *notes with every stapsdt note of the ELF64 file `elf` (its bytes) and *stapsdt_base with
// the address of its .stapsdt.base section (0 if it has none; a note's addresses move by
// *stapsdt_base - note.base when the file was prelinked). False with a one-line reason in *error
// if it is not an ELF64 file or its section headers are out of bounds; no notes is no error.
inline bool parse_notes(std::string_view elf, std::vector<Note> *notes, uint64_t *stapsdt_base,
                        std::string *error) {
  notes->clear();
  *stapsdt_base = 0;
  if (elf.size() < sizeof(Elf64_Ehdr) || std::memcmp(elf.data(), ELFMAG, SELFMAG) != 0 ||
      elf[EI_CLASS] != ELFCLASS64) {
    *error = "not an ELF64 file";
    return false;
  }
  Elf64_Ehdr eh;
  std::memcpy(&eh, elf.data(), sizeof eh);
  if (eh.e_shoff == 0 || eh.e_shoff + uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr) > elf.size() ||
      eh.e_shstrndx >= eh.e_shnum) {
    *error = "no section headers";
    return false;
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  std::memcpy(sh.data(), elf.data() + eh.e_shoff, sh.size() * sizeof(Elf64_Shdr));
  const Elf64_Shdr &strtab = sh[eh.e_shstrndx];
  std::vector<const Elf64_Shdr *> note_sections;
  for (const Elf64_Shdr &s : sh) {
    const std::string_view n = detail::string_at(elf, strtab.sh_offset + s.sh_name, elf.size());
    if (n == ".note.stapsdt") note_sections.push_back(&s);
    if (n == ".stapsdt.base") *stapsdt_base = s.sh_addr;
  }
  for (const Elf64_Shdr *s : note_sections) detail::append_section_notes(elf, *s, notes);
  return true;
}

}  // namespace parcagpu::sdt
