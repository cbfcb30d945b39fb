// NVTX ranges as frames (--nvtx). The library fires a thread's NVTX records (nvtx_event_batch,
// include/parcagpu/abi.h PARCAGPU_NVTX_*) before it announces a launch of that thread, in the one
// ring buffer: a thread's records arrive before the launches they enclose, so the thread's state
// at a cuda_correlation event is the state at the launch (no timestamp join).
//
// Per thread (pid, tid of the firing thread, the kernel's): the push/pop stack and the start/end
// ranges it started (an end may come from any thread of the process: found by range ID; the range
// shows on the launches of the thread that started it). At a launch, the thread's open ranges,
// outermost (earliest opened) first, become frames "[nvtx] MESSAGE" at the root of the launch's
// stack: every output that shows launch stacks (text, folded, flame graph, pprof, JSON; copies and
// fills too) then reads GPU time by range. Marks are counted.
//
// Bounded: a thread holds at most max_depth pushed and max_started started ranges (more: counted,
// and their pops / ends are not mistaken for others'), at most max_threads threads hold ranges
// (threads without open ranges hold nothing), and a thread's ranges are freed at its exit (the BPF
// side says so) or its process's, counted as left open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "counters.h"
#include "stacks.h"

namespace parcagpu::trace {

// "[nvtx] MESSAGE", the frame of an open range ("[nvtx] (no message)" for one without).
std::string nvtx_frame_name(std::string_view message);

class NvtxRanges {
 public:
  struct Limits {
    size_t max_depth = 64;        // pushed ranges kept per thread
    size_t max_started = 64;      // start/end ranges kept per thread
    size_t max_threads = 16384;   // threads with open ranges
    size_t max_cached = 1 << 16;  // (stack, ranges) -> stack id, cleared when full
  };
  explicit NvtxRanges(Limits limits) : limits_(limits) {}
  NvtxRanges() : NvtxRanges(Limits{}) {}

  // One record of thread (pid, tid), in the thread's order: kind PARCAGPU_NVTX_KIND_*.
  void on_record(uint32_t pid, uint32_t tid, uint16_t kind, uint64_t range_id,
                 std::string_view message);
  // The thread's open ranges' messages, outermost first (empty: none).
  std::vector<std::string_view> open_ranges(uint32_t pid, uint32_t tid) const;
  // The stack of a launch of thread (pid, tid) at `stack`: `stack` itself when the thread has no
  // open range, else the stack with the ranges' frames at its root (interned in `table`; a pseudo
  // stack becomes its name's frame under the ranges).
  uint32_t launch_stack(uint32_t pid, uint32_t tid, uint32_t stack, StackTable *table);
  // A thread exited / a process is gone: its ranges are freed (counted as left open).
  void thread_exit(uint32_t pid, uint32_t tid);
  void forget_process(uint32_t pid);
  size_t threads() const { return threads_.size(); }
  void add_to(Counters *c) const { add_counters(c, c_); }

 private:
  struct Range {
    uint64_t seq = 0;  // opening order within the tool: merges the two kinds outermost first
    uint64_t range_id = 0;
    std::string message;
  };
  struct Thread {
    std::vector<Range> pushed;  // innermost last
    size_t pushed_beyond = 0;   // pushes over max_depth not kept: their pops pop nothing
    std::vector<Range> started;
    bool empty() const { return pushed.empty() && pushed_beyond == 0 && started.empty(); }
  };
  static uint64_t key(uint32_t pid, uint32_t tid) { return (uint64_t)pid << 32 | tid; }
  Thread *thread_for_open(uint32_t pid, uint32_t tid);
  void push(uint32_t pid, uint32_t tid, std::string_view message);
  void pop(uint32_t pid, uint32_t tid);
  void start(uint32_t pid, uint32_t tid, uint64_t range_id, std::string_view message);
  void end(uint32_t pid, uint64_t range_id);
  void release_if_empty(uint64_t k);
  void free_thread(uint64_t k);

  Limits limits_;
  std::unordered_map<uint64_t, Thread> threads_;                  // (pid, tid) with open ranges
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> started_by_;  // (pid, range ID) -> tid
  std::unordered_map<std::string, uint32_t> cache_;               // stack id + messages -> id
  uint64_t seq_ = 0;
  Counters c_;
};

}  // namespace parcagpu::trace
