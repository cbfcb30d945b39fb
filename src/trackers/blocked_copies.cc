#include "trackers/blocked_copies.h"

#include "base/log.h"

namespace parcagpu {
namespace {

RepeatedError g_blocked_dropped("trackers", "call times of copies dropped (table full)", "copies");
RepeatedError g_blocked_expired("trackers", "call times of copies expired without their record",
                                "copies");

}  // namespace

BlockedCopies::BlockedCopies(uint32_t capacity, uint64_t max_age_ns)
    : capacity_(capacity > 0 ? capacity : 1), max_age_ns_(max_age_ns) {
  entries_.reserve(capacity_);
}

uint64_t BlockedCopies::expire_locked(uint64_t now_ns) {
  uint64_t n = 0;
  for (size_t i = 0; i < entries_.size();) {
    if (now_ns - entries_[i].put_ns <= max_age_ns_) {
      ++i;
      continue;
    }
    entries_[i] = entries_.back();
    entries_.pop_back();
    ++n;
  }
  stats_.expired += n;
  return n;
}

bool BlockedCopies::put(uint32_t correlation_id, uint64_t blocked_ns, uint64_t now_ns) {
  uint64_t expired = 0;
  bool kept = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_.size() >= capacity_) expired = expire_locked(now_ns);
    kept = entries_.size() < capacity_;
    if (kept) {
      entries_.push_back(Entry{correlation_id, blocked_ns, now_ns});
      ++stats_.kept;
    } else {
      ++stats_.dropped;
    }
    live_.store(static_cast<uint32_t>(entries_.size()), std::memory_order_relaxed);
  }
  // Said outside the lock (the error probe may be slow to fire).
  g_blocked_expired.report_n(expired, kErrDataLost,
                             "%llu call times of copies and fills were older than %llu ms "
                             "with no copy record to take them: let go",
                             static_cast<unsigned long long>(expired),
                             static_cast<unsigned long long>(max_age_ns_ / 1000000));
  if (!kept)
    g_blocked_dropped.report(kErrDataLost,
                             "the table of copy and fill call times is full (%u, "
                             "PARCAGPU_MAX_BLOCKED_COPIES): a copy's CPU blocked time is dropped, "
                             "its record says 0",
                             capacity_);
  return kept;
}

uint64_t BlockedCopies::take(uint32_t correlation_id) {
  if (live_.load(std::memory_order_relaxed) == 0) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (Entry &e : entries_) {
    if (e.correlation_id != correlation_id) continue;
    const uint64_t blocked = e.blocked_ns;
    e = entries_.back();
    entries_.pop_back();
    ++stats_.taken;
    live_.store(static_cast<uint32_t>(entries_.size()), std::memory_order_relaxed);
    return blocked;
  }
  return 0;
}

BlockedCopiesStats BlockedCopies::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BlockedCopiesStats s = stats_;
  s.live = entries_.size();
  return s;
}

}  // namespace parcagpu
