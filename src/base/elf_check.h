// A shared object is checked before dlopen maps it. The loader maps a file's segments whatever
// the file's size; pages past the end of a truncated file (a half-copied libcupti on a shared
// mount) are only found missing when touched, and the process dies of SIGBUS inside dlopen. So
// the ELF header and the program headers are read with pread (nothing is mapped) and the file
// must be a 64-bit ELF shared object of this machine whose size covers every loadable segment,
// the dynamic section and the header tables it names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace parcagpu {

// Reads exactly n bytes at offset into buf; false if it cannot.
using ReadAt = std::function<bool(void *buf, size_t n, uint64_t offset)>;

// What stops an ELF file of `size` bytes from being loaded safely, as a phrase ("truncated: 8192
// bytes, its segments need 4939264", "not an ELF file", "a 32-bit ELF file"), or "" when it
// looks whole. Pure: reads only through read_at.
std::string elf_image_problem(uint64_t size, const ReadAt &read_at);

// The same for bytes in memory (the unit tests' fabricated files).
std::string elf_bytes_problem(const std::string &bytes);

// The same for a file on disk: fstat and pread, never mmap. Also refuses what cannot be opened
// and what is not a regular file.
std::string elf_file_problem(const std::string &path);

}  // namespace parcagpu
