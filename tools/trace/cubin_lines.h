// Source lines of a cubin's instructions, for PC samples (pcOffset is relative to the start of
// the sample's function).
//
// A cubin is an ELF (EM_CUDA); nvcc -lineinfo gives it a DWARF .debug_line with one sequence per
// kernel, each starting at address 0 of the kernel's own .text.<name> section: which sequence is
// which kernel is said only by .rela.debug_line, whose relocations point each sequence's
// DW_LNE_set_address at its kernel's symbol. libdw reads line tables but does not relocate an
// executable, so the relocations are applied to a copy first, each kernel's section placed at its
// own base (section index << 32); then libdw's dwarf_next_lines reads the table (there is no
// .debug_info, hence no CU to ask) and a lookup is a binary search in the kernel's sequence.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace parcagpu::trace {

class CubinLines {
 public:
  struct Line {
    std::string file;  // as the line table names it (directory/name)
    int line = 0;
  };

  // Reads the kernels and, if the cubin has one, its line table. False (and *error) when the
  // bytes are not an ELF; a cubin without line information loads with has_lines() false.
  bool load(const uint8_t *bytes, size_t size, std::string *error);
  bool has_lines() const { return lines_ > 0; }
  size_t functions() const { return functions_.size(); }

  // The line of the instruction at `offset` bytes into `function` (its mangled name).
  bool lookup(const std::string &function, uint64_t offset, Line *out) const;

  // The function whose symbol is entry `index` of the symbol table: CUPTI's functionIndex of a
  // PC record ("the function's unique symbol index in the module"). Null if none.
  const std::string *function_at(uint32_t index) const;
  bool has_function(const std::string &name) const { return functions_.count(name) != 0; }
  // The one function whose name starts with `prefix`; null if none or several do.
  const std::string *only_function_starting(const std::string &prefix) const;
  // The function whose name has parcagpu_name_hash() `hash`: the name behind the library's
  // stand-in for a name longer than a consumer keeps (include/parcagpu/abi.h). Null if none.
  const std::string *function_with_hash(uint64_t hash) const;

 private:
  struct Entry {
    uint64_t addr;  // (section << 32) + offset
    uint32_t file;  // index into files_
    int line;
    bool end;       // end of a sequence: no line from here
  };
  struct Function {
    uint64_t base;  // (section << 32) + symbol value
    uint64_t size;
  };
  std::map<std::string, Function> functions_;
  std::map<uint32_t, std::string> by_index_;  // symbol-table index -> function name
  std::map<uint64_t, std::string> by_hash_;   // parcagpu_name_hash -> function name
  std::vector<std::string> files_;
  std::vector<Entry> entries_;  // sorted by addr
  size_t lines_ = 0;
};

}  // namespace parcagpu::trace
