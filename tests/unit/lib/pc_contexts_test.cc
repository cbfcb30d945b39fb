// PcContexts (src/pc/pc_contexts.h): the contexts PC sampling met, found or added once, forgotten,
// the oldest windows of the others, and each context's GPU lock, on a lock directory of the
// test's own.
#include "pc/pc_contexts.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "base/config.h"
#include "pc/pc_device_lock.h"
#include "pc/pc_stats.h"
#include "pc/pc_step.h"

namespace parcagpu {
namespace {

CUcontext ctx(uintptr_t i) { return reinterpret_cast<CUcontext>(0x1000 + i); }

class PcContextsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/parcagpu-pc-contexts-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    config_.pc_lock_dir = dir;
  }
  void TearDown() override { std::filesystem::remove_all(config_.pc_lock_dir); }

  CuptiApi api_;
  Config config_;
};

TEST_F(PcContextsTest, AContextIsAddedOnceAndFoundAfter) {
  PcContexts contexts(api_, nullptr, config_);
  EXPECT_EQ(contexts.find(ctx(1)), nullptr);
  PcContext &a = contexts.find_or_add(ctx(1));
  EXPECT_EQ(a.ctx, ctx(1));
  EXPECT_EQ(&contexts.find_or_add(ctx(1)), &a);
  EXPECT_EQ(contexts.find(ctx(1)), &a);
  contexts.find_or_add(ctx(2));
  int n = 0;
  for (auto &c : contexts) n += c != nullptr;
  EXPECT_EQ(n, 2);
}

TEST_F(PcContextsTest, ARemovedContextIsForgottenAndIsTheEpisodesNoMore) {
  PcContexts contexts(api_, nullptr, config_);
  PcContext &a = contexts.find_or_add(ctx(1));
  PcContext &b = contexts.find_or_add(ctx(2));
  contexts.set_episode(&b);
  contexts.remove(&a);
  EXPECT_EQ(contexts.find(ctx(1)), nullptr);
  EXPECT_EQ(contexts.episode(), &b) << "another context's removal leaves the episode's alone";
  contexts.remove(&b);
  EXPECT_EQ(contexts.episode(), nullptr);
  EXPECT_EQ(contexts.find(ctx(2)), nullptr);
}

TEST_F(PcContextsTest, TheOldestWindowsAreTheOtherContexts) {
  PcContexts contexts(api_, nullptr, config_);
  PcContext &here = contexts.find_or_add(ctx(0));
  here.last_window = 1;  // older than all: not counted, it is here
  uint64_t oldest = 0, oldest_enabled = 0;
  contexts.oldest_other_windows(&here, oldest, oldest_enabled);
  EXPECT_EQ(oldest, kNoOtherContext);
  EXPECT_EQ(oldest_enabled, kNoOtherContext);
  contexts.find_or_add(ctx(1)).last_window = 3;
  PcContext &enabled = contexts.find_or_add(ctx(2));
  enabled.last_window = 5;
  enabled.enabled = true;
  contexts.oldest_other_windows(&here, oldest, oldest_enabled);
  EXPECT_EQ(oldest, 3u);
  EXPECT_EQ(oldest_enabled, 5u);
  EXPECT_TRUE(contexts.any_enabled());
  enabled.enabled = false;
  EXPECT_FALSE(contexts.any_enabled());
}

TEST_F(PcContextsTest, AGpuAnotherProcessSamplesIsNotLockedUntilItLetsGo) {
  PcContexts contexts(api_, nullptr, config_);
  PcContext &c = contexts.find_or_add(ctx(0));
  PcStats stats;
  PcDeviceLocks other(config_.pc_lock_dir);  // another process's lock on the same file
  ASSERT_EQ(other.try_acquire("any"), PcDeviceLocks::Result::kAcquired);
  EXPECT_FALSE(contexts.lock_gpu(c, 1, stats));
  EXPECT_EQ(stats.put_off_for_other_process, 1u);
  other.release("any");
  EXPECT_FALSE(contexts.lock_gpu(c, 2, stats)) << "not asked again before the retry time";
  EXPECT_TRUE(contexts.lock_gpu(c, 2 + PcGpuLocks::kOtherProcessRetryNs, stats));
  EXPECT_EQ(other.try_acquire("any"), PcDeviceLocks::Result::kBusy);
  contexts.unlock_gpu(c);
  EXPECT_EQ(other.try_acquire("any"), PcDeviceLocks::Result::kAcquired);
}

}  // namespace
}  // namespace parcagpu
