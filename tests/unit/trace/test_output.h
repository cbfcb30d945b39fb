// What a printer writes to a FILE *, as a string: the unit tests of the text outputs (summary,
// stack and process tables, the PC sampling view) read it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace parcagpu::trace::test_output {

template <class Print>
std::string printed(Print &&print) {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  print(f);
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

}  // namespace parcagpu::trace::test_output
