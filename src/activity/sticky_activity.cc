#include "activity/sticky_activity.h"

#include "base/log.h"

namespace parcagpu {
namespace {

constexpr uint64_t kSecondNs = 1000000000ull;
// After sticky collection was found not to pay, it is not considered again for this long.
constexpr uint64_t kStickyRecheckNs = kSecondNs;

// Toggling CUPTI activity costs about 12 us per enable/disable pair on an H100: cheap at the
// default rate limits (100 + 20 announced launches/s per thread), dearer than leaving activity on
// when nearly every launch is announced. So when enables come faster than one per
// kStickyIntervalNs on average (a moving average, so a few coinciding launches of several threads
// don't count), activity stays on until the gap between announced launches exceeds kQuietNs.
constexpr uint64_t kStickyIntervalNs = 1000000ull;  // 1 ms
constexpr uint64_t kQuietNs = 10000000ull;          // 10 ms

}  // namespace

void StickyActivity::launch_began(uint64_t now_ns) {
  if (last_begin_ns_ != 0 && now_ns - last_begin_ns_ > kQuietNs) {
    enable_interval_avg_ns_ = kQuietNs;  // a pause: forget the earlier rate
    if (sticky_) {
      sticky_ = false;
      debug_log("announced launches slowed down: kernel activity back to per-launch");
    }
  }
  last_begin_ns_ = now_ns;
}

void StickyActivity::enabling(uint64_t now_ns) {
  if (last_enable_ns_ != 0) {
    const uint64_t interval = now_ns - last_enable_ns_;
    enable_interval_avg_ns_ = enable_interval_avg_ns_ - enable_interval_avg_ns_ / 8 + interval / 8;
    if (!sticky_ && enable_interval_avg_ns_ < kStickyIntervalNs && now_ns >= banned_until_ns_ &&
        pays(now_ns)) {
      sticky_ = true;
      debug_log("announced launches come faster than 1 kHz: kernel activity stays on");
    }
  }
  last_enable_ns_ = now_ns;
}

bool StickyActivity::end_if_quiet(uint64_t now_ns, bool launches_in_flight) {
  if (!sticky_ || launches_in_flight || now_ns - last_begin_ns_ < kQuietNs) return false;
  sticky_ = false;
  enable_interval_avg_ns_ = kQuietNs;
  debug_log("announced launches paused: kernel activity back to per-launch");
  return true;
}

bool StickyActivity::end_if_not_paying(uint64_t now_ns) {
  if (!sticky_ || pays(now_ns)) return false;
  sticky_ = false;
  debug_log("most launches are not announced: kernel activity back to per-launch");
  return true;
}

// Sticky collection (AroundLaunch mode at high announced rates) records every kernel. That pays
// when most launches are announced (rate limits raised). When the announced rate is high only
// because many threads launch, each at its rate limit, most records would be of unannounced
// launches: CUPTI's cost on every launch, buffers filling with what is thrown away, and
// announced kernels dropped at the buffer cap. So sticky needs at least as many announced
// launches as unannounced ones since the last look.
bool StickyActivity::pays(uint64_t now_ns) {
  if (!launches_) return true;
  const LaunchCounts c = launches_->launch_counts();
  const uint64_t announced = c.announced - counts_seen_.announced;
  const uint64_t unannounced = c.unannounced - counts_seen_.unannounced;
  counts_seen_ = c;
  if (unannounced <= announced) return true;
  banned_until_ns_ = now_ns + kStickyRecheckNs;
  return false;
}

}  // namespace parcagpu
