// Impossible kernel records: kernel timestamps no GPU could have produced. Shared by
// parcagpu-trace (through the joiner) and tools/agent's agent-consumer; no BPF, no I/O except
// process_start_monotonic_ns(). Unit-tested in timestamp_check_test.cc.
//
// A record is impossible when, checked in this order (the first that holds is its reason):
//   reversed          start or end is 0, or end < start;
//   longer_than_process  end - start > the time from the process's start to the record's delivery
//                     (the activity_batch firing), or to the delivery since boot when the process's
//                     start is unknown;
//   longer_than_launch   end - start > the time from its launch's announcement (cuda_correlation)
//                     to its delivery (only when the announcement came first);
//   stream_overlap    it overlaps another kernel of its stream (pid, device, context, stream) of
//                     another launch (a graph launch's kernels may run side by side) by more than
//                     a microsecond, among the last kWindow kernels accepted on that stream, in
//                     whatever order they arrived;
//   device_overfull   its device's kernel time in a second (kernels clipped to the second of the
//                     CUPTI clock) would exceed what the streams active there that second can hold
//                     (1 s each), plus 1% and 1 ms.
// The durations compared are differences on each side's own clock: CUPTI's timestamps are
// CLOCK_REALTIME on Linux (its documented default; the mock CUPTI uses CLOCK_REALTIME too), the
// probes' firing times bpf_ktime_get_ns(), CLOCK_MONOTONIC. The two run at the same rate (NTP
// slews both alike), so their differences compare without knowing the offset between them (only
// a step of the wall clock while a kernel runs could fool it); the checks get a slack of 10 ms for
// the launch call itself (the announcement fires at its end, after its kernel may have started)
// and for scheduling.
//
// Impossible records are not remembered (a wrong one does not make later right ones look
// wrong). A wrong one can still come first and be remembered: a kernel whose end CUPTI moved late
// (its activity went off while it ran) covers the next kernels of its stream, and arrives before
// them when they were not collected at once. So a remembered kernel that a second later one
// overlaps, and that is longer than that one, is taken for the wrong one and forgotten: it costs
// one right record, not every one of its stream for as long as it claims (1,207 in one mock run
// while such a kernel left the window only by age). The per-record cost: a few comparisons, one
// hash lookup for the stream's window and one for the device's seconds.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace parcagpu::trace {

enum class Impossible : uint8_t {
  kNone = 0,
  kReversed,
  kLongerThanProcess,
  kLongerThanLaunch,
  kStreamOverlap,
  kDeviceOverfull,
  kCount,
};
// "reversed", "longer_than_process", "longer_than_launch", "stream_overlap", "device_overfull"
// ("" for kNone).
const char *impossible_name(Impossible r);

// One kernel record's times, with what the consumer knows about it.
struct KernelTimes {
  uint32_t pid = 0, device = 0, context = 0, stream = 0, correlation = 0;
  uint64_t start = 0, end = 0;    // the record's, CUPTI's clock
  uint64_t delivered_ns = 0;      // CLOCK_MONOTONIC: the activity_batch firing that carried it
  uint64_t announced_ns = 0;      // CLOCK_MONOTONIC: its launch's cuda_correlation firing; 0 unknown
  uint64_t process_start_ns = 0;  // CLOCK_MONOTONIC: when its process started; 0 unknown
};

// A kernel record's times as the check reads them, from a record with CUPTI's field names
// (parcagpu-trace's KernelRecord, agent-consumer's ac_kernel_event); announced_ns is left unknown.
template <class Record>
KernelTimes kernel_times(const Record &r, uint32_t pid, uint64_t delivered_ns, uint64_t process_start_ns) {
  return {.pid = pid, .device = r.device_id, .context = r.context_id, .stream = r.stream_id,
          .correlation = r.correlation_id, .start = r.start, .end = r.end,
          .delivered_ns = delivered_ns, .process_start_ns = process_start_ns};
}

class TimestampCheck {
 public:
  static constexpr size_t kWindow = 8;          // kernels remembered per stream
  static constexpr size_t kSeconds = 4;         // one-second buckets remembered per device
  static constexpr size_t kBucketStreams = 32;  // distinct streams counted per bucket
  struct Limits {
    uint64_t slack_ns = 10'000'000;    // longer_than_process, longer_than_launch
    uint64_t overlap_ns = 1'000;       // stream_overlap: more than this
    uint64_t bucket_slack_ns = 1'000'000;
    double bucket_slack = 0.01;        // device_overfull: capacity x (1 + this) + bucket_slack_ns
    size_t max_streams = 1 << 16;      // streams (and devices) remembered; beyond: forgotten
  };
  TimestampCheck() : TimestampCheck(Limits{}) {}
  explicit TimestampCheck(Limits limits) : limits_(limits) {}

  // Judges one record; a possible one is remembered for the stream and device checks.
  Impossible check(const KernelTimes &k);
  // A process gone: its streams and devices. Costs what that process had (an index by pid), not
  // what every process has: every process exiting on the machine comes here (issue 44).
  void forget_process(uint32_t pid);

  uint64_t count(Impossible r) const { return counts_[static_cast<size_t>(r)]; }
  uint64_t total() const;  // every reason

 private:
  struct Interval {
    uint64_t start, end;
    uint32_t correlation;
    uint32_t overlapped;  // later records judged impossible for overlapping this one
  };
  struct Window {
    std::array<Interval, kWindow> iv;
    uint32_t n = 0;
  };
  struct Bucket {
    uint64_t second = 0;  // of the CUPTI clock; 0 = unused
    uint64_t sum_ns = 0;
    uint32_t n_streams = 0;  // kBucketStreams + 1: too many to count (no capacity check)
    std::array<uint64_t, kBucketStreams> streams;
  };
  struct Device {
    std::array<Bucket, kSeconds> b{};
  };
  struct Key {
    uint64_t a, b;
    bool operator==(const Key &o) const { return a == o.a && b == o.b; }
  };
  struct KeyHash {
    size_t operator()(const Key &k) const {
      return static_cast<size_t>((k.a * 0x9e3779b97f4a7c15ull) ^ (k.b + 0x632be59bd9b4e019ull + (k.a >> 7)));
    }
  };

  // The first remembered kernel k overlaps, or nullptr.
  Interval *overlapped(Window &w, const KernelTimes &k) const;
  // k overlaps *v: forgets *v and returns true when it is the wrong one (see above).
  static bool forget_if_suspect(Window *w, Interval *v, const KernelTimes &k);
  static void remember(Window *w, const KernelTimes &k);
  // Adds k to its device's seconds, or returns false (nothing added) when one would overflow.
  bool fits_device(Device *d, uint64_t stream_key, const KernelTimes &k) const;

  Limits limits_;
  std::unordered_map<Key, Window, KeyHash> streams_;
  std::unordered_map<uint64_t, Device> devices_;
  // Per pid, its streams' keys and its devices' keys (key.a: pid << 32 | device).
  struct Owned {
    std::vector<Key> streams;
    std::vector<uint64_t> devices;
  };
  std::unordered_map<uint32_t, Owned> by_pid_;
  // The entry of `key` in `map` (streams_ or devices_), made and listed as pid's (its Owned's
  // `owned`) when there is none; a map at limits_.max_streams entries is forgotten whole first
  // (rare).
  template <typename Map>
  typename Map::iterator entry(Map &map, const typename Map::key_type &key, uint32_t pid,
                               std::vector<typename Map::key_type> Owned::*owned);
  std::array<uint64_t, static_cast<size_t>(Impossible::kCount)> counts_{};
};

// When process `pid` started, on CLOCK_MONOTONIC (the clock of bpf_ktime_get_ns), from
// /proc/PID/stat's start time (clock ticks since boot, which counts suspended time too: the age
// it gives is never short); 0 when it cannot be read.
uint64_t process_start_monotonic_ns(uint32_t pid);

}  // namespace parcagpu::trace
