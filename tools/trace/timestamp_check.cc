#include "timestamp_check.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

namespace parcagpu::trace {
namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;

uint64_t clock_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * kSecond + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

const char *impossible_name(Impossible r) {
  switch (r) {
    case Impossible::kReversed: return "reversed";
    case Impossible::kLongerThanProcess: return "longer_than_process";
    case Impossible::kLongerThanLaunch: return "longer_than_launch";
    case Impossible::kStreamOverlap: return "stream_overlap";
    case Impossible::kDeviceOverfull: return "device_overfull";
    case Impossible::kNone:
    case Impossible::kCount: break;
  }
  return "";
}

uint64_t TimestampCheck::total() const {
  uint64_t n = 0;
  for (size_t i = 1; i < counts_.size(); ++i) n += counts_[i];
  return n;
}

TimestampCheck::Interval *TimestampCheck::overlapped(Window &w, const KernelTimes &k) const {
  for (uint32_t i = 0; i < w.n; ++i) {
    Interval &v = w.iv[i];
    if (v.correlation == k.correlation) continue;  // one graph launch's kernels may run side by side
    const uint64_t lo = std::max(v.start, k.start), hi = std::min(v.end, k.end);
    if (hi > lo && hi - lo > limits_.overlap_ns) return &v;
  }
  return nullptr;
}

bool TimestampCheck::forget_if_suspect(Window *w, Interval *v, const KernelTimes &k) {
  constexpr uint32_t kSuspectAfter = 2;  // the second record it overlaps
  if (++v->overlapped < kSuspectAfter || v->end - v->start <= k.end - k.start) return false;
  *v = w->iv[--w->n];
  return true;
}

void TimestampCheck::remember(Window *w, const KernelTimes &k) {
  if (w->n < kWindow) {
    w->iv[w->n++] = {k.start, k.end, k.correlation, 0};
    return;
  }
  // Full: the new one takes the place of the one that ended first, unless it ended before them all.
  Interval *oldest = &w->iv[0];
  for (Interval &v : w->iv)
    if (v.end < oldest->end) oldest = &v;
  if (k.end > oldest->end) *oldest = {k.start, k.end, k.correlation, 0};
}

bool TimestampCheck::fits_device(Device *d, uint64_t stream_key, const KernelTimes &k) const {
  uint64_t first = k.start / kSecond, last = (k.end > k.start ? k.end - 1 : k.end) / kSecond;
  if (last - first >= kSeconds) first = last - kSeconds + 1;  // a long one: its last seconds
  struct Piece {
    Bucket *b;
    uint64_t tag, ns;
    bool fresh, new_stream;
  };
  std::array<Piece, kSeconds> pieces;
  size_t n = 0;
  for (uint64_t s = first; s <= last; ++s) {
    Bucket &b = d->b[s % kSeconds];
    const uint64_t tag = s + 1;  // 0: unused
    if (b.second > tag) continue;  // a second too old to be remembered still
    const bool fresh = b.second < tag;
    const uint64_t lo = std::max(k.start, s * kSecond), hi = std::min(k.end, (s + 1) * kSecond);
    const uint64_t ns = hi > lo ? hi - lo : 0;
    const uint32_t streams = fresh ? 0 : b.n_streams;
    bool new_stream = true;
    for (uint32_t i = 0; i < std::min<uint32_t>(streams, kBucketStreams); ++i)
      if (b.streams[i] == stream_key) new_stream = false;
    const uint64_t active = streams + (new_stream ? 1 : 0);
    if (active <= kBucketStreams) {
      const double capacity =
          static_cast<double>(active * kSecond) * (1.0 + limits_.bucket_slack) + static_cast<double>(limits_.bucket_slack_ns);
      if (static_cast<double>((fresh ? 0 : b.sum_ns) + ns) > capacity) return false;
    }
    pieces[n++] = {&b, tag, ns, fresh, new_stream};
  }
  for (size_t i = 0; i < n; ++i) {
    Piece &p = pieces[i];
    if (p.fresh) {
      p.b->second = p.tag;
      p.b->sum_ns = 0;
      p.b->n_streams = 0;
    }
    p.b->sum_ns += p.ns;
    if (p.new_stream && p.b->n_streams <= kBucketStreams) {
      if (p.b->n_streams < kBucketStreams) p.b->streams[p.b->n_streams] = stream_key;
      ++p.b->n_streams;  // kBucketStreams + 1: too many to count
    }
  }
  return true;
}

template <typename Map>
typename Map::iterator TimestampCheck::entry(Map &map, const typename Map::key_type &key, uint32_t pid,
                                             std::vector<typename Map::key_type> Owned::*owned) {
  auto it = map.find(key);
  if (it != map.end()) return it;
  if (map.size() >= limits_.max_streams) {  // rare: every one forgotten
    map.clear();
    for (auto &[other, o] : by_pid_) (o.*owned).clear();
  }
  it = map.emplace(key, typename Map::mapped_type{}).first;
  (by_pid_[pid].*owned).push_back(key);
  return it;
}

Impossible TimestampCheck::check(const KernelTimes &k) {
  Impossible r = Impossible::kNone;
  const uint64_t dur = k.end - k.start;
  if (k.start == 0 || k.end == 0 || k.end < k.start) {
    r = Impossible::kReversed;
  } else if (k.delivered_ns &&
             dur > (k.process_start_ns && k.process_start_ns < k.delivered_ns ? k.delivered_ns - k.process_start_ns
                                                                              : k.delivered_ns) +
                       limits_.slack_ns) {
    r = Impossible::kLongerThanProcess;
  } else if (k.announced_ns && k.delivered_ns >= k.announced_ns &&
             dur > k.delivered_ns - k.announced_ns + limits_.slack_ns) {
    r = Impossible::kLongerThanLaunch;
  } else {
    const Key key{static_cast<uint64_t>(k.pid) << 32 | k.device, static_cast<uint64_t>(k.context) << 32 | k.stream};
    auto s = entry(streams_, key, k.pid, &Owned::streams);
    Interval *other = overlapped(s->second, k);
    while (other && forget_if_suspect(&s->second, other, k)) other = overlapped(s->second, k);
    if (other) {
      r = Impossible::kStreamOverlap;
    } else {
      const uint64_t dkey = key.a;
      auto d = entry(devices_, dkey, k.pid, &Owned::devices);
      if (!fits_device(&d->second, key.b, k))
        r = Impossible::kDeviceOverfull;
      else
        remember(&s->second, k);
    }
  }
  if (r != Impossible::kNone) ++counts_[static_cast<size_t>(r)];
  return r;
}

void TimestampCheck::forget_process(uint32_t pid) {
  const auto it = by_pid_.find(pid);
  if (it == by_pid_.end()) return;
  for (const Key &k : it->second.streams) streams_.erase(k);
  for (uint64_t d : it->second.devices) devices_.erase(d);
  by_pid_.erase(it);
}

uint64_t process_start_monotonic_ns(uint32_t pid) {
  char path[48];
  std::snprintf(path, sizeof path, "/proc/%u/stat", pid);
  FILE *f = std::fopen(path, "re");
  if (!f) return 0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  // Fields after the command's closing parenthesis (the command may hold spaces and ')'):
  // state is field 3, starttime field 22.
  const char *p = std::strrchr(buf, ')');
  if (!p) return 0;
  ++p;
  for (int field = 3; field < 22; ++field) {
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;
    if (!*p) return 0;
  }
  unsigned long long ticks = 0;
  if (std::sscanf(p, " %llu", &ticks) != 1) return 0;
  const long hz = sysconf(_SC_CLK_TCK);
  if (hz <= 0) return 0;
  const uint64_t start_boottime = ticks * (kSecond / static_cast<uint64_t>(hz));
  // CLOCK_BOOTTIME - CLOCK_MONOTONIC: the time spent suspended since boot.
  const uint64_t mono = clock_ns(CLOCK_MONOTONIC), boot = clock_ns(CLOCK_BOOTTIME);
  const uint64_t suspended = boot > mono ? boot - mono : 0;
  return start_boottime > suspended ? start_boottime - suspended : 1;
}

}  // namespace parcagpu::trace
