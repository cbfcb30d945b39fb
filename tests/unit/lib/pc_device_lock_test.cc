// PcDeviceLocks: one holder of a GPU's lock at a time, across open file descriptions (processes,
// and here two instances in one process), never waiting; given back by release() or close.
#include "pc/pc_device_lock.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace parcagpu {
namespace {

class PcDeviceLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pc_device_lock_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::string cmd = "rm -rf " + dir_;
    ASSERT_EQ(system(cmd.c_str()), 0);
  }
  std::string dir_;
};

TEST_F(PcDeviceLockTest, TheSecondHolderIsToldBusyUntilTheFirstReleases) {
  PcDeviceLocks a(dir_), b(dir_);
  EXPECT_EQ(a.try_acquire("0000:18:00"), PcDeviceLocks::Result::kAcquired);
  EXPECT_EQ(b.try_acquire("0000:18:00"), PcDeviceLocks::Result::kBusy);
  EXPECT_EQ(b.try_acquire("0000:19:00"), PcDeviceLocks::Result::kAcquired) << "another GPU";
  a.release("0000:18:00");
  EXPECT_EQ(b.try_acquire("0000:18:00"), PcDeviceLocks::Result::kAcquired);
  EXPECT_EQ(a.try_acquire("0000:18:00"), PcDeviceLocks::Result::kBusy);
}

TEST_F(PcDeviceLockTest, AnotherProcessIsKeptOutAndGetsItOnceTheHolderIsGone) {
  auto child_result = [&] {
    const pid_t pid = fork();
    if (pid == 0) {
      PcDeviceLocks c(dir_);
      _exit(static_cast<int>(c.try_acquire("0000:18:00")));
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return static_cast<PcDeviceLocks::Result>(WEXITSTATUS(status));
  };
  {
    PcDeviceLocks a(dir_);
    ASSERT_EQ(a.try_acquire("0000:18:00"), PcDeviceLocks::Result::kAcquired);
    EXPECT_EQ(child_result(), PcDeviceLocks::Result::kBusy);
  }  // destroyed: its file closed, the lock gone with it (as with a process that dies)
  EXPECT_EQ(child_result(), PcDeviceLocks::Result::kAcquired);
}

TEST_F(PcDeviceLockTest, NoLockFileIsUnavailableNotBusyAndSaysWhy) {
  PcDeviceLocks a(dir_ + "/missing");
  EXPECT_EQ(a.try_acquire("any"), PcDeviceLocks::Result::kUnavailable);
  EXPECT_STREQ(a.failed_call(), "open");
  EXPECT_EQ(a.failed_errno(), ENOENT);
  a.release("any");  // harmless
}

}  // namespace
}  // namespace parcagpu
