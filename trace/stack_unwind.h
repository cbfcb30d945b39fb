// Recovering a user call stack from what the graph_capture_launch BPF program copies: the
// frame-pointer walk (bpf_get_stack) and a window of the raw user stack. Code built without
// frame pointers (libcuda, libcudart) breaks the walk: it ends early, or skips frames when such
// code keeps %rbp untouched. Where the walk cannot be trusted, the window is scanned for return
// addresses (values that point just after a call instruction in an executable mapping); those
// frames are marked `scanned`. No BPF and no /proc here: the code is seen through CodeView.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace parcagpu::trace {

// What the unwinder needs to know about the traced process's code.
class CodeView {
 public:
  enum class Tri { No, Yes, Unknown };
  virtual ~CodeView() = default;
  // addr lies in an executable mapping.
  virtual bool executable(uint64_t addr) = 0;
  // Copies the (up to) n bytes of code that end just before addr into out[0..k), returns k
  // (0 when the code is not file-backed or unreadable). Used to check for a call instruction.
  virtual size_t code_before(uint64_t addr, uint8_t *out, size_t n) = 0;
  // Whether the function containing addr keeps a frame pointer (its prologue sets it up).
  virtual Tri keeps_frame_pointer(uint64_t addr) = 0;
  // addr is the first instruction of a function: a function pointer, not a return address
  // (even when the function before it ends with a call, e.g. to __stack_chk_fail).
  virtual bool starts_function(uint64_t) { return false; }
};

// Whether the instruction that ends right before `bytes + n` is a call (x86-64: e8 rel32 and
// every ff /2 form, with prefixes; arm64: bl / blr / blra*). Unknown when n is too small.
CodeView::Tri ends_with_call(const uint8_t *bytes, size_t n);

// Whether `code` (the first bytes of a function) sets up a frame pointer: x86-64
// push %rbp; mov %rsp,%rbp (after endbr64 or a few instructions of shrink-wrapping);
// arm64 mov x29, sp.
bool sets_up_frame_pointer(const uint8_t *code, size_t n);

struct RawUserStack {
  uint64_t ip = 0, sp = 0, fp = 0;
  std::vector<uint64_t> fp_frames;  // bpf_get_stack: [0] = ip, then return addresses
  uint64_t raw_base = 0;            // user address of raw[0]
  const uint8_t *raw = nullptr;
  size_t raw_len = 0;
};

struct UnwoundFrame {
  uint64_t addr = 0;
  bool scanned = false;  // found by scanning the raw stack, not by the frame-pointer walk
  bool is_return = true; // a return address (symbolize addr - 1); false for frame 0 (the ip)
};

// Innermost first. Frame-pointer frames are kept where the walk can be trusted: from a frame in
// a function that keeps a frame pointer to its caller. Between a frame whose function does not
// (or is unknown) and the next walk frame, and above the last walk frame when the walk ended
// inside the window, the scanned return addresses in that part of the window are inserted.
// Walk frames that are not return addresses (no call before them) end the walk.
std::vector<UnwoundFrame> unwind(const RawUserStack &s, CodeView &code);

}  // namespace parcagpu::trace
