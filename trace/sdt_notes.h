// Reading the SystemTap SDT notes (.note.stapsdt) of an ELF file, to check that a library has
// the probes before attaching to them (libbpf would also find them, but with a less helpful
// error), and to show them with -v.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace parcagpu::trace {

struct SdtNote {
  std::string provider;
  std::string name;
  std::string args;    // e.g. "4@%eax -4@%edx 8@%rcx"
  uint64_t pc = 0;     // probe address (link-time)
  uint64_t base = 0;   // .stapsdt.base address at link time
  uint64_t semaphore = 0;  // semaphore address, 0 = none
};

// Fills *notes with every stapsdt note of `path`. Returns false with a one-line reason in *error
// when the file cannot be opened or is not an ELF file. A file without notes is not an error.
bool read_sdt_notes(const std::string &path, std::vector<SdtNote> *notes, std::string *error);

}  // namespace parcagpu::trace
