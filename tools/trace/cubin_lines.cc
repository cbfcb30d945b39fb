#include "cubin_lines.h"

#include "parcagpu/abi.h"

#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <iterator>
#include <cstring>
#include <memory>

namespace parcagpu::trace {
namespace {

struct ElfCloser {
  void operator()(Elf *e) const { elf_end(e); }
};
using ElfPtr = std::unique_ptr<Elf, ElfCloser>;

uint64_t section_base(size_t section) { return static_cast<uint64_t>(section) << 32; }

// The sections load() reads: the symbol table, .debug_line and the relocation sections.
struct CubinSections {
  std::vector<GElf_Sym> symbols;
  size_t symbol_names = 0;  // the string table the symbols' names are in
  size_t debug_line = 0;    // its section index; 0: none
  GElf_Shdr debug_line_hdr{};
  std::vector<std::pair<GElf_Shdr, Elf_Scn *>> relas;
};

CubinSections find_sections(Elf *elf, size_t shstrndx) {
  CubinSections found;
  for (Elf_Scn *scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) continue;
    const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
    if (sh.sh_type == SHT_SYMTAB) {
      Elf_Data *d = elf_getdata(scn, nullptr);
      const size_t n = d && sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
      found.symbols.resize(n);
      for (size_t i = 0; i < n; ++i) gelf_getsym(d, static_cast<int>(i), &found.symbols[i]);
      found.symbol_names = sh.sh_link;
    } else if (name && std::strcmp(name, ".debug_line") == 0) {
      found.debug_line = elf_ndxscn(scn);
      found.debug_line_hdr = sh;
    } else if (sh.sh_type == SHT_RELA) {
      found.relas.push_back({sh, scn});
    }
  }
  return found;
}

// Applies .rela.debug_line to the image: each kernel's sequence starts at its section's own base.
void relocate_debug_line(const CubinSections &sections, std::vector<char> *image) {
  const std::vector<GElf_Sym> &symbols = sections.symbols;
  for (const auto &[sh, scn] : sections.relas) {
    if (sh.sh_info != sections.debug_line) continue;
    Elf_Data *d = elf_getdata(scn, nullptr);
    const size_t n = d && sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
    for (size_t i = 0; i < n; ++i) {
      GElf_Rela r;
      if (!gelf_getrela(d, static_cast<int>(i), &r)) continue;
      const size_t sym = GELF_R_SYM(r.r_info);
      if (sym >= symbols.size() || r.r_offset + 8 > sections.debug_line_hdr.sh_size) continue;
      const uint64_t value = section_base(symbols[sym].st_shndx) + symbols[sym].st_value +
                             static_cast<uint64_t>(r.r_addend);
      std::memcpy(image->data() + sections.debug_line_hdr.sh_offset + r.r_offset, &value,
                  sizeof value);
    }
  }
}

// Calls add(address, source file, line, end of sequence) for every row of every line table.
template <typename Add>
void for_each_line(Dwarf *dw, Add &&add) {
  Dwarf_Off off = 0, next = 0;
  Dwarf_CU *cu = nullptr;
  Dwarf_Files *files = nullptr;
  Dwarf_Lines *lines = nullptr;
  size_t nfiles = 0, nlines = 0;
  while (dwarf_next_lines(dw, off, &next, &cu, &files, &nfiles, &lines, &nlines) == 0) {
    for (size_t i = 0; i < nlines; ++i) {
      Dwarf_Line *l = dwarf_onesrcline(lines, i);
      Dwarf_Addr addr = 0;
      int lineno = 0;
      bool end = false;
      if (!l || dwarf_lineaddr(l, &addr) != 0) continue;
      dwarf_lineno(l, &lineno);
      dwarf_lineendsequence(l, &end);
      const char *src = dwarf_linesrc(l, nullptr, nullptr);
      add(addr, src ? src : "?", lineno, end);
    }
    off = next;
  }
}

}  // namespace

bool CubinLines::load(const uint8_t *bytes, size_t size, std::string *error) {
  functions_.clear();
  by_index_.clear();
  by_hash_.clear();
  files_.clear();
  entries_.clear();
  lines_ = 0;
  elf_version(EV_CURRENT);
  // libelf reads from memory it is given; the copy is what the relocations are applied to.
  std::vector<char> image(bytes, bytes + size);
  ElfPtr elf(elf_memory(image.data(), image.size()));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) {
    *error = "not an ELF image";
    return false;
  }
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf.get(), &shstrndx) != 0) {
    *error = elf_errmsg(-1);
    return false;
  }
  // Symbols: every function, and (by index) where each relocation points.
  const CubinSections sections = find_sections(elf.get(), shstrndx);
  for (size_t i = 0; i < sections.symbols.size(); ++i) {
    const GElf_Sym &s = sections.symbols[i];
    if (GELF_ST_TYPE(s.st_info) != STT_FUNC || s.st_shndx == SHN_UNDEF) continue;
    const char *fn = elf_strptr(elf.get(), sections.symbol_names, s.st_name);
    if (!fn || !*fn) continue;
    functions_[fn] = Function{section_base(s.st_shndx) + s.st_value, s.st_size};
    by_index_[static_cast<uint32_t>(i)] = fn;
    by_hash_[parcagpu_name_hash(fn)] = fn;
  }
  if (!sections.debug_line) return true;  // no -lineinfo: kernels known, no lines
  relocate_debug_line(sections, &image);
  // Re-read the patched image with libdw.
  ElfPtr patched(elf_memory(image.data(), image.size()));
  Dwarf *dw = patched ? dwarf_begin_elf(patched.get(), DWARF_C_READ, nullptr) : nullptr;
  if (!dw) return true;  // unreadable DWARF: kernels known, no lines
  std::map<std::string, uint32_t> file_ids;
  for_each_line(dw, [&](uint64_t addr, const std::string &file, int lineno, bool end) {
    auto it = file_ids.find(file);
    if (it == file_ids.end()) {
      it = file_ids.emplace(file, static_cast<uint32_t>(files_.size())).first;
      files_.push_back(file);
    }
    entries_.push_back({addr, it->second, lineno, end});
    lines_++;
  });
  dwarf_end(dw);
  // End-of-sequence rows sort before a row at the same address that starts the next range.
  std::stable_sort(entries_.begin(), entries_.end(), [](const Entry &a, const Entry &b) {
    return a.addr != b.addr ? a.addr < b.addr : a.end > b.end;
  });
  return true;
}

const std::string *CubinLines::function_at(uint32_t index) const {
  auto it = by_index_.find(index);
  return it == by_index_.end() ? nullptr : &it->second;
}

const std::string *CubinLines::only_function_starting(const std::string &prefix) const {
  auto it = functions_.lower_bound(prefix);
  if (it == functions_.end() || it->first.compare(0, prefix.size(), prefix) != 0) return nullptr;
  auto next = std::next(it);
  if (next != functions_.end() && next->first.compare(0, prefix.size(), prefix) == 0) return nullptr;
  return &it->first;
}

const std::string *CubinLines::function_with_hash(uint64_t hash) const {
  auto it = by_hash_.find(hash);
  return it == by_hash_.end() ? nullptr : &it->second;
}

bool CubinLines::lookup(const std::string &function, uint64_t offset, Line *out) const {
  auto f = functions_.find(function);
  if (f == functions_.end() || entries_.empty()) return false;
  const uint64_t addr = f->second.base + offset;
  // The last row at or before addr, which must not end a sequence.
  auto it = std::upper_bound(entries_.begin(), entries_.end(), addr,
                             [](uint64_t a, const Entry &e) { return a < e.addr; });
  if (it == entries_.begin()) return false;
  --it;
  if (it->end || (it->addr >> 32) != (addr >> 32)) return false;
  out->file = files_[it->file];
  out->line = it->line;
  return true;
}

}  // namespace parcagpu::trace
