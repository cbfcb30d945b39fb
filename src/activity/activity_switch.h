// When CUPTI's kernel activity (CONCURRENT_KERNEL) is on: the on/off policy alone, over the
// CuptiApi table, with no buffers and no delivery (ActivityCollector, activity.h, owns one).
//
// Armed while a consumer wants kernels. In WhileConsumer mode activity is on exactly while armed;
// in AroundLaunch mode only while an announced launch is in its API call (launch_begin/end), so
// unannounced launches don't pay for activity collection, unless announced launches come so fast
// that toggling costs more than leaving it on (sticky). PC sampling holds it on while enabled
// (CUPTI would not let it on again then). A failed disable leaves it on, retried after a pause;
// a failed enable is retried after a back-off.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "activity/activity_off_times.h"
#include "base/clock.h"
#include "base/config.h"
#include "base/cupti_api.h"
#include "base/subsystem_links.h"

namespace parcagpu {

class ActivitySwitch {
 public:
  // `launches`: where LaunchCounts come from (null: sticky is never refused for want of announced
  // launches). `clock`: monotonic ns (a fake one in unit tests).
  ActivitySwitch(const CuptiApi &cupti, ActivityMode mode, const LaunchCountSource *launches,
                 uint64_t (*clock)() = &monotonic_ns)
      : cupti_(cupti), mode_(mode), clock_(clock), launches_(launches) {}

  // Arms (a consumer wants kernels) or disarms. In WhileConsumer mode activity is switched on
  // here; if CUPTI refuses, it stays disarmed. Returns whether it changed: the caller flushes
  // after a disarm. Called by the consumer watcher, never on the launch path.
  bool arm(bool on);
  bool armed() const { return armed_.load(std::memory_order_relaxed); }
  bool armed_once() const { return armed_once_.load(std::memory_order_relaxed); }
  // AroundLaunch mode: at the ENTER and EXIT of each announced launch. launch_begin says whether
  // it counted the launch in (false: not armed, or the other mode); launch_end is for counted
  // launches only.
  bool launch_begin();
  void launch_end();
  // PC sampling is about to be enabled (true) or is disabled everywhere again (false). While PC
  // sampling is enabled CUPTI refuses to enable kernel activity (CUPTI_ERROR_NOT_COMPATIBLE on
  // an H100, docs/cupti-facts.md), but kernel activity enabled before stays on: so it is
  // switched on here, before, and left on until PC sampling is off again.
  void hold(bool on);
  // A graph's kernels are being registered with PC sampling (PcEpisodes::register_graph): an
  // upload registers nothing while kernel activity is on (an H200, docs/pc-sampling.md P33). So
  // it is switched off here (true), whatever wants it, and kept off until released (false), when
  // it goes back to what is wanted. Returns whether it is off. Refused (false, nothing changed)
  // while an announced launch needs it (its graph's kernels still running) and in WhileConsumer
  // mode. An announced launch meanwhile waits in launch_begin until it is released (at most
  // 20 ms; then it goes untimed).
  bool hold_off(bool on);

  // Periodic housekeeping (the watcher's tick), where no launch comes by to do it.
  // Sticky collection ends after a pause in announced launches ...
  void end_sticky_if_quiet();
  // ... and when most launches are not announced.
  void recheck_sticky();
  // A disable that failed is tried again once the back-off is over.
  void retry_stuck_disable();
  // At exit: one more disable whatever the hold and the back-off say (activity left on would go
  // on recording the exiting process's kernels).
  void force_off();

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
  // CUPTI's clock: an announced graph kernel whose record spans a switch-off has a made-up end
  // (activity_off_times.h). Lock-free; any thread.
  bool went_off_between(uint64_t start, uint64_t end) const {
    return off_times_.went_off_between(start, end);
  }

  // Successful cuptiActivityEnable / cuptiActivityDisable calls.
  uint64_t enables() const { return enables_.load(std::memory_order_relaxed); }
  uint64_t disables() const { return disables_.load(std::memory_order_relaxed); }

 private:
  bool enable_locked();
  // Around each cuptiActivityEnable / Disable call: the recording word (recording_word).
  void begin_toggle_locked();
  void end_toggle_locked(bool on);
  // `force`: try even within the back-off after a failed disable, and while held (at exit).
  void disable_locked(bool force = false);
  bool wanted_on_locked() const;
  bool sticky_pays_locked(uint64_t now);

  const CuptiApi &cupti_;
  const ActivityMode mode_;
  uint64_t (*const clock_)();
  std::atomic<bool> armed_{false};
  std::atomic<bool> armed_once_{false};
  std::atomic<uint64_t> enables_{0}, disables_{0};
  ActivityOffTimes off_times_;  // CUPTI's clock at each successful disable
  // Generation << 1 | on: the generation is odd while a toggle is under way.
  std::atomic<uint64_t> recording_{0};

  std::mutex mu_;
  bool on_ = false;    // CUPTI's CONCURRENT_KERNEL activity is enabled
  bool held_ = false;  // hold: kept on while PC sampling is enabled
  // hold_off: kept off while a graph is registered. Written under mu_; atomic because
  // launch_begin waits on it before taking mu_.
  std::atomic<bool> held_off_{false};
  uint32_t active_launches_ = 0;  // AroundLaunch: announced launches inside their API call
  bool sticky_ = false;           // AroundLaunch at a high announced rate: left on
  uint64_t last_begin_ns_ = 0;
  uint64_t last_enable_ns_ = 0;
  uint64_t enable_interval_avg_ns_ = 10000000;  // moving average of the gaps between enables
  uint64_t retry_after_ns_ = 0;                 // after a failed enable, don't hammer CUPTI
  uint64_t disable_retry_after_ns_ = 0;  // ... nor after a failed disable (activity stays on)
  // Sticky collection records every kernel: worth it only while most launches are announced.
  const LaunchCountSource *const launches_;  // null: sticky never refused for want of them
  LaunchCounts counts_seen_{};               // launches_->launch_counts() at the last look
  uint64_t sticky_banned_until_ns_ = 0;
};

}  // namespace parcagpu
