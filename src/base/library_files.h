// Shared library files: what their names and paths say (the SONAME's major, the directory a
// file is in), what an ELF file's DT_SONAME is, and which file the dynamic loader would open for
// a bare name. Used by the CUPTI search (cupti_search.h, cupti_locator.h).
#pragma once

#include <string>
#include <vector>

namespace parcagpu {

bool starts_with(const std::string &s, const char *prefix);
std::string basename_of(const std::string &path);
// Lexical clean-up: no trailing '/', no empty or "." components, ".." folded where possible.
std::string clean_path(const std::string &path);
std::string parent_of(const std::string &path);
// The file's real path, links resolved; "" if it does not exist.
std::string real_path(const std::string &path);
// The names in directory `dir` that begin with `prefix`, sorted; *exists whether dir could be read.
std::vector<std::string> names_in(const std::string &dir, const char *prefix,
                                  bool *exists = nullptr);
// Appends s unless empty or there already.
void push_unique(std::vector<std::string> *v, const std::string &s);

// The number N of "libcupti.so.N" / "libcudart.so.N", or 0.
int soname_major(const std::string &soname, const char *stem);
// DT_SONAME of an ELF shared object on disk, or "" (not ELF, no SONAME, unreadable).
std::string read_elf_soname(const std::string &path);

// The regular file the loader would open for a bare name, looked up as it looks: the
// directories of its search path (RPATH, LD_LIBRARY_PATH, RUNPATH) but the system ones,
// ld.so.cache, the system directories. "" when none (then the loader finds none either).
std::string loader_file_for(const std::string &name);

}  // namespace parcagpu
