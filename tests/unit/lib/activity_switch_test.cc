// ActivitySwitch on a fake CUPTI table and a fake clock: when cuptiActivityEnable/Disable of
// CONCURRENT_KERNEL are called (armed, per launch, sticky, held on for PC sampling, held off for
// a graph registration), and what a failing enable or disable leads to.
#include "activity/activity_switch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "fake_launch_cupti.h"

namespace parcagpu {
namespace {

constexpr uint64_t kMs = 1'000'000, kSec = 1'000'000'000;

using fake_launch::FakeCupti;
using fake_launch::g_fake;

uint64_t g_now = 0;
uint64_t fake_clock() { return g_now; }
// CUPTI's clock, the clock of kernel records: the fake clock plus an offset (another origin).
constexpr uint64_t kCuptiOffset = 7 * kSec;

class ActivitySwitchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_launch::install(fake_, api_);
    fake_.clock = [] { return g_now + kCuptiOffset; };
    g_now = 1 * kSec;
  }
  void TearDown() override { g_fake = nullptr; }

  // One announced launch: ENTER, then EXIT `length` later.
  void launch(ActivitySwitch &s, uint64_t length = 10'000) {
    ASSERT_TRUE(s.launch_begin());
    g_now += length;
    s.launch_end();
  }

  FakeCupti fake_;
  CuptiApi api_;
};

TEST_F(ActivitySwitchTest, WhileConsumerIsOnExactlyWhileArmed) {
  ActivitySwitch s(api_, ActivityMode::WhileConsumer, nullptr, &fake_clock);
  EXPECT_TRUE(s.arm(true));
  EXPECT_EQ(fake_.activity_enables, 1);
  EXPECT_EQ(fake_.activity_last_kind, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  EXPECT_FALSE(s.arm(true)) << "armed already: nothing changes";
  EXPECT_FALSE(s.launch_begin()) << "per-launch switching is the other mode's";
  EXPECT_TRUE(s.arm(false));
  EXPECT_EQ(fake_.activity_disables, 1);
  EXPECT_FALSE(s.arm(false));
  EXPECT_EQ(s.enables(), 1u);
  EXPECT_EQ(s.disables(), 1u);
  EXPECT_TRUE(s.armed_once());
}

// Each successful disable is remembered on CUPTI's clock: a graph kernel record spanning one has
// an end CUPTI made up (activity_off_times.h); a failed disable is not one.
TEST_F(ActivitySwitchTest, RemembersWhenItWentOffOnCuptisClock) {
  ActivitySwitch s(api_, ActivityMode::AroundLaunch, nullptr, &fake_clock);
  ASSERT_TRUE(s.arm(true));
  const uint64_t before = g_now + kCuptiOffset;
  launch(s);  // on at its ENTER, off at its EXIT
  EXPECT_EQ(fake_.activity_disables, 1);
  const uint64_t off = g_now + kCuptiOffset;
  EXPECT_TRUE(s.went_off_between(before, off + 1));
  EXPECT_FALSE(s.went_off_between(before, off)) << "ended as it went off: a true end";
  g_now += 1000;
  fake_.activity_disable_result = CUPTI_ERROR_UNKNOWN;
  launch(s);
  EXPECT_FALSE(s.went_off_between(off, g_now + kCuptiOffset + 1)) << "the disable failed";
}

TEST_F(ActivitySwitchTest, AFailedEnableLeavesItDisarmedAndIsRetriedAfterTheBackOff) {
  ActivitySwitch s(api_, ActivityMode::WhileConsumer, nullptr, &fake_clock);
  fake_.activity_enable_result = CUPTI_ERROR_NOT_COMPATIBLE;
  EXPECT_FALSE(s.arm(true));
  EXPECT_FALSE(s.armed());
  EXPECT_FALSE(s.armed_once());
  fake_.activity_enable_result = CUPTI_SUCCESS;
  g_now += 4 * kSec;
  EXPECT_FALSE(s.arm(true)) << "within 5 s of the failure CUPTI is not asked again";
  EXPECT_EQ(fake_.activity_enables, 1);
  g_now += 2 * kSec;
  EXPECT_TRUE(s.arm(true));
  EXPECT_EQ(fake_.activity_enables, 2);
  EXPECT_EQ(s.enables(), 1u);
}

TEST_F(ActivitySwitchTest, AroundLaunchIsOnOnlyInsideAnnouncedLaunches) {
  ActivitySwitch s(api_, ActivityMode::AroundLaunch, nullptr, &fake_clock);
  EXPECT_FALSE(s.launch_begin()) << "not armed";
  EXPECT_TRUE(s.arm(true));
  EXPECT_EQ(fake_.activity_enables, 0) << "armed, but no launch yet";
  ASSERT_TRUE(s.launch_begin());
  ASSERT_TRUE(s.launch_begin());  // another thread's launch meanwhile
  EXPECT_EQ(fake_.activity_enables, 1);
  s.launch_end();
  EXPECT_EQ(fake_.activity_disables, 0) << "a launch is still in its call";
  s.launch_end();
  EXPECT_EQ(fake_.activity_disables, 1);
  g_now += 100 * kMs;
  launch(s);
  EXPECT_EQ(fake_.activity_enables, 2);
  EXPECT_EQ(fake_.activity_disables, 2);
}

TEST_F(ActivitySwitchTest, DisarmingInsideALaunchSwitchesOffAndItsEndIsANoOp) {
  ActivitySwitch s(api_, ActivityMode::AroundLaunch, nullptr, &fake_clock);
  s.arm(true);
  ASSERT_TRUE(s.launch_begin());
  EXPECT_TRUE(s.arm(false));
  EXPECT_EQ(fake_.activity_disables, 1);
  s.launch_end();
  EXPECT_EQ(fake_.activity_disables, 1);
}

TEST_F(ActivitySwitchTest, FastAnnouncedLaunchesLeaveItOnUntilTheyPause) {
  ActivitySwitch s(api_, ActivityMode::AroundLaunch, nullptr, &fake_clock);
  s.arm(true);
  // Announced launches every 0.2 ms: the moving average of the gaps falls under 1 ms.
  for (int i = 0; i < 40; ++i) {
    launch(s);
    g_now += 200'000;
  }
  const int enables = fake_.activity_enables;
  EXPECT_LT(enables, 40) << "sticky: no longer switched per launch";
  EXPECT_EQ(fake_.activity_disables, enables - 1) << "on now, left on after the last launch";
  s.end_sticky_if_quiet();
  EXPECT_EQ(fake_.activity_disables, enables - 1) << "not quiet yet";
  g_now += 11 * kMs;
  s.end_sticky_if_quiet();
  EXPECT_EQ(fake_.activity_disables, enables);
  launch(s);
  EXPECT_EQ(fake_.activity_enables, enables + 1) << "back to per-launch";
  EXPECT_EQ(fake_.activity_disables, enables + 1);
}

TEST_F(ActivitySwitchTest, StickyOnlyWhileMostLaunchesAreAnnounced) {
  struct Counts : LaunchCountSource {
    LaunchCounts c;
    LaunchCounts launch_counts() const override { return c; }
  } source;
  LaunchCounts &counts = source.c;
  ActivitySwitch s(api_, ActivityMode::AroundLaunch, &source, &fake_clock);
  s.arm(true);
  for (int i = 0; i < 40; ++i) {
    counts.announced += 1;
    counts.unannounced += 10;
    launch(s);
    g_now += 200'000;
  }
  EXPECT_EQ(fake_.activity_enables, 40) << "fast, but most launches unannounced: still per launch";
  EXPECT_EQ(fake_.activity_disables, 40);
  // Then mostly announced: sticky once the ban (1 s) is over (and the moving average, which
  // took in the pause, is under 1 ms again).
  g_now += 2 * kSec;
  for (int i = 0; i < 100; ++i) {
    counts.announced += 100;
    launch(s);
    g_now += 200'000;
  }
  EXPECT_LT(fake_.activity_enables, 140);
  // The mix turns again: the periodic recheck ends sticky.
  const int disables = fake_.activity_disables;
  counts.unannounced += 1000000;
  s.recheck_sticky();
  EXPECT_EQ(fake_.activity_disables, disables + 1);
}

TEST_F(ActivitySwitchTest, HeldOnForPcSamplingWhateverTheLaunchesSay) {
  ActivitySwitch s(api_, ActivityMode::AroundLaunch, nullptr, &fake_clock);
  s.arm(true);
  s.hold(true);
  EXPECT_EQ(fake_.activity_enables, 1) << "on before PC sampling is enabled";
  launch(s);
  EXPECT_EQ(fake_.activity_enables, 1);
  EXPECT_EQ(fake_.activity_disables, 0) << "held: a launch's end leaves it on";
  s.retry_stuck_disable();
  EXPECT_EQ(fake_.activity_disables, 0);
  s.hold(false);
  EXPECT_EQ(fake_.activity_disables, 1);
  // Held while disarmed (PC sampling outlives the last kernel consumer): off at the release.
  s.arm(false);
  s.hold(true);
  EXPECT_EQ(fake_.activity_enables, 2);
  s.hold(false);
  EXPECT_EQ(fake_.activity_disables, 2);
}

TEST_F(ActivitySwitchTest, HeldOffForAGraphRegistrationOnlyWhenNoAnnouncedLaunchNeedsIt) {
  // AroundLaunch: a launch during the registration does not switch it on; off after.
  ActivitySwitch a(api_, ActivityMode::AroundLaunch, nullptr, &fake_clock);
  a.arm(true);
  EXPECT_TRUE(a.hold_off(true));
  launch(a);
  EXPECT_EQ(fake_.activity_enables, 0) << "held off: the launch is not timed";
  EXPECT_TRUE(a.hold_off(false));
  EXPECT_EQ(fake_.activity_enables, 0) << "nothing wants it after";
  // An announced launch whose kernels still run (a graph's, until GraphCompletion ends it):
  // refused, left on.
  ASSERT_TRUE(a.launch_begin());
  EXPECT_EQ(fake_.activity_enables, 1);
  EXPECT_FALSE(a.hold_off(true));
  EXPECT_EQ(fake_.activity_disables, 0);
  a.hold_off(false);
  a.launch_end();
  EXPECT_EQ(fake_.activity_disables, 1) << "off at the launch's end, as without the registration";
  // Sticky (on between announced launches, none running): switched off, and on again after.
  for (int i = 0; i < 30; ++i) {
    launch(a, 1000);
    g_now += 100'000;
  }
  const int disables = fake_.activity_disables, enables = fake_.activity_enables;
  EXPECT_TRUE(a.hold_off(true));
  EXPECT_EQ(fake_.activity_disables, disables + 1);
  EXPECT_TRUE(a.hold_off(false));
  EXPECT_EQ(fake_.activity_enables, enables + 1) << "sticky: wanted on again";
  // WhileConsumer: on while armed, whoever's kernels are running: refused.
  ActivitySwitch s(api_, ActivityMode::WhileConsumer, nullptr, &fake_clock);
  s.arm(true);
  EXPECT_FALSE(s.hold_off(true));
  s.hold_off(false);
  // A disable CUPTI refuses: still on, and said so.
  ActivitySwitch f(api_, ActivityMode::AroundLaunch, nullptr, &fake_clock);
  f.arm(true);
  for (int i = 0; i < 30; ++i) {
    launch(f, 1000);
    g_now += 100'000;
  }
  fake_.activity_disable_result = CUPTI_ERROR_UNKNOWN;
  EXPECT_FALSE(f.hold_off(true)) << "CUPTI kept it on";
  fake_.activity_disable_result = CUPTI_SUCCESS;
  f.hold_off(false);
}

TEST_F(ActivitySwitchTest, AnAnnouncedLaunchOnAnotherThreadWaitsOutAGraphRegistration) {
  // Between PC sampling episodes launches do not wait at PC sampling's gate: one announced
  // during a registration waits in launch_begin, and is timed once the hold-off ends.
  ActivitySwitch a(api_, ActivityMode::AroundLaunch, nullptr, &fake_clock);
  a.arm(true);
  ASSERT_TRUE(a.hold_off(true));
  std::atomic<bool> began{false}, counted{false};
  std::thread other([&] {
    counted = a.launch_begin();
    began = true;  // its API call (and its kernel) would go on from here
  });
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const bool went_on = began;
  // The wait gives up after kHeldOffWaitNs (20 ms) of real time: a main thread held off the CPU
  // that long (an overloaded machine) sees the give-up, which is the design, not the failure.
  const bool within_the_wait =
      std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(15);
  if (within_the_wait) {
    EXPECT_FALSE(went_on) << "the launch went on with kernel activity off: its kernel untimed";
  }
  EXPECT_EQ(fake_.activity_enables, 0) << "not while held off";
  a.hold_off(false);
  other.join();
  if (!counted) {
    EXPECT_FALSE(within_the_wait) << "gave up within its wait";
    return;
  }
  EXPECT_EQ(fake_.activity_enables, 1) << "timed: on once the registration ended";
  a.launch_end();
  EXPECT_EQ(fake_.activity_disables, 1);
}

TEST_F(ActivitySwitchTest, AFailedDisableIsRetriedAfterASecondNotPerLaunch) {
  ActivitySwitch s(api_, ActivityMode::AroundLaunch, nullptr, &fake_clock);
  s.arm(true);
  fake_.activity_disable_result = CUPTI_ERROR_UNKNOWN;
  launch(s);
  EXPECT_EQ(fake_.activity_disables, 1);
  g_now += 100 * kMs;
  launch(s);
  EXPECT_EQ(fake_.activity_enables, 1) << "still on: not enabled again";
  EXPECT_EQ(fake_.activity_disables, 1) << "within the back-off: not tried per launch";
  s.retry_stuck_disable();
  EXPECT_EQ(fake_.activity_disables, 1);
  fake_.activity_disable_result = CUPTI_SUCCESS;
  g_now += 1 * kSec;
  s.retry_stuck_disable();
  EXPECT_EQ(fake_.activity_disables, 2);
  EXPECT_EQ(s.disables(), 1u);
  s.retry_stuck_disable();
  EXPECT_EQ(fake_.activity_disables, 2) << "off now";
}

TEST_F(ActivitySwitchTest, ForceOffIgnoresTheHoldAndTheBackOff) {
  ActivitySwitch s(api_, ActivityMode::WhileConsumer, nullptr, &fake_clock);
  s.arm(true);
  fake_.activity_disable_result = CUPTI_ERROR_UNKNOWN;
  s.arm(false);
  EXPECT_EQ(fake_.activity_disables, 1);
  s.hold(true);
  fake_.activity_disable_result = CUPTI_SUCCESS;
  s.force_off();
  EXPECT_EQ(fake_.activity_disables, 2);
  EXPECT_EQ(s.disables(), 1u);
  s.force_off();
  EXPECT_EQ(fake_.activity_disables, 2);
}

}  // namespace
}  // namespace parcagpu

namespace parcagpu {
namespace {

// Issue 42: the launch path tells a launch whose kernels are recorded by the recording word read
// at its ENTER and EXIT: settled and on, settled and off, or switched meanwhile (the word read
// while a cuptiActivityEnable/Disable call is under way is never settled).
TEST_F(ActivitySwitchTest, RecordingWordSaysWhetherALaunchWasRecorded) {
  ActivitySwitch s(api_, ActivityMode::AroundLaunch, nullptr, &fake_clock);
  s.arm(true);
  const uint64_t off = s.recording_word();
  EXPECT_FALSE(ActivityToggle::recording_on(off));
  EXPECT_TRUE(ActivityToggle::recording_settled(off, s.recording_word()));
  ASSERT_TRUE(s.launch_begin());
  const uint64_t on = s.recording_word();
  EXPECT_TRUE(ActivityToggle::recording_on(on));
  EXPECT_FALSE(ActivityToggle::recording_settled(off, on)) << "switched on during the call";
  EXPECT_TRUE(ActivityToggle::recording_settled(on, s.recording_word()));
  s.launch_end();
  EXPECT_FALSE(ActivityToggle::recording_on(s.recording_word()));
  EXPECT_FALSE(ActivityToggle::recording_settled(on, s.recording_word()));
  // A disable that fails leaves it on.
  ASSERT_TRUE(s.launch_begin());
  fake_.activity_disable_result = CUPTI_ERROR_UNKNOWN;
  s.launch_end();
  EXPECT_TRUE(ActivityToggle::recording_on(s.recording_word()));
}

// What a launch reads while a toggle is under way (inside the CUPTI call): not settled.
ActivitySwitch *g_switch_in_call = nullptr;
uint64_t g_word_in_call = 0;
CUptiResult enable_reading_word(CUpti_ActivityKind) {
  g_word_in_call = g_switch_in_call->recording_word();
  return CUPTI_SUCCESS;
}

TEST_F(ActivitySwitchTest, RecordingWordIsUnsettledDuringAToggle) {
  api_.cuptiActivityEnable = &enable_reading_word;
  ActivitySwitch s(api_, ActivityMode::AroundLaunch, nullptr, &fake_clock);
  g_switch_in_call = &s;
  s.arm(true);
  ASSERT_TRUE(s.launch_begin());
  EXPECT_FALSE(ActivityToggle::recording_settled(g_word_in_call, g_word_in_call));
  s.launch_end();
  g_switch_in_call = nullptr;
}

}  // namespace
}  // namespace parcagpu
