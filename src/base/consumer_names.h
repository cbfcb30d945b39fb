// Names handed to consumers, as they can keep them. The production consumer keeps a PC record's
// function name to PARCAGPU_PC_FUNCTION_NAME_MAX bytes and a kernel record's name to
// PARCAGPU_KERNEL_NAME_MAX (include/parcagpu/abi.h); a longer name is handed over as its
// stand-in, the name's start and a hash of the whole, which still tells kernels apart and finds
// the full name in the cubin (docs/probe-abi.md, "Names").
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "parcagpu/abi.h"

namespace parcagpu {

// Bytes of a PC function name a consumer may read (the production consumer reads up to 128).
inline constexpr size_t kFunctionNameReadable = PARCAGPU_PC_FUNCTION_NAME_MAX + 1;

// Names of at most `limit` bytes, each with at least `readable` readable bytes, kept for the life
// of the process (a consumer may read them after the firing; there are few distinct kernels).
class FunctionNames {
 public:
  explicit FunctionNames(size_t limit = PARCAGPU_PC_FUNCTION_NAME_MAX,
                         size_t readable = kFunctionNameReadable)
      : limit_(limit), readable_(readable) {}

  // Our copy of `name` (null: ""), or of its stand-in where it is longer than the limit.
  const char *intern(const char *name);
  // `name` itself where it fits the limit or is null (no copy, no lock), else intern(name).
  const char *fit(const char *name);
  size_t size() const;
  size_t stand_ins() const;  // names longer than the limit, handed over as stand-ins

 private:
  const size_t limit_, readable_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<char[]>> names_;
  size_t stand_ins_ = 0;
};

}  // namespace parcagpu
