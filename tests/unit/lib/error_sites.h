// What a RepeatedError site (base/log.h) counted so far, by its short description: a test of an
// error said once and counted reads it before and after (the sites are process-wide, and
// another test in the same program may have counted at the same one first).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "base/log.h"
#include "repeated_errors.h"

namespace parcagpu::testing_sites {

inline uint64_t site_count(const char *what) { return repeated_error_count(what); }

// A site's message in `err`, the stderr of what made it count: once if it had counted nothing
// `before`, else not at all (a site speaks at its first occurrence in the process only).
inline void expect_said_once(const std::string &err, const char *message, uint64_t before) {
  size_t said = 0;
  for (size_t at = err.find(message); at != std::string::npos; at = err.find(message, at + 1))
    ++said;
  EXPECT_EQ(said, before == 0 ? 1u : 0u) << message << " in: " << err;
}

}  // namespace parcagpu::testing_sites
