// Reading the SystemTap SDT notes (.note.stapsdt) of an ELF file, to check that a library has
// the probes before attaching to them (libbpf would also find them, but with a less helpful
// error), and to show them with -v.
#pragma once

#include <string>
#include <vector>

#include "tools/common/sdt_notes.h"

namespace parcagpu::trace {

using SdtNote = parcagpu::sdt::Note;

// Fills *notes with every stapsdt note of `path`. Returns false with a one-line reason in *error
// when the file cannot be opened or is not an ELF file. A file without notes is not an error.
bool read_sdt_notes(const std::string &path, std::vector<SdtNote> *notes, std::string *error);

}  // namespace parcagpu::trace
