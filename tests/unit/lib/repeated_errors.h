// How often a RepeatedError site of the library counted so far (its `what`), for tests that make
// the same error happen again and check it was counted (and, from stderr, said once). Sites are
// static and shared by every test of the program: compare against the count before.
#pragma once

#include <cstdint>
#include <string>

#include "base/log.h"

namespace parcagpu {

inline uint64_t repeated_error_count(const std::string &what) {
  struct Query {
    const std::string &what;
    uint64_t n;
  } q{what, 0};
  for_each_repeated_error(
      [](const RepeatedError &e, void *arg) {
        auto *q = static_cast<Query *>(arg);
        if (q->what == e.what()) q->n += e.count();
      },
      &q);
  return q.n;
}

// Lines of `said` (captured stderr) that contain `text`.
inline int lines_saying(const std::string &said, const std::string &text) {
  int n = 0;
  for (size_t at = said.find(text); at != std::string::npos; at = said.find(text, at + 1)) ++n;
  return n;
}

}  // namespace parcagpu
