#include "activity/activity_switch.h"

#include <thread>

#include "base/log.h"

namespace parcagpu {
namespace {

// How long an announced launch waits for a graph registration's hold-off to end (it takes
// 0.8-1.6 ms on an H200, docs/pc-sampling.md P33).
constexpr uint64_t kHeldOffWaitNs = 20000000ull;  // 20 ms

}  // namespace

bool ActivitySwitch::enable_locked() {
  if (toggle_.on()) return true;
  if (held_off_.load(std::memory_order_relaxed)) return false;
  return toggle_.enable(clock_());
}

void ActivitySwitch::disable_locked(bool force) {
  if (!toggle_.on()) return;
  // Held for PC sampling: once off, CUPTI would not let it on again (hold). At exit (force)
  // PC sampling has been torn down before.
  if (held_ && !force) return;
  toggle_.disable(clock_(), /*ignore_back_off=*/force);
}

// Whether kernel activity should be on now, PC sampling's hold aside: armed, and in the mode
// that keeps it on or around an announced launch (or left on: sticky).
bool ActivitySwitch::wanted_on_locked() const {
  return armed_.load(std::memory_order_relaxed) &&
         (mode_ == ActivityMode::WhileConsumer || active_launches_ != 0 || sticky_.on());
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
  if (on && (active_launches_ != 0 || (toggle_.on() && mode_ == ActivityMode::WhileConsumer)))
    return false;
  held_off_.store(on, std::memory_order_release);
  if (on) {
    disable_locked(/*force=*/true);
    return !toggle_.on();
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
  sticky_.clear();
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
  sticky_.launch_began(now);
  if (active_launches_++ == 0 && !toggle_.on()) {
    sticky_.enabling(now);
    enable_locked();
  }
  return true;
}

void ActivitySwitch::launch_end() {
  if (mode_ != ActivityMode::AroundLaunch) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (active_launches_ == 0) return;  // disarmed meanwhile
  if (--active_launches_ == 0 && !sticky_.on()) disable_locked();
}

void ActivitySwitch::end_sticky_if_quiet() {
  if (mode_ != ActivityMode::AroundLaunch) return;
  const uint64_t now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  if (sticky_.end_if_quiet(now, active_launches_ != 0)) disable_locked();
}

void ActivitySwitch::recheck_sticky() {
  if (mode_ != ActivityMode::AroundLaunch) return;
  const uint64_t now = clock_();
  std::lock_guard<std::mutex> lock(mu_);
  if (sticky_.end_if_not_paying(now) && active_launches_ == 0) disable_locked();
}

void ActivitySwitch::retry_stuck_disable() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!toggle_.on()) return;
  // Activity is on where nothing wants it: a disable failed. Retried here, where no launch
  // comes by to do it.
  if (!wanted_on_locked()) disable_locked();
}

void ActivitySwitch::force_off() {
  std::lock_guard<std::mutex> lock(mu_);
  disable_locked(/*force=*/true);
}

}  // namespace parcagpu
