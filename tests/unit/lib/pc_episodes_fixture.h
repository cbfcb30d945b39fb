// PcEpisodes built as PcSampler builds it, on the fake PC Sampling API table (fake_pc_cupti.h), a
// fake clock, a fake kernel-activity link and a GPU lock directory of the test's own. Launches are
// made as PcSampler::on_launch_enter makes them (the lock-free pre-check pc_step_due, the step,
// the launch counted), and what a launch did is read off the PC Sampling API calls it made. For
// pc_episode_steps_test.cc, pc_episodes_test.cc and pc_graph_registration_test.cc.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>

#include "base/config.h"
#include "base/subsystem_links.h"
#include "fake_pc_cupti.h"
#include "pc/pc_coverage.h"
#include "pc/pc_episodes.h"
#include "pc/pc_launch_gate.h"
#include "pc/pc_launch_state.h"
#include "pc/pc_metadata.h"
#include "pc/pc_scheduler.h"
#include "pc/pc_step.h"
#include "pc/pc_step_due.h"

namespace parcagpu {

// Failures name the action (gtest finds it by ADL).
inline std::ostream &operator<<(std::ostream &os, PcAction a) {
  static const char *const names[] = {
      "kNone", "kEndForNoConsumer", "kJoin", "kEnable", "kStart", "kStop", "kDrain", "kDisable"};
  return os << names[static_cast<int>(a)];
}

namespace fake_pc {

constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;

inline uint64_t g_now = 0;
inline uint64_t fake_clock() { return g_now; }

// What PC sampling asked of kernel activity.
struct FakeActivity : KernelActivityControl {
  void hold_on(bool on) override { held_on = on; }
  bool hold_off(bool on) override {
    held_off = on;
    return off_works;
  }
  void request_flush() override { ++flushes; }
  bool held_on = false, held_off = false, off_works = true;
  int flushes = 0;
};

inline CUcontext context(size_t i) {
  return reinterpret_cast<CUcontext>(uintptr_t{0x10000} + 0x100 * i);
}

class EpisodesFixture : public ::testing::Test {
 public:
  void SetUp() override {
    install(api_, fake_);
    char dir[] = "/tmp/parcagpu-pc-episodes-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    lock_dir_ = dir;
    config_.pc_lock_dir = lock_dir_;
    g_now = kSec;
  }
  void TearDown() override {
    episodes_.reset();
    std::filesystem::remove_all(lock_dir_);
    g_fake = nullptr;
  }

  // PcSampler::init's part: the schedule started, PC sampling usable, every launch observed.
  void build() {
    meta_ = std::make_unique<PcMetadata>(api_, nullptr);
    episodes_ = std::make_unique<PcEpisodes>(api_, cuda_, config_, &activity_, state_, gate_,
                                             *meta_, &fake_clock);
    schedule_ = &episodes_->start(g_now);
    state_.usable = true;
    state_.launches_observed = true;
  }

  // A launch on context c at g_now, as PcSampler::on_launch_enter makes it; what it did, read
  // off the PC Sampling API calls it made.
  PcAction launch(size_t c, bool may_enable = true, bool want = true,
                  const char *function = "cold") {
    const size_t before = fake_.calls.size();
    const uint64_t episodes_before = episodes_->stats().episodes;
    if (pc_step_due(state_, *schedule_, context(c), want, g_now))
      episodes_->take_step(context(c), want, may_enable, function);
    if (state_.any_enabled.load()) state_.count_launch();
    return observed(before, episodes_before, want);
  }
  PcAction observed(size_t before, uint64_t episodes_before, bool want) const {
    auto made = [&](const char *call) {
      return std::find(fake_.calls.begin() + before, fake_.calls.end(), call) != fake_.calls.end();
    };
    if (made("Disable")) return want ? PcAction::kDisable : PcAction::kEndForNoConsumer;
    if (made("Enable"))
      return episodes_->stats().episodes > episodes_before ? PcAction::kEnable : PcAction::kJoin;
    if (made("GetData")) return PcAction::kDrain;
    if (made("Stop")) return PcAction::kStop;
    if (made("Start")) return PcAction::kStart;
    return PcAction::kNone;
  }
  // Launches on c every `step` from g_now until `want` comes back: the launches it took before
  // (-1: not in `limit`).
  int launches_until(size_t c, PcAction want, int limit = 1000, uint64_t step = kMs) {
    for (int i = 0; i < limit; ++i, g_now += step)
      if (launch(c) == want) return i;
    return -1;
  }
  // The process's first episode learns (its kernels are all first used then, P19/P20): run it
  // to its end on context c and let `then` pass: by default the duty cap's gap, so that an
  // episode is due and nothing is first used any more.
  void run_first_episode(size_t c = 0, uint64_t then = 100 * kSec) {
    ASSERT_GE(launches_until(c, PcAction::kEnable), 0);
    ASSERT_GE(launches_until(c, PcAction::kDisable, 100000), 0);
    g_now += then;
  }
  bool enabled(size_t c) const { return state_.enabled_here(context(c)); }

  FakePc fake_;
  CuptiApi api_;
  const CudaApi *cuda_ = nullptr;  // none: no graph registration, every GPU's lock is "any"
  Config config_;
  FakeActivity activity_;
  PcLaunchState state_;
  PcLaunchGate gate_;
  std::string lock_dir_;
  std::unique_ptr<PcMetadata> meta_;
  std::unique_ptr<PcEpisodes> episodes_;
  const PcScheduler *schedule_ = nullptr;
};

}  // namespace fake_pc
}  // namespace parcagpu
