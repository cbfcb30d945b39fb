// CUPTI's kernel activity (CONCURRENT_KERNEL) switched on and off: the cuptiActivityEnable and
// cuptiActivityDisable calls, what they left (on or off, how many succeeded, the recording word
// the launch path reads, CUPTI's clock at each switch-off), and the back-offs after a failure. No
// policy: ActivitySwitch (activity_switch.h) decides when, under its lock, holds it by value and
// calls it. Unit-tested on a fake CUPTI table in tests/unit/lib/activity_toggle_test.cc.
#pragma once

#include <atomic>
#include <cstdint>

#include "activity/activity_off_times.h"
#include "activity/extra_kinds.h"
#include "base/cupti_api.h"

namespace parcagpu {

class ActivityToggle {
 public:
  explicit ActivityToggle(const CuptiApi &cupti) : cupti_(cupti), extra_(cupti) {}

  // CUPTI's CONCURRENT_KERNEL activity is enabled (as its last call said). Under the caller's
  // lock, as the calls below.
  bool on() const { return on_; }
  // Switches it on at now_ns, unless a failed enable less than 5 s ago says to wait (said once,
  // then counted). True if on.
  bool enable(uint64_t now_ns);
  // Switches it off at now_ns, unless a failed disable less than 1 s ago says to wait (and
  // ignore_back_off does not); a failed disable leaves it on. A success is remembered on
  // CUPTI's clock (went_off_between).
  void disable(uint64_t now_ns, bool ignore_back_off);

  // The activity kinds the consumers want (wanted_kinds): the copy and fill kinds among them go
  // on and off with kernel activity (extra_kinds.h). Under the caller's lock.
  void want_kinds(KindMask wanted) { extra_.want(wanted, on_); }

  // Whether kernels launched now are recorded, for the launch path (lock-free): a word read at a
  // launch's ENTER and again at its EXIT. CUPTI decides at the launch call whether its kernels
  // are recorded (docs/cupti-facts.md); if both words are equal and settled, kernel activity was
  // on (recording_on) or off throughout the call, else it was switched meanwhile (a guess).
  uint64_t recording_word() const { return recording_.load(std::memory_order_seq_cst); }
  static bool recording_on(uint64_t word) { return word & 1; }
  static bool recording_settled(uint64_t enter, uint64_t exit) {
    return enter == exit && (enter >> 1) % 2 == 0;
  }
  // Whether kernel activity went off (a successful disable) strictly between two times of
  // CUPTI's clock (activity_off_times.h). Lock-free; any thread.
  bool went_off_between(uint64_t start, uint64_t end) const {
    return off_times_.went_off_between(start, end);
  }
  // Successful cuptiActivityEnable / cuptiActivityDisable calls. Lock-free.
  uint64_t enables() const { return enables_.load(std::memory_order_relaxed); }
  uint64_t disables() const { return disables_.load(std::memory_order_relaxed); }

 private:
  // The CUPTI call that switches it on or off; true if it did.
  bool switch_to(bool on, uint64_t now_ns);
  // Around each cuptiActivityEnable / Disable call: the recording word (recording_word).
  void begin_toggle();
  void end_toggle(bool on);

  const CuptiApi &cupti_;
  bool on_ = false;
  ExtraKinds extra_;  // copies and fills, on and off with on_
  // Generation << 1 | on: the generation is odd while a toggle is under way.
  std::atomic<uint64_t> recording_{0};
  ActivityOffTimes off_times_;  // CUPTI's clock at each successful disable
  std::atomic<uint64_t> enables_{0}, disables_{0};
  uint64_t enable_retry_after_ns_ = 0;   // after a failed enable, don't hammer CUPTI
  uint64_t disable_retry_after_ns_ = 0;  // ... nor after a failed disable (activity stays on)
};

}  // namespace parcagpu
