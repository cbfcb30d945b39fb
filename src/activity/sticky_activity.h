// Whether kernel activity is left on between announced launches (AroundLaunch mode, sticky):
// toggling CUPTI activity costs about 12 us per enable/disable pair on an H100, dearer than
// leaving it on when announced launches come faster than about 1 kHz. Sticky only while most
// launches are announced (else most records would be of unannounced launches), and it ends when
// announced launches pause.
//
// Part of ActivitySwitch (activity_switch.h), which holds it by value and calls it under its lock;
// no CUPTI calls and no clock of its own. Unit-tested in tests/unit/lib/sticky_activity_test.cc.
#pragma once

#include <cstdint>

#include "base/subsystem_links.h"

namespace parcagpu {

class StickyActivity {
 public:
  // `launches`: where LaunchCounts come from (null: sticky is never refused for want of
  // announced launches).
  explicit StickyActivity(const LaunchCountSource *launches) : launches_(launches) {}

  // Kernel activity is left on between announced launches.
  bool on() const { return sticky_; }
  // An announced launch entered at now_ns: after a pause (over 10 ms) the rate seen so far is
  // forgotten, and sticky ends.
  void launch_began(uint64_t now_ns);
  // Kernel activity is about to be switched on for an announced launch at now_ns: sticky from
  // now on when such enables come faster than one per ms on average and most launches are
  // announced.
  void enabling(uint64_t now_ns);
  // The watcher's tick: sticky ends after a pause in announced launches (none in flight), or
  // when most launches are not announced. True if it ended.
  bool end_if_quiet(uint64_t now_ns, bool launches_in_flight);
  bool end_if_not_paying(uint64_t now_ns);
  // Disarmed: no longer sticky.
  void clear() { sticky_ = false; }

 private:
  // At least as many announced launches as unannounced ones since the last look; if not,
  // sticky is not considered again for a second.
  bool pays(uint64_t now_ns);

  const LaunchCountSource *const launches_;
  bool sticky_ = false;
  uint64_t last_begin_ns_ = 0;
  uint64_t last_enable_ns_ = 0;
  uint64_t enable_interval_avg_ns_ = 10000000;  // moving average of the gaps between enables
  LaunchCounts counts_seen_{};                  // launches_->launch_counts() at the last look
  uint64_t banned_until_ns_ = 0;
};

}  // namespace parcagpu
