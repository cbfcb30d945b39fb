#include "activity/activity_toggle.h"

#include "base/log.h"

namespace parcagpu {
namespace {

// Both can repeat (per launch): once, then counted.
RepeatedError g_enable_failed("activity", "cuptiActivityEnable failed");
RepeatedError g_disable_failed("activity", "cuptiActivityDisable failed");

constexpr uint64_t kSecondNs = 1000000000ull;

// What a failed switch on (true) or off (false) says, and how long it waits before the next try.
struct SwitchFailure {
  RepeatedError &said;
  const char *call;
  const char *then;
  uint64_t retry_ns;
};
const SwitchFailure kSwitchFailures[2] = {
    {g_disable_failed, "Disable", "kernel activity stays on, retried every second and at exit",
     kSecondNs},
    {g_enable_failed, "Enable",
     "retrying every 5 s, launches are still announced but their kernels are not timed",
     5 * kSecondNs},
};

}  // namespace

bool ActivityToggle::enable(uint64_t now_ns) {
  if (on_) return true;
  if (now_ns < enable_retry_after_ns_) return false;
  return switch_to(true, now_ns);
}

void ActivityToggle::disable(uint64_t now_ns, bool ignore_back_off) {
  if (!on_) return;
  if (!ignore_back_off && now_ns < disable_retry_after_ns_) return;
  // Records of kernels launched before the disable are still delivered by later flushes.
  if (!switch_to(false, now_ns)) return;
  // Taken after the call: a kernel that truly ended during it is not judged made-up. (Without
  // cuptiGetTimestamp, said once at start, no record is judged.)
  if (uint64_t ts = 0; cupti_.cuptiGetTimestamp(&ts) == CUPTI_SUCCESS) off_times_.add(ts);
}

// One cuptiActivityEnable or cuptiActivityDisable of CONCURRENT_KERNEL, the recording word
// around it. A failure leaves activity as it was (as CUPTI says: a failed disable leaves it on,
// not toggled again per launch but retried after a pause, by the housekeeping tick when launches
// stop, and at exit), is said once, then counted.
bool ActivityToggle::switch_to(bool on, uint64_t now_ns) {
  constexpr CUpti_ActivityKind kKernels = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  begin_toggle();
  const CUptiResult r =
      on ? cupti_.cuptiActivityEnable(kKernels) : cupti_.cuptiActivityDisable(kKernels);
  const bool switched = r == CUPTI_SUCCESS;
  end_toggle(switched == on);
  if (!switched) {
    const SwitchFailure &f = kSwitchFailures[on];
    (on ? enable_retry_after_ns_ : disable_retry_after_ns_) = now_ns + f.retry_ns;
    f.said.report(r, "cuptiActivity%s(CONCURRENT_KERNEL) failed: %s; %s", f.call,
                  cupti_result_string(cupti_, r), f.then);
    return false;
  }
  on_ = on;
  extra_.follow(on);
  (on ? enables_ : disables_).fetch_add(1, std::memory_order_relaxed);
  return true;
}

// The recording word: a toggle in progress makes its generation odd, its end even again.
void ActivityToggle::begin_toggle() {
  const uint64_t w = recording_.load(std::memory_order_relaxed);
  recording_.store(w + 2, std::memory_order_seq_cst);
}

void ActivityToggle::end_toggle(bool on) {
  const uint64_t w = recording_.load(std::memory_order_relaxed);
  recording_.store(((w >> 1) + 1) << 1 | (on ? 1 : 0), std::memory_order_seq_cst);
}

}  // namespace parcagpu
