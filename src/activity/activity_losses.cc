#include "activity/activity_losses.h"

#include "base/clock.h"
#include "base/log.h"
#include "trackers/correlation_tracker.h"

namespace parcagpu {
namespace {

// Each can repeat (per housekeeping round, per consumer detach): once, then counted.
RepeatedError g_refused("activity", "launches not announced: the correlation tracker was full",
                        "launches");
RepeatedError g_expired("activity", "announced launches given up without their kernels",
                        "launches");
RepeatedError g_launches_unheard("activity",
                                 "announced launches still waiting for kernels when the last "
                                 "kernel consumer left",
                                 "launches");

constexpr uint64_t kProgressIntervalNs = 60'000'000'000ull;  // repeated errors: a line a minute

// A loss count that grew since it was last said (`seen`): the growth is said as lost data, fmt
// taking the growth and the setting that bounds it.
[[gnu::format(printf, 4, 0)]] void say_growth(RepeatedError &error, uint64_t total, uint64_t &seen,
                                              const char *fmt, uint32_t setting) {
  if (total > seen)
    error.report_n(total - seen, kErrDataLost, fmt, static_cast<unsigned long long>(total - seen),
                   setting);
  seen = total;
}

}  // namespace

void ActivityLosses::last_consumer_left() {
  const uint64_t n = tracker_.drop_all();
  if (n == 0) return;
  launches_unheard_.fetch_add(n, std::memory_order_relaxed);
  g_launches_unheard.report_n(n, kErrDataLost,
                              "%llu announced launches were still waiting for their kernel "
                              "records when the last kernel consumer (activity_batch, "
                              "kernel_executed) detached: their kernels reach no consumer (a "
                              "consumer should detach cuda_correlation first and drain)",
                              static_cast<unsigned long long>(n));
}

void ActivityLosses::account(bool at_exit) {
  const TrackerStats t = tracker_.stats();
  say_growth(g_refused, t.refused, refused_seen_,
             "%llu launches were not announced: the correlation tracker was full "
             "(PARCAGPU_MAX_OUTSTANDING=%u launches waiting for kernel records, which arrive too "
             "late for this launch rate); lower the rate limits or raise the cap",
             config_.max_outstanding);
  say_growth(g_expired, t.expired, expired_seen_,
             "%llu announced launches got no (or not all) kernel records within "
             "PARCAGPU_MAX_AGE_MS=%u (failed launches, or records CUPTI dropped): given up",
             config_.max_age_ms);
  const uint64_t now = monotonic_ns();
  if (!at_exit && now >= next_progress_ns_) {
    if (next_progress_ns_ != 0) report_repeated_error_progress();
    next_progress_ns_ = now + kProgressIntervalNs;
  }
  if (at_exit && t.pending > 0) say_pending_at_exit(t.pending);
}

// Said as an error when nothing said before explains it (records dropped, failing entry points,
// a libcupti lacking some): kernels still running at exit, say.
void ActivityLosses::say_pending_at_exit(uint64_t pending) {
  bool explained = !cupti_.missing.empty();
  for_each_repeated_error([](const RepeatedError &, void *e) { *static_cast<bool *>(e) = true; },
                          &explained);
  if (explained)
    debug_log("%llu announced launches had no kernel record at exit (see above)",
              static_cast<unsigned long long>(pending));
  else
    report_error(kErrDataLost, "activity",
                 "%llu announced launches had no kernel record at exit: their kernels are not "
                 "delivered",
                 static_cast<unsigned long long>(pending));
}

}  // namespace parcagpu
