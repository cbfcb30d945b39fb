// PC sampling's launch gate: the threads inside a launch call, counted while PC sampling is
// enabled, and the flag that holds new launches while Stop, Get Data or Disable run. On the H100
// a cuptiPCSamplingStop while another thread was launching hung both threads, so those calls wait
// until no other thread is inside a launch call, and launches wait while they run (microseconds).
// No CUPTI; the counting is on the launch path (only while PC sampling is enabled), inline.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>

#include "base/clock.h"

namespace parcagpu {

class PcLaunchGate {
 public:
  // This thread enters its launch call: counted as inside it, unless Stop / Get Data / Disable
  // run right now (then it waits for them, at most wait_ns, and goes in anyway).
  void enter(uint64_t wait_ns) {
    const uint64_t give_up = monotonic_ns() + wait_ns;
    for (;;) {
      in_launch_.fetch_add(1, std::memory_order_seq_cst);
      if (!exclusive_.load(std::memory_order_seq_cst) || monotonic_ns() > give_up) break;
      in_launch_.fetch_sub(1, std::memory_order_seq_cst);
      while (exclusive_.load(std::memory_order_seq_cst) && monotonic_ns() <= give_up)
        pause_briefly();
    }
  }
  void leave() { in_launch_.fetch_sub(1, std::memory_order_seq_cst); }

  // New launches held, and the ones inside their call waited for (the calling thread is not
  // counted: its work runs before its own launch call); false, nothing held, if they did not
  // leave within wait_ns.
  bool exclusive_begin(uint64_t wait_ns) {
    exclusive_.store(true, std::memory_order_seq_cst);
    const uint64_t give_up = monotonic_ns() + wait_ns;
    while (in_launch_.load(std::memory_order_seq_cst) > 0) {
      if (monotonic_ns() > give_up) {
        exclusive_.store(false, std::memory_order_seq_cst);
        return false;
      }
      pause_briefly();
    }
    return true;
  }
  void exclusive_end() { exclusive_.store(false, std::memory_order_seq_cst); }

 private:
  static void pause_briefly() {
    timespec ts{0, 20'000};  // 20 us
    nanosleep(&ts, nullptr);
  }

  std::atomic<int> in_launch_{0};
  std::atomic<bool> exclusive_{false};
};

}  // namespace parcagpu
