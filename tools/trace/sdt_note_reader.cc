#include "sdt_note_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace parcagpu::trace {

bool read_sdt_notes(const std::string &path, std::vector<SdtNote> *notes, std::string *error) {
  notes->clear();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  // The whole file: the notes are parsed by the project's one parser (tools/common/sdt_notes.h).
  std::string bytes;
  struct stat st {};
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    bytes.resize(static_cast<size_t>(st.st_size));
    size_t got = 0;
    while (got < bytes.size()) {
      const ssize_t n = read(fd, bytes.data() + got, bytes.size() - got);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    bytes.resize(got);
  }
  close(fd);
  uint64_t stapsdt_base = 0;
  std::string why;
  if (!sdt::parse_notes(bytes, notes, &stapsdt_base, &why)) {
    *error = why == "not an ELF64 file" ? path + " is not an ELF file"
                                        : path + ": cannot read the ELF section headers";
    return false;
  }
  return true;
}

}  // namespace parcagpu::trace
