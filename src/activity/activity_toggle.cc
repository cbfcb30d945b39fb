#include "activity/activity_toggle.h"

#include "base/log.h"

namespace parcagpu {
namespace {

// Both can repeat (per launch): once, then counted.
RepeatedError g_enable_failed("activity", "cuptiActivityEnable failed");
RepeatedError g_disable_failed("activity", "cuptiActivityDisable failed");

constexpr uint64_t kSecondNs = 1000000000ull;
constexpr uint64_t kEnableRetryNs = 5 * kSecondNs;
constexpr uint64_t kDisableRetryNs = kSecondNs;

}  // namespace

bool ActivityToggle::enable(uint64_t now_ns) {
  if (on_) return true;
  if (now_ns < enable_retry_after_ns_) return false;
  begin_toggle();
  CUptiResult r = cupti_.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  end_toggle(r == CUPTI_SUCCESS);
  if (r != CUPTI_SUCCESS) {
    enable_retry_after_ns_ = now_ns + kEnableRetryNs;
    g_enable_failed.report(r,
                           "cuptiActivityEnable(CONCURRENT_KERNEL) failed: %s; retrying every "
                           "5 s, launches are still announced but their kernels are not timed",
                           cupti_result_string(cupti_, r));
    return false;
  }
  on_ = true;
  extra_.follow(true);
  enables_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void ActivityToggle::disable(uint64_t now_ns, bool ignore_back_off) {
  if (!on_) return;
  if (!ignore_back_off && now_ns < disable_retry_after_ns_) return;
  // Records of kernels launched before the disable are still delivered by later flushes.
  begin_toggle();
  CUptiResult r = cupti_.cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  end_toggle(r != CUPTI_SUCCESS);
  if (r != CUPTI_SUCCESS) {
    // Still on, as CUPTI says: not toggled again per launch, retried after a pause (by the
    // housekeeping tick when launches stop) and at exit.
    disable_retry_after_ns_ = now_ns + kDisableRetryNs;
    g_disable_failed.report(r,
                            "cuptiActivityDisable(CONCURRENT_KERNEL) failed: %s; kernel "
                            "activity stays on, retried every second and at exit",
                            cupti_result_string(cupti_, r));
    return;
  }
  on_ = false;
  extra_.follow(false);
  disables_.fetch_add(1, std::memory_order_relaxed);
  // Taken after the call: a kernel that truly ended during it is not judged made-up. (Without
  // cuptiGetTimestamp, said once at start, no record is judged.)
  if (uint64_t ts = 0; cupti_.cuptiGetTimestamp(&ts) == CUPTI_SUCCESS) off_times_.add(ts);
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
