// When CUPTI's kernel activity (CONCURRENT_KERNEL) is on: the on/off policy alone, over the
// CuptiApi table, with no buffers and no delivery (ActivityCollector, activity.h, owns one).
//
// Armed while a consumer wants kernels. In WhileConsumer mode activity is on exactly while armed;
// in AroundLaunch mode only while an announced launch is in its API call (launch_begin/end), so
// unannounced launches don't pay for activity collection, unless announced launches come so fast
// that toggling costs more than leaving it on (sticky). PC sampling holds it on while enabled
// (CUPTI would not let it on again then). A failed disable leaves it on, retried after a pause;
// a failed enable is retried after a back-off.
//
// The parts, each held by value (the launch path reaches them with no pointer between):
// ActivityToggle (activity_toggle.h: the CUPTI calls, on or off, the recording word, the
// switch-off times, the back-offs after failures) and StickyActivity (sticky_activity.h: when
// AroundLaunch leaves activity on). The switch keeps the on/off policy: armed, the mode, PC
// sampling's hold and a graph registration's hold-off, the announced launches in flight.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "activity/activity_toggle.h"
#include "activity/sticky_activity.h"
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
      : mode_(mode), clock_(clock), toggle_(cupti), sticky_(launches) {}

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

  // Whether kernels launched now are recorded, for the launch path (lock-free): the word of
  // ActivityToggle::recording_word, read at a launch's ENTER and again at its EXIT
  // (ActivityToggle::recording_on, recording_settled).
  uint64_t recording_word() const { return toggle_.recording_word(); }

  // Whether kernel activity went off (a successful disable) strictly between two times of
  // CUPTI's clock: an announced graph kernel whose record spans a switch-off has a made-up end
  // (activity_off_times.h). Lock-free; any thread.
  bool went_off_between(uint64_t start, uint64_t end) const {
    return toggle_.went_off_between(start, end);
  }

  // The kinds of kActivityKinds the consumers want (wanted_kinds): the extra kinds among them go
  // on and off with kernel activity. Called by the consumer watcher.
  void want_kinds(KindMask wanted) {
    std::lock_guard<std::mutex> lock(mu_);
    toggle_.want_kinds(wanted);
  }

  // Successful cuptiActivityEnable / cuptiActivityDisable calls.
  uint64_t enables() const { return toggle_.enables(); }
  uint64_t disables() const { return toggle_.disables(); }

 private:
  bool enable_locked();
  // `force`: try even within the back-off after a failed disable, and while held (at exit).
  void disable_locked(bool force = false);
  bool wanted_on_locked() const;

  const ActivityMode mode_;
  uint64_t (*const clock_)();
  std::atomic<bool> armed_{false};
  std::atomic<bool> armed_once_{false};

  std::mutex mu_;
  ActivityToggle toggle_;  // under mu_ but for its lock-free reads
  StickyActivity sticky_;  // under mu_
  bool held_ = false;      // hold: kept on while PC sampling is enabled
  // hold_off: kept off while a graph is registered. Written under mu_; atomic because
  // launch_begin waits on it before taking mu_.
  std::atomic<bool> held_off_{false};
  uint32_t active_launches_ = 0;  // AroundLaunch: announced launches inside their API call
};

}  // namespace parcagpu
