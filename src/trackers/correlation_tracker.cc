#include "trackers/correlation_tracker.h"

namespace parcagpu {

bool CorrelationTracker::insert(uint32_t id, LaunchKind kind, uint64_t now_ns, uint32_t expected) {
  std::lock_guard<std::mutex> lock(mu_);
  if (kind == LaunchKind::Eager && expected == 0) expected = 1;
  auto it = entries_.find(id);
  if (it != entries_.end()) erase_locked(it);  // an ID reused after wrap-around: start afresh
  if (entries_.size() >= max_entries_) {
    expire_locked(now_ns);
    while (entries_.size() >= max_entries_ && !settled_.empty()) {
      auto done = entries_.find(settled_.front());
      settled_.pop_front();
      if (done == entries_.end()) continue;
      erase_locked(done);
      ++stats_.completed;
      ++stats_.retired_at_cap;
    }
    if (entries_.size() >= max_entries_) {
      ++stats_.refused;
      refused_.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  }
  entries_.emplace(id, Entry{now_ns, now_ns, 0, expected, kind});
  if (kind == LaunchKind::Eager && expected > 1) add_own_ids_locked(id, expected - 1);
  order_.push_back(id);
  ++pending_;
  ++stats_.inserted;
  // The queues hold stale IDs of completed entries; keep them from growing unbounded.
  const size_t limit = 2 * static_cast<size_t>(max_entries_) + 64;
  for (std::deque<uint32_t> *q : {&order_, &settled_}) {
    if (q->size() <= limit) continue;
    std::deque<uint32_t> live;
    for (uint32_t o : *q)
      if (entries_.count(o)) live.push_back(o);
    q->swap(live);
  }
  return true;
}

void CorrelationTracker::add_own_ids_locked(uint32_t id, uint32_t count) {
  if (next_own_id_ - count < kOwnIdTop - kOwnIdSpan) next_own_id_ = kOwnIdTop;  // start over
  own_ids_[id] = OwnIds{next_own_id_, count, false, false};
  next_own_id_ -= count;
}

uint32_t CorrelationTracker::take_own_ids(uint32_t id, uint32_t *first) {
  std::lock_guard<std::mutex> lock(mu_);
  auto o = own_ids_.find(id);
  if (o == own_ids_.end() || o->second.announced) return 0;
  *first = o->second.first;
  const uint32_t n = o->second.count;
  if (o->second.entry_gone)
    own_ids_.erase(o);
  else
    o->second.announced = true;
  return n;
}

bool CorrelationTracker::on_kernel(uint32_t id, uint64_t now_ns, uint32_t *deliver_as) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    ++stats_.kernels_unmatched;
    return false;
  }
  Entry &e = it->second;
  if (deliver_as) *deliver_as = id;
  if (deliver_as && e.kernels_seen > 0 && !own_ids_.empty()) {
    auto o = own_ids_.find(id);
    if (o != own_ids_.end() && e.kernels_seen - 1 < o->second.count)
      *deliver_as = o->second.first - (e.kernels_seen - 1);
  }
  if (e.kernels_seen == 0) {
    --pending_;
    if (e.kind == LaunchKind::Graph && e.expected == 0) settled_.push_back(id);
  }
  ++e.kernels_seen;
  e.last_ns = now_ns;
  ++stats_.kernels_matched;
  if (e.expected != 0 && e.kernels_seen >= e.expected) {
    ++stats_.completed;
    erase_locked(it);
  }
  return true;
}

bool CorrelationTracker::contains(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.count(id) != 0;
}

void CorrelationTracker::remove(uint32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  own_ids_.erase(id);  // never to be announced
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  erase_locked(it);
  ++stats_.removed;
}

uint64_t CorrelationTracker::drop_all() {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const auto &[id, e] : entries_) {
    if (e.kind == LaunchKind::Graph && e.expected == 0 && e.kernels_seen > 0) {
      ++stats_.completed;
    } else {
      ++n;
    }
  }
  entries_.clear();
  own_ids_.clear();
  pending_.store(0, std::memory_order_relaxed);
  order_.clear();
  settled_.clear();
  stats_.dropped_unheard += n;
  return n;
}

uint64_t CorrelationTracker::expire(uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  return expire_locked(now_ns);
}

uint64_t CorrelationTracker::expire_locked(uint64_t now_ns) {
  uint64_t n = 0;
  // Entries are aged from the front of the insertion order. A graph entry that is still
  // receiving kernels is kept while its last kernel is recent (moved to the back). Each call
  // looks at every queued ID at most once.
  for (size_t budget = order_.size(); budget > 0 && !order_.empty(); --budget) {
    auto it = entries_.find(order_.front());
    if (it == entries_.end()) {
      order_.pop_front();
      continue;
    }
    const Entry &e = it->second;
    if (now_ns < e.inserted_ns + max_age_ns_) break;
    order_.pop_front();
    if (now_ns < e.last_ns + max_age_ns_) {
      order_.push_back(it->first);
      continue;
    }
    if (e.kernels_seen == 0) ++stats_.expired_unseen;
    // A graph whose kernel count was unknown is done once it goes quiet: not a loss.
    if (e.kind == LaunchKind::Graph && e.expected == 0 && e.kernels_seen > 0)
      ++stats_.completed;
    else
      ++stats_.expired;
    erase_locked(it);
    ++n;
  }
  return n;
}

void CorrelationTracker::erase_locked(std::unordered_map<uint32_t, Entry>::iterator it) {
  if (it->second.kernels_seen == 0) --pending_;
  if (!own_ids_.empty()) {
    // Own IDs outlive their entry until the launch path took them for its announcement.
    auto o = own_ids_.find(it->first);
    if (o != own_ids_.end() && o->second.announced)
      own_ids_.erase(o);
    else if (o != own_ids_.end())
      o->second.entry_gone = true;
  }
  entries_.erase(it);
}

uint64_t CorrelationTracker::pending() const { return pending_.load(std::memory_order_relaxed); }

TrackerStats CorrelationTracker::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  TrackerStats s = stats_;
  s.live = entries_.size();
  s.pending = pending_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace parcagpu
