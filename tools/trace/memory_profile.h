// Copies and fills by launch stack (memory_batch, include/parcagpu/abi.h): their GPU time and
// bytes beside the kernels. Their GPU time also goes into the GPU profile itself (text, folded,
// pprof) under a frame of their own ("[memcpy HtoD]", "[memset]", ...: memory_frame_name); this
// keeps what only copies have: bytes, how many, and the CPU time their callers spent blocked in
// the calls that wait (the library's measure of each call, ENTER to EXIT: memory_batch's cpu
// blocked; a call waits if its API is synchronous or its host memory pageable), beside those
// copies' GPU time, and every copy call's time. A report section and a JSON key ("memory") of their
// own, as an extension's.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "extension.h"

namespace parcagpu::trace {

// One copy or fill as memory_batch gave it.
struct MemoryCopy {
  uint64_t bytes = 0;
  uint64_t gpu_ns = 0;
  bool waits = false;           // its call waits for it (Tracer's copy_call_waits)
  uint64_t cpu_blocked_ns = 0;  // how long its call held the thread
};

// The frame a copy or fill is shown as: "[memcpy HtoD]", "[memcpy PtoP]", "[memset]", ...
const char *memory_frame_name(uint32_t kind, uint8_t copy_kind);

class MemoryProfile : public Extension {
 public:
  // frames(stack id): the stack's frames, innermost first, as the reports print them.
  explicit MemoryProfile(std::function<std::vector<std::string>(uint32_t)> frames)
      : frames_(std::move(frames)) {}
  const char *name() const override { return "memory"; }
  bool wants(uint32_t) const override { return false; }  // fed by the tracer at each match
  void on_event(const pt_header &, const void *, size_t) override {}
  // One copy or fill matched to its launch at `stack`, shown as `what` (memory_frame_name).
  void add(uint32_t stack, const char *what, const MemoryCopy &copy);
  void add_json(Json &summary) const override;
  void print(FILE *out) const override;

 private:
  struct Cell {
    uint64_t count = 0, bytes = 0, gpu_ns = 0;
    uint64_t sync_count = 0, sync_gpu_ns = 0;  // the calls that wait
    uint64_t cpu_blocked_ns = 0;               // ... the time their callers were blocked
    uint64_t call_ns = 0;                      // every call's time
  };
  std::function<std::vector<std::string>(uint32_t)> frames_;
  std::map<std::pair<uint32_t, std::string>, Cell> cells_;  // (stack, what)
  Cell total_;
};

}  // namespace parcagpu::trace
