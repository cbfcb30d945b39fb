// Walking an ELF file open in libelf: its PT_LOAD segments and its symbols (.symtab and
// .dynsym), for the readers of a process's files that look for a few symbols of their own
// (python.cc: _PyRuntime and Py_Version; autograd.cc: the vtables of autograd nodes).
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <cstddef>

namespace parcagpu::trace {

// f(const GElf_Phdr &) for each PT_LOAD program header.
template <typename F>
void for_each_load_segment(Elf *elf, F f) {
  size_t nph = 0;
  if (elf_getphdrnum(elf, &nph) != 0) return;
  for (size_t i = 0; i < nph; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD) f(ph);
  }
}

// f(const GElf_Sym &, const char *name) for each defined symbol of the symbol tables (name
// never null).
template <typename F>
void for_each_defined_symbol(Elf *elf, F f) {
  for (Elf_Scn *scn = nullptr; (scn = elf_nextscn(elf, scn));) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) || !sh.sh_entsize)
      continue;
    Elf_Data *d = elf_getdata(scn, nullptr);
    if (!d) continue;
    const size_t n = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < n; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(d, static_cast<int>(i), &sym) || sym.st_shndx == SHN_UNDEF) continue;
      if (const char *name = elf_strptr(elf, sh.sh_link, sym.st_name)) f(sym, name);
    }
  }
}

}  // namespace parcagpu::trace
