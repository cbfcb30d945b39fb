// Which launch is sampled: by launch count, never by time. Pure logic (no CUPTI, no clock of its
// own), unit-tested in tests/unit/lib/launch_gate_test.cc; LaunchCallbacks runs it on every launch
// callback it receives.
//
// Why not by time. Taking "the first launch after a time point" (a sampling window claimed by
// a launch after it opened, or a rate gate's next allowed time) samples each launch in
// proportion to the idle time before it: in a loop that synchronizes each step, nearly always
// the launch after the synchronize (on an H100, 966 of 979 announced PyTorch launches were the
// one elementwise kernel after the step's synchronize, while a GEMM had 88% of the GPU time);
// likewise the launch after one that blocked on a full launch queue, or after a sleep.
//
// So a launch is taken by a coin: each candidate launch is picked with probability 1/mean,
// whatever its API, thread, call site or the time since the one before. A thread keeps a
// geometric countdown to its next pick (memoryless, so a per-thread countdown is the same as a
// coin per launch); the common path is a compare and a decrement on thread-local data and one
// read of a shared word that changes only when the watcher sets a new mean. Each thread adds
// the launches it counted to a shared counter only when its countdown fires or the mean changes,
// so the watcher learns the launch rate (to set the mean so that the picks meet the rate limit)
// without a shared cache line per launch.
//
// Nesting. A runtime launch (cudaLaunchKernel, 211) nests the driver call (cuLaunchKernel, 307)
// under the same correlation ID: one launch, reported once, with the outermost cbid. A thread's
// first callback after the callbacks were switched on may be such a nested driver call, of a
// runtime launch whose ENTER came before: it cannot be told from a driver launch of its own.
// The rule is the same for both APIs: a thread's first launch ENTER in an epoch (each enabling of
// the launch callbacks, when a consumer attaches) is never a candidate, runtime or driver; from
// its end on the thread's nesting is known. (Trusting runtime ENTERs at once and suspecting only
// driver ones handed the picks to runtime launches: in a process mixing both, 0 of 1200 driver
// launches were announced.) One launch per thread per attach is left out, whatever it is. An
// epoch begun before any launch could be in flight (the library starting) is clean: every ENTER
// is a candidate from the first.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>

#include "parcagpu/cbid_table.h"

namespace parcagpu {

// The kinds of launch (eager, graph). They share one epoch, one phase and one coin
// (LaunchCallbacks): every launch, whatever its kind, is announced with the same probability at
// any moment, so the GPU time a consumer sums over the announced launches weighs eager and
// graph kernels alike (issue 27: with a coin and windows per kind at each kind's rate limit, an
// eager launch was 2.5 to 5 times as likely to be announced as a graph launch). A kind's rate
// limit is a cap on cost, met by lowering the one probability (inclusion_mean).
// The kind only says which counter a launch is counted in.
inline constexpr uint8_t kEagerRole = 0, kGraphRole = 1;
inline constexpr int kGateRoles = 2;

// One thread's launch calls as its callbacks tell them. Trivially constructible (the library
// keeps it in initial-exec TLS: no guard, no __tls_get_addr on the launch path).
struct GateThread {
  // The outermost launch call in flight whose ENTER was taken into account (any kind).
  uint32_t correlation_id;
  uint32_t cbid;
  uint64_t epoch;  // when it entered; a later epoch makes it stale
  CbDomain domain;
  uint8_t kind;
  bool active;
  // The epoch in which this thread's first launch ENTER was seen (its nesting is known after).
  uint64_t seen_epoch;
  // The coin: launches to the next pick (this one included), and the generation of the mean it
  // was drawn with (0: never drawn).
  uint32_t countdown;
  uint32_t coin_gen;
  // Candidates tossed since this thread last added them to the coin's shared counters, by kind.
  uint32_t uncounted[kGateRoles];
  uint64_t rng;
};

// The coin: mean launches per pick, set by the watcher, read by every launch of every kind.
class LaunchCoin {
 public:
  explicit LaunchCoin(double mean = 1) { set_mean(mean); }

  // A new mean: every thread redraws its countdown at its next candidate (memoryless: the same
  // as tossing each launch with the new probability from now on).
  void set_mean(double mean) {
    if (!(mean >= 1)) mean = 1;
    if (mean > kMaxMean) mean = kMaxMean;
    const uint64_t old = gen_mean_.load(std::memory_order_relaxed);
    const uint32_t gen = static_cast<uint32_t>(old >> 32) + 1;
    gen_mean_.store(static_cast<uint64_t>(gen ? gen : 1) << 32 | static_cast<uint32_t>(mean * 16),
                    std::memory_order_relaxed);
  }
  double mean() const {
    return static_cast<double>(static_cast<uint32_t>(gen_mean_.load(std::memory_order_relaxed))) /
           16;
  }

  // A candidate launch of `kind` on this thread: true if it is picked.
  bool toss(GateThread &t, int kind) {
    const uint64_t gm = gen_mean_.load(std::memory_order_relaxed);
    ++t.uncounted[kind];
    if (__builtin_expect(t.coin_gen == static_cast<uint32_t>(gm >> 32) && t.countdown > 1, 1)) {
      --t.countdown;
      return false;
    }
    return toss_slow(t, gm);
  }

  // Candidate launches of `kind` counted since the last call (a thread adds its own when its
  // countdown fires or the mean changes, so a thread that has not tossed since is counted
  // later).
  uint64_t take_counted(int kind) { return counted_[kind].exchange(0, std::memory_order_relaxed); }

  static constexpr double kMaxMean = 1 << 26;

 private:
  __attribute__((noinline)) bool toss_slow(GateThread &t, uint64_t gm) {
    const uint32_t gen = static_cast<uint32_t>(gm >> 32);
    const double mean = static_cast<double>(static_cast<uint32_t>(gm)) / 16;
    if (t.coin_gen != gen) {
      t.coin_gen = gen;
      t.countdown = draw(t, mean);
    }
    const bool picked = t.countdown <= 1;
    if (picked)
      t.countdown = draw(t, mean);
    else
      --t.countdown;
    for (int k = 0; k < kGateRoles; ++k)
      if (t.uncounted[k]) {
        counted_[k].fetch_add(t.uncounted[k], std::memory_order_relaxed);
        t.uncounted[k] = 0;
      }
    return picked;
  }

  // Launches up to and including the next pick: geometric with p = 1/mean, at least 1.
  static uint32_t draw(GateThread &t, double mean) {
    if (mean <= 1) return 1;
    if (t.rng == 0) t.rng = reinterpret_cast<uintptr_t>(&t) * 0x9E3779B97F4A7C15ull | 1;
    t.rng ^= t.rng << 13;
    t.rng ^= t.rng >> 7;
    t.rng ^= t.rng << 17;
    const double u = (static_cast<double>(t.rng >> 11) + 1) * (1.0 / 9007199254740993.0);  // (0,1]
    const double k = std::floor(std::log(u) / std::log1p(-1 / mean)) + 1;
    return k >= 4e9 ? 4000000000u : static_cast<uint32_t>(k);
  }

  // gen << 32 | mean * 16.
  alignas(64) std::atomic<uint64_t> gen_mean_{0};
  alignas(64) std::atomic<uint64_t> counted_[kGateRoles] = {};
};

// The one probability, from each kind's rate limit (announced launches per second; <= 0: that
// kind is never announced and left out) and what is known of its launches. Pure: unit-tested.
// The coin's mean, so that no kind's announced launches exceed its limit: max over kinds of
// launch rate / limit, at least 1. `launch_rate` < 0: not known yet (left out).
inline double inclusion_mean(const double limit[kGateRoles], const double launch_rate[kGateRoles]) {
  double mean = 1;
  for (int k = 0; k < kGateRoles; ++k)
    if (limit[k] > 0 && launch_rate[k] > 0) mean = std::max(mean, launch_rate[k] / limit[k]);
  return mean;
}

// What a launch callback is, for one thread.
enum class GateEnter : uint8_t {
  kNotLaunch,  // nested in the outermost call this thread is in (same correlation ID)
  kUntracked,  // first of the thread in the epoch, a driver call: maybe nested in a runtime
               // launch whose ENTER came before the enabling; not followed
  kFirst,      // first of the thread in the epoch, outermost (runtime): followed, not a candidate
  kSkipped,    // outermost, a candidate, not picked by the coin
  kPicked,     // outermost, picked
};

struct GateEnterResult {
  GateEnter what;
  // The outermost call this thread was in never ended as expected (its EXIT did not come): it is
  // given up; `stale_corr` is its correlation ID.
  bool stale;
  uint32_t stale_corr;
};

// ENTER of a launch cbid of `kind`, at the current epoch. `clean`: the epoch began before any
// launch could be in flight.
inline GateEnterResult gate_enter(GateThread &t, LaunchCoin &coin, int kind, uint64_t epoch,
                                  bool clean, CbDomain domain, uint32_t cbid,
                                  uint32_t correlation_id) {
  GateEnterResult res{GateEnter::kSkipped, false, 0};
  if (t.active && t.epoch == epoch) {
    // The driver call nested in the outermost launch we are in: not a launch of its own.
    if (t.correlation_id == correlation_id) return {GateEnter::kNotLaunch, false, 0};
    // Another ID although the one we saw enter never left: its EXIT did not come as expected.
    t.active = false;
    res.stale = true;
    res.stale_corr = t.correlation_id;
  }
  bool candidate = true;
  if (t.seen_epoch != epoch) {
    t.seen_epoch = epoch;
    if (!clean) {
      if (domain == CbDomain::Driver) {
        res.what = GateEnter::kUntracked;
        return res;
      }
      candidate = false;
    }
  }
  t.active = true;
  t.epoch = epoch;
  t.kind = static_cast<uint8_t>(kind);
  t.correlation_id = correlation_id;
  t.cbid = cbid;
  t.domain = domain;
  res.what = !candidate           ? GateEnter::kFirst
             : coin.toss(t, kind) ? GateEnter::kPicked
                                  : GateEnter::kSkipped;
  return res;
}

enum class GateExit : uint8_t {
  kOther,        // not the end of the call followed (a nested call's, or one never followed)
  kEnds,         // ends the outermost call followed since its ENTER, in this epoch
  kEndsEarlier,  // ends it, but the callbacks went off and on since its ENTER (a new epoch):
                 // what was decided at its ENTER was settled by the epoch change, except what
                 // the thread itself holds for the call (PC sampling's launch gate)
};

// EXIT of a launch cbid: whether it ends the outermost call followed since its ENTER (which then
// is no longer active).
inline GateExit gate_exit(GateThread &t, uint64_t epoch, CbDomain domain, uint32_t cbid) {
  if (!t.active || t.cbid != cbid || t.domain != domain) return GateExit::kOther;
  t.active = false;
  return t.epoch == epoch ? GateExit::kEnds : GateExit::kEndsEarlier;
}

}  // namespace parcagpu
