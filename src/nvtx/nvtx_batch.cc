#include "nvtx/nvtx_batch.h"

namespace parcagpu {
namespace {

// Appends the UTF-8 encoding of `c` at out[*n] if it fits before `limit`; false if not.
bool put_utf8(uint32_t c, char *out, uint32_t *n, uint32_t limit) {
  if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) c = 0xfffd;  // not a character: U+FFFD
  char b[4];
  uint32_t len;
  if (c < 0x80) {
    b[0] = static_cast<char>(c);
    len = 1;
  } else if (c < 0x800) {
    b[0] = static_cast<char>(0xc0 | (c >> 6));
    b[1] = static_cast<char>(0x80 | (c & 0x3f));
    len = 2;
  } else if (c < 0x10000) {
    b[0] = static_cast<char>(0xe0 | (c >> 12));
    b[1] = static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    b[2] = static_cast<char>(0x80 | (c & 0x3f));
    len = 3;
  } else {
    b[0] = static_cast<char>(0xf0 | (c >> 18));
    b[1] = static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    b[2] = static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    b[3] = static_cast<char>(0x80 | (c & 0x3f));
    len = 4;
  }
  if (*n + len > limit) return false;  // never half a character
  for (uint32_t i = 0; i < len; ++i) out[(*n)++] = b[i];
  return true;
}

}  // namespace

bool NvtxBatch::copy_text(const NvtxText &text, char *out) {
  constexpr uint32_t kLimit = kMessageBytes - 1;
  uint32_t n = 0;
  bool whole = true;
  if (text.ascii) {
    while (text.ascii[n] && n < kLimit) {
      out[n] = text.ascii[n];
      ++n;
    }
    whole = text.ascii[n] == 0;
    // Cut before a character, never inside one (a UTF-8 continuation byte is 10xxxxxx).
    if (!whole)
      while (n > 0 && (static_cast<unsigned char>(text.ascii[n]) & 0xc0) == 0x80) --n;
  } else if (text.wide) {
    for (const wchar_t *w = text.wide; *w; ++w)
      if (!put_utf8(static_cast<uint32_t>(*w), out, &n, kLimit)) {
        whole = false;
        break;
      }
  }
  out[n] = 0;
  return whole;
}

void NvtxBatch::add(const NvtxEventRecord &rec, const NvtxText &text, Copied *copied) {
  const uint32_t i = count_;
  char *message = messages_[i];
  *copied = copy_text(text, message) ? Copied::kWhole : Copied::kTruncated;
  records_[i] = rec;
  records_[i].message = message;
  pointers_[i] = &records_[i];
  count_ = i + 1;
}

}  // namespace parcagpu
