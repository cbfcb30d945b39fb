#include "stack_unwind.h"

#include <algorithm>
#include <cstring>
#include <optional>

namespace parcagpu::trace {

#if defined(__aarch64__)

CodeView::Tri ends_with_call(const uint8_t *b, size_t n) {
  if (n < 4) return CodeView::Tri::Unknown;
  uint32_t insn;
  std::memcpy(&insn, b + n - 4, 4);
  if ((insn & 0xfc000000u) == 0x94000000u) return CodeView::Tri::Yes;  // bl
  if ((insn & 0xfffffc1fu) == 0xd63f0000u) return CodeView::Tri::Yes;  // blr
  if ((insn & 0xfefff800u) == 0xd63f0800u) return CodeView::Tri::Yes;  // blraa(z) / blrab(z)
  return CodeView::Tri::No;
}

bool sets_up_frame_pointer(const uint8_t *code, size_t n) {
  for (size_t i = 0; i + 4 <= n && i < 64; i += 4) {
    uint32_t insn;
    std::memcpy(&insn, code + i, 4);
    if (insn == 0x910003fdu) return true;  // mov x29, sp
  }
  return false;
}

#else  // x86-64

namespace {

// Length of an ff /2 (call r/m64) instruction starting at b[0] = 0xff, or 0 when b[1] is not
// a /2 ModRM. `avail` bytes are readable from b.
size_t ff_call_length(const uint8_t *b, size_t avail) {
  if (avail < 2) return 0;
  const uint8_t modrm = b[1];
  const unsigned mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = modrm & 7;
  if (reg != 2) return 0;
  if (mod == 3) return 2;  // call *%reg
  size_t len = 2;
  if (rm == 4) {  // SIB
    if (avail < 3) return 0;
    ++len;
    if (mod == 0 && (b[2] & 7) == 5) len += 4;
  } else if (mod == 0 && rm == 5) {
    len += 4;  // call *disp32(%rip)
  }
  if (mod == 1) len += 1;
  if (mod == 2) len += 4;
  return len;
}

}  // namespace

CodeView::Tri ends_with_call(const uint8_t *b, size_t n) {
  if (n < 2) return CodeView::Tri::Unknown;
  if (n >= 5 && b[n - 5] == 0xe8) return CodeView::Tri::Yes;  // call rel32
  for (size_t len = 2; len <= 7 && len <= n; ++len) {
    const uint8_t *s = b + n - len;
    if (s[0] == 0xff && ff_call_length(s, len) == len) return CodeView::Tri::Yes;
  }
  return n >= 7 ? CodeView::Tri::No : CodeView::Tri::Unknown;
}

bool sets_up_frame_pointer(const uint8_t *code, size_t n) {
  // push %rbp; mov %rsp,%rbp (48 89 e5 or 48 8b ec), near the start: after endbr64, or after
  // a few instructions when the compiler shrink-wrapped the prologue.
  const size_t limit = std::min<size_t>(n, 64);
  for (size_t i = 0; i + 4 <= limit; ++i) {
    if (code[i] != 0x55 || code[i + 1] != 0x48) continue;
    if ((code[i + 2] == 0x89 && code[i + 3] == 0xe5) || (code[i + 2] == 0x8b && code[i + 3] == 0xec))
      return true;
  }
  return false;
}

#endif

namespace {

struct Window {
  const RawUserStack &s;
  uint64_t lo() const { return s.sp; }  // below SP: dead stack, never scanned
  uint64_t hi() const { return s.raw_base + s.raw_len; }
  bool contains(uint64_t addr, size_t n = 8) const {
    return addr >= s.raw_base && addr >= lo() && addr + n <= hi() && addr + n > addr;
  }
  std::optional<uint64_t> word(uint64_t addr) const {
    if (!contains(addr)) return std::nullopt;
    uint64_t v;
    std::memcpy(&v, s.raw + (addr - s.raw_base), 8);
    return v;
  }
};

CodeView::Tri call_before(CodeView &code, uint64_t addr) {
  uint8_t buf[16];
  const size_t n = code.code_before(addr, buf, sizeof buf);
  if (n == 0) return CodeView::Tri::Unknown;
  return ends_with_call(buf, n);
}

bool is_return_address(CodeView &code, uint64_t v) {
  return v > 4096 && code.executable(v) && call_before(code, v) == CodeView::Tri::Yes &&
         !code.starts_function(v);
}

}  // namespace

std::vector<UnwoundFrame> unwind(const RawUserStack &s, CodeView &code) {
  const Window w{s};
  std::vector<uint64_t> chain = s.fp_frames;
  if (chain.empty() || chain[0] != s.ip) chain.insert(chain.begin(), s.ip);

  // Where each walk frame's return address lies in the window: redo the walk from the fp
  // register over the copy; frames beyond the window (or where the copy disagrees) have none.
  constexpr uint64_t kNoSlot = ~0ull;
  std::vector<uint64_t> slot(chain.size(), kNoSlot);
  uint64_t fp = s.fp, prev = s.sp;
  for (size_t k = 1; k < chain.size(); ++k) {
    std::optional<uint64_t> ret = fp >= prev ? w.word(fp + 8) : std::nullopt;
    if (!ret || *ret != chain[k]) break;
    slot[k] = fp + 8;
    prev = fp + 16;
    std::optional<uint64_t> next = w.word(fp);
    if (!next) break;
    fp = *next;
  }

  // The walk ends at the first frame that is not a return address (a register that only looked
  // like a frame pointer), or that goes down the stack.
  size_t valid = 1;
  bool truncated = false;
  for (size_t k = 1; k < chain.size(); ++k, ++valid) {
    const uint64_t v = chain[k];
    if (v <= 4096 || !code.executable(v) || call_before(code, v) == CodeView::Tri::No ||
        (slot[k] != kNoSlot && slot[k - 1] != kNoSlot && k > 1 && slot[k] <= slot[k - 1])) {
      truncated = true;
      break;
    }
  }
  chain.resize(valid);

  // Return addresses anywhere in the window above SP.
  std::vector<std::pair<uint64_t, uint64_t>> scanned;  // (slot, value)
  for (uint64_t a = (w.lo() + 7) & ~7ull; w.contains(a); a += 8) {
    const uint64_t v = *w.word(a);
    if (is_return_address(code, v)) scanned.emplace_back(a, v);
  }

  std::vector<UnwoundFrame> out;
  out.push_back({chain[0], false, false});
  uint64_t lo = s.sp;  // scanned frames strictly above lo ...
  for (size_t k = 0; k < chain.size(); ++k) {
    const bool last = k + 1 == chain.size();
    const uint64_t hi = !last && slot[k + 1] != kNoSlot ? slot[k + 1] : w.hi();  // ... below hi
    const uint64_t fn_addr = k == 0 ? chain[0] : chain[k] - 1;
    const bool fill = code.keeps_frame_pointer(fn_addr) != CodeView::Tri::Yes || (last && truncated);
    if (fill && lo != kNoSlot) {
      for (const auto &[a, v] : scanned)
        if (a >= lo && a < hi && (k == 0 || a > lo)) out.push_back({v, true, true});
    }
    if (last) break;
    out.push_back({chain[k + 1], false, true});
    lo = slot[k + 1];  // kNoSlot once the walk leaves the window: nothing more to scan
  }
  return out;
}

}  // namespace parcagpu::trace
