// Reads a field at a byte offset of a record laid out by CUPTI (activity buffers) or by the
// probe ABI (pc_sample_batch records), whatever the offset's alignment. C++ only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace parcagpu {

template <typename T>
T record_field(const uint8_t *record, size_t offset) {
  T v;
  std::memcpy(&v, record + offset, sizeof v);
  return v;
}

}  // namespace parcagpu
