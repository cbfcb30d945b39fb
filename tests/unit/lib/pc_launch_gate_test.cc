// PcLaunchGate (src/pc/pc_launch_gate.h): Stop / Get Data / Disable wait for the launches inside
// their call and hold new ones; and PcLaunchState (src/pc/pc_launch_state.h): the enabled contexts
// and the correlation IDs announced in a window, as the launch path reads them.
#include "pc/pc_launch_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "pc/pc_launch_state.h"

namespace parcagpu {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(PcLaunchGate, ExclusiveWhenNoLaunchIsInsideItsCall) {
  PcLaunchGate g;
  EXPECT_TRUE(g.exclusive_begin(kMs));
  g.exclusive_end();
}

TEST(PcLaunchGate, ExclusiveGivesUpWhileALaunchStaysInsideAndHoldsNothing) {
  PcLaunchGate g;
  g.enter(0);
  EXPECT_FALSE(g.exclusive_begin(2 * kMs));
  // Nothing held after giving up: another launch goes in at once.
  const uint64_t t0 = monotonic_ns();
  g.enter(1000 * kMs);
  EXPECT_LT(monotonic_ns() - t0, 500 * kMs);
  g.leave();
  g.leave();
  EXPECT_TRUE(g.exclusive_begin(kMs));
  g.exclusive_end();
}

TEST(PcLaunchGate, ALaunchWaitsWhileExclusiveWorkRuns) {
  PcLaunchGate g;
  ASSERT_TRUE(g.exclusive_begin(kMs));
  std::atomic<bool> entered{false};
  std::thread launch([&] {
    g.enter(10'000 * kMs);
    entered = true;
    g.leave();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(entered.load()) << "a launch went in while Stop / Get Data / Disable ran";
  g.exclusive_end();
  launch.join();
  EXPECT_TRUE(entered.load());
}

TEST(PcLaunchState, EnabledContexts) {
  PcLaunchState s;
  auto *a = reinterpret_cast<CUcontext>(0x10), *b = reinterpret_cast<CUcontext>(0x20);
  EXPECT_FALSE(s.enabled_here(a));
  s.mark_enabled(a, true);
  s.mark_enabled(b, true);
  EXPECT_TRUE(s.enabled_here(a));
  EXPECT_TRUE(s.enabled_here(b));
  s.mark_enabled(a, false);
  EXPECT_FALSE(s.enabled_here(a));
  EXPECT_TRUE(s.enabled_here(b));
}

TEST(PcLaunchState, TheAnnouncedOfTheWindowOnly) {
  PcLaunchState s;
  s.note_announced(7);
  EXPECT_TRUE(s.was_announced(7));
  EXPECT_FALSE(s.was_announced(8));
  s.forget_announced();  // a window starts
  EXPECT_FALSE(s.was_announced(7));
  // The last kAnnouncedSlots are kept.
  for (uint32_t id = 1; id <= PcLaunchState::kAnnouncedSlots + 1; ++id) s.note_announced(id);
  EXPECT_FALSE(s.was_announced(1));
  EXPECT_TRUE(s.was_announced(2));
  EXPECT_TRUE(s.was_announced(PcLaunchState::kAnnouncedSlots + 1));
}

}  // namespace
}  // namespace parcagpu
