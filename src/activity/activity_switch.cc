#include "activity/activity_switch.h"

#include <thread>

#include "base/log.h"

namespace parcagpu {
namespace {

// Both can repeat (per launch): once, then counted.
RepeatedError g_enable_failed("activity", "cuptiActivityEnable failed");
RepeatedError g_disable_failed("activity", "cuptiActivityDisable failed");

constexpr uint64_t kSecondNs = 1000000000ull;
constexpr uint64_t kDisableRetryNs = kSecondNs;
// After sticky collection was found not to pay, it is not considered again for this long.
constexpr uint64_t kStickyRecheckNs = kSecondNs;

// Toggling CUPTI activity costs about 12 us per enable/disable pair on an H100: cheap at the
// default rate limits (100 + 20 announced launches/s per thread), dearer than leaving activity on
// when nearly every launch is announced. So when enables come faster than one per
// kStickyIntervalNs on average (a moving average, so a few coinciding launches of several threads
// don't count), activity stays on until the gap between announced launches exceeds kQuietNs.
constexpr uint64_t kStickyIntervalNs = 1000000ull;  // 1 ms
constexpr uint64_t kQuietNs = 10000000ull;          // 10 ms
// How long an announced launch waits for a graph registration's hold-off to end (it takes
// 0.8-1.6 ms on an H200, docs/pc-sampling.md P33).
constexpr uint64_t kHeldOffWaitNs = 20000000ull;  // 20 ms

}  // namespace

bool ActivitySwitch::enable_locked() {
  if (on_) return true;
  if (held_off_.load(std::memory_order_relaxed)) return false;
  const uint64_t now = clock_();
  if (now < retry_after_ns_) return false;
  begin_toggle_locked();
  CUptiResult r = cupti_.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  end_toggle_locked(r == CUPTI_SUCCESS);
  if (r != CUPTI_SUCCESS) {
    retry_after_ns_ = now + 5 * kSecondNs;
    g_enable_failed.report(r,
                           "cuptiActivityEnable(CONCURRENT_KERNEL) failed: %s; retrying every "
                           "5 s, launches are still announced but their kernels are not timed",
                           cupti_result_string(cupti_, r));
    return false;
  }
  on_ = true;
  enables_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// The recording word: a toggle in progress makes its generation odd, its end even again.
void ActivitySwitch::begin_toggle_locked() {
  const uint64_t w = recording_.load(std::memory_order_relaxed);
  recording_.store(w + 2, std::memory_order_seq_cst);
}

void ActivitySwitch::end_toggle_locked(bool on) {
  const uint64_t w = recording_.load(std::memory_order_relaxed);
  recording_.store(((w >> 1) + 1) << 1 | (on ? 1 : 0), std::memory_order_seq_cst);
}

void ActivitySwitch::disable_locked(bool force) {
  if (!on_) return;
  // Held for PC sampling: once off, CUPTI would not let it on again (hold). At exit (force)
  // PC sampling has been torn down before.
  if (held_ && !force) return;
  const uint64_t now = clock_();
  if (!force && now < disable_retry_after_ns_) return;
  // Records of kernels launched before the disable are still delivered by later flushes.
  begin_toggle_locked();
  CUptiResult r = cupti_.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  end_toggle_locked(r != CUPTI_SUCCESS);
  if (r != CUPTI_SUCCESS) {
    // Still on, as CUPTI says: not toggled again per launch, retried after a pause (by the
    // housekeeping tick when launches stop) and at exit.
    disable_retry_after_ns_ = now + kDisableRetryNs;
    g_disable_failed.report(r,
                            "cuptiActivityDisable(CONCURRENT_KERNEL) failed: %s; kernel "
                            "activity stays on, retried every second and at exit",
                            cupti_result_string(cupti_, r));
    return;
  }
  on_ = false;
  disables_.fetch_add(1, std::memory_order_relaxed);
  // Taken after the call: a kernel that truly ended during it is not judged made-up. (Without
  // cuptiGetTimestamp, said once at start, no record is judged.)
  if (uint64_t ts = 0; cupti_.cuptiGetTimestamp(&ts) == CUPTI_SUCCESS) off_times_.add(ts);
}

// Whether kernel activity should be on now, PC sampling's hold aside: armed, and in the mode
// that keeps it on or around an announced launch (or left on: sticky).
bool ActivitySwitch::wanted_on_locked() const {
  return armed_.load(std::memory_order_relaxed) &&
         (mode_ == ActivityMode::WhileConsumer || active_launches_ != 0 || sticky_);
}

void ActivitySwitch::hold(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  if (on == held_) return;
  held_ = on;
  if (on) {
    if (enable_locked()) debug_log("kernel activity on while PC sampling is enabled");
    return;
  }
  if (!wanted_on_locked()) disable_locked();
}

bool ActivitySwitch::hold_off(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  // Not while an announced launch still needs it (a graph's kernels running, GraphCompletion's
  // launch_end not come): a graph kernel that finishes while kernel activity is off gets its end
  // at the next enable (docs/cupti-facts.md), an overlap on its stream. Nor in WhileConsumer
  // mode, where nothing says whose kernels are running.
  if (on && (active_launches_ != 0 || (on_ && mode_ == ActivityMode::WhileConsumer))) return false;
  held_off_.store(on, std::memory_order_release);
  if (on) {
    disable_locked(/*force=*/true);
    return !on_;
  }
  if (held_ || wanted_on_locked()) enable_locked();
  return true;
}

bool ActivitySwitch::arm(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  if (on == armed_.load(std::memory_order_relaxed)) return false;
  if (on) {
    // Per-launch mode switches CUPTI on only around announced launches (launch_begin/end).
    if (mode_ == ActivityMode::WhileConsumer && !enable_locked()) return false;
    armed_.store(true, std::memory_order_release);
    armed_once_.store(true, std::memory_order_relaxed);
    debug_log("kernel collection armed (a consumer attached, mode %s)",
              mode_ == ActivityMode::WhileConsumer ? "consumer" : "launch");
    return true;
  }
  disable_locked();
  active_launches_ = 0;
  sticky_ = false;
  armed_.store(false, std::memory_order_release);
  debug_log("kernel collection disarmed (no consumer left)");
  return true;
}

bool ActivitySwitch::launch_begin() {
  if (mode_ != ActivityMode::AroundLaunch || !armed()) return false;
  // A graph registration holds kernel activity off for about a millisecond (hold_off), and
  // between PC sampling episodes launches do not wait at its gate: an announced launch waits it
  // out here rather than go untimed (at most kHeldOffWaitNs, real time; then untimed, its
  // launch counted lost when its kernels never come).
  if (held_off_.load(std::memory_order_acquire)) {
    const uint64_t give_up = monotonic_ns() + kHeldOffWaitNs;
    while (held_off_.load(std::memory_order_acquire) && monotonic_ns() < give_up)
      std::this_thread::yield();
  }
  const uint64_t now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  if (!armed()) return false;
  if (last_begin_ns_ != 0 && now - last_begin_ns_ > kQuietNs) {
    enable_interval_avg_ns_ = kQuietNs;  // a pause: forget the earlier rate
    if (sticky_) {
      sticky_ = false;
      debug_log("announced launches slowed down: kernel activity back to per-launch");
    }
  }
  last_begin_ns_ = now;
  if (active_launches_++ == 0 && !on_) {
    if (last_enable_ns_ != 0) {
      const uint64_t interval = now - last_enable_ns_;
      enable_interval_avg_ns_ =
          enable_interval_avg_ns_ - enable_interval_avg_ns_ / 8 + interval / 8;
      if (!sticky_ && enable_interval_avg_ns_ < kStickyIntervalNs &&
          now >= sticky_banned_until_ns_ && sticky_pays_locked(now)) {
        sticky_ = true;
        debug_log("announced launches come faster than 1 kHz: kernel activity stays on");
      }
    }
    last_enable_ns_ = now;
    enable_locked();
  }
  return true;
}

void ActivitySwitch::launch_end() {
  if (mode_ != ActivityMode::AroundLaunch) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (active_launches_ == 0) return;  // disarmed meanwhile
  if (--active_launches_ == 0 && !sticky_) disable_locked();
}

void ActivitySwitch::end_sticky_if_quiet() {
  if (mode_ != ActivityMode::AroundLaunch) return;
  const uint64_t now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  if (!sticky_ || active_launches_ != 0 || now - last_begin_ns_ < kQuietNs) return;
  sticky_ = false;
  enable_interval_avg_ns_ = kQuietNs;
  disable_locked();
  debug_log("announced launches paused: kernel activity back to per-launch");
}

void ActivitySwitch::retry_stuck_disable() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!on_) return;
  // Activity is on where nothing wants it: a disable failed. Retried here, where no launch
  // comes by to do it.
  if (!wanted_on_locked()) disable_locked();
}

void ActivitySwitch::force_off() {
  std::lock_guard<std::mutex> lock(mu_);
  disable_locked(/*force=*/true);
}

// Sticky collection (AroundLaunch mode at high announced rates) records every kernel. That pays
// when most launches are announced (rate limits raised). When the announced rate is high only
// because many threads launch, each at its rate limit, most records would be of unannounced
// launches: CUPTI's cost on every launch, buffers filling with what is thrown away, and
// announced kernels dropped at the buffer cap. So sticky needs at least as many announced
// launches as unannounced ones since the last look.
bool ActivitySwitch::sticky_pays_locked(uint64_t now) {
  if (!launches_) return true;
  const LaunchCounts c = launches_->launch_counts();
  const uint64_t announced = c.announced - counts_seen_.announced;
  const uint64_t unannounced = c.unannounced - counts_seen_.unannounced;
  counts_seen_ = c;
  if (unannounced <= announced) return true;
  sticky_banned_until_ns_ = now + kStickyRecheckNs;
  return false;
}

void ActivitySwitch::recheck_sticky() {
  if (mode_ != ActivityMode::AroundLaunch) return;
  const uint64_t now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  if (!sticky_ || sticky_pays_locked(now)) return;
  sticky_ = false;
  debug_log("most launches are not announced: kernel activity back to per-launch");
  if (active_launches_ == 0) disable_locked();
}

}  // namespace parcagpu
