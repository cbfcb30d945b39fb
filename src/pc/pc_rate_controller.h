// When to open a PC sampling window and how many launches it spans. Pure arithmetic on what the
// sampler feeds it (times in ns, sample counts); unit-tested in
// tests/unit/lib/pc_rate_controller_test.cc.
//
// What a window costs, as measured on an H100 (docs/pc-sampling.md): while CUPTI's
// kernel-serialized PC sampling is started, every kernel runs alone and its launch returns only
// once CUPTI has processed it, about 1 ms per kernel whatever the kernel's size, while Start and
// Stop take microseconds. So a window is counted in launches, not in time, and the controller
// keeps two budgets:
//  - samples: credit grows at the target rate (PARCAGPU_PC_SAMPLING_RATE) up to one second's
//    worth, and each window's samples are paid from it, so the long-run rate is the target
//    whatever one window yields (a rich window is followed by a long pause, a poor one by a
//    longer window);
//  - time: the wall time spent inside windows stays under max_duty of the elapsed time, so a
//    workload whose kernels yield few samples cannot make sampling expensive.
// A window's length is chosen from the samples per launch seen so far, to yield about the
// credit's worth; the gap before the next one is randomized, so a periodic workload is not
// always sampled at the same phase.
//
// Not thread-safe: the sampler calls it under its lock; next_open_ns() is the lock-free hint the
// launch path reads first.
#pragma once

#include <atomic>
#include <cstdint>

namespace parcagpu {

class PcRateController {
 public:
  struct Params {
    double target_rate = 100;  // samples per second; 0 = no rate control
    double max_duty = 0.02;    // fraction of wall time spent inside windows
    // Launches one window spans, at least and at most. An episode costs about 110 ms whatever
    // its window samples (the hardware buffer's setup at the first sampled launch and Disable,
    // docs/pc-sampling.md P13), against about 1 ms per sampled launch (P5): so a window spans
    // many launches (a whole training step of a launch-bound loop, so that every kernel of it
    // is sampled), and the sample credit spaces the windows out instead. One-launch windows
    // (the length that the credit alone gave at 100 samples/s) sampled 16 launches in 60 s of
    // a PyTorch step on the H100 and missed kernels with 23% of the GPU time.
    uint32_t min_launches = 32;
    uint32_t max_launches = 32;
    // Closed at the first launch after this. It includes the window's first launch, which waits
    // for the hardware buffer's setup (57-91 ms at 1-64 MB, P13): at 50 ms every window closed
    // after that one launch.
    uint64_t max_window_ns = 250'000'000;
    uint64_t min_gap_ns = 20'000'000;  // between the end of one window and the next
    double burst_s = 1.0;              // credit is capped at this many seconds of samples
  };

  PcRateController(const Params &params, uint64_t now_ns, uint64_t seed);

  // At a launch with no window open and the last window drained: the number of launches a
  // window opened now should span, or 0 for "not now".
  uint32_t should_open(uint64_t now_ns);
  // The window opened at start_ns was stopped at end_ns after `launches` launches.
  void on_window_closed(uint64_t start_ns, uint64_t end_ns, uint32_t launches);
  // What that window yielded, known once drained.
  void on_samples(uint64_t samples, uint32_t launches);

  // Before this time should_open() says no: the launch path's lock-free pre-check.
  uint64_t next_open_ns() const { return next_open_ns_.load(std::memory_order_relaxed); }
  double credit() const { return credit_; }
  double samples_per_launch() const { return samples_per_launch_; }
  const Params &params() const { return p_; }

 private:
  void accrue(uint64_t now_ns);
  double jitter();  // uniform in [0.5, 1.5)

  Params p_;
  double credit_;
  uint64_t credit_at_ns_;
  double samples_per_launch_ = -1;  // < 0: nothing measured yet
  uint64_t rng_;
  std::atomic<uint64_t> next_open_ns_{0};
};

}  // namespace parcagpu
