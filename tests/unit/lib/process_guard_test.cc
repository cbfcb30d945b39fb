// The process guard in forked children, one per test, so each starts from a process where
// nothing was claimed or installed: the claim on the instance marker, the exit hooks, and the
// fork handler that makes a forked child's exit path do nothing.
#include "base/process_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

// The marker every copy exports (process_guard.cc). This test program is the first object
// loaded that defines it, so its marker arbitrates.
extern "C" {
struct ParcagpuInstanceMarkerV1 {
  char tag[32];
  std::atomic<const ParcagpuInstanceMarkerV1 *> owner;
};
extern ParcagpuInstanceMarkerV1 parcagpu_instance_marker_v1;
}

namespace parcagpu::process_guard {
namespace {

// What `body` writes to its pipe end in a forked child, until the child (and its own children)
// end; the child's exit status in *status.
std::string in_child(const std::function<void(int fd)> &body, int *status) {
  int p[2];
  if (pipe(p) != 0) return "pipe failed";
  fflush(nullptr);
  const pid_t child = fork();
  if (child == 0) {
    close(p[0]);
    // What the child's exit says (the counted errors of the whole unit program): not ours.
    const int null_fd = open("/dev/null", O_WRONLY);
    if (null_fd >= 0) dup2(null_fd, STDERR_FILENO);
    body(p[1]);
    _exit(3);  // body ends the child itself
  }
  close(p[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(p[0], buf, sizeof buf)) > 0;) out.append(buf, n);
  close(p[0]);
  waitpid(child, status, 0);
  return out;
}

// What `body` writes in a forked child that ends itself with status 0 (checked).
std::string child_says(const std::function<void(int fd)> &body) {
  int status = -1;
  std::string out = in_child(body, &status);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  return out;
}

void say(int fd, const char *what) {
  const ssize_t unused = write(fd, what, std::strlen(what));
  (void)unused;
}

int g_fd = -1;
void at_exit_says_flushed() { say(g_fd, "flushed;"); }

TEST(ProcessGuard, TheFirstClaimIsOursAndStaysOurs) {
  const std::string out = child_says([](int fd) {
    std::string other = "untouched";
    say(fd, claim_process(&other) == Claim::Ours ? "ours;" : "another;");
    say(fd, claim_process(&other) == Claim::Ours ? "ours;" : "another;");
    say(fd, other.c_str());
    _exit(0);
  });
  EXPECT_EQ(out, "ours;ours;untouched");
}

// Another copy that started first wrote its own marker into the arbiter: this copy stays
// inert and names where that copy lives.
TEST(ProcessGuard, AClaimByAnotherCopyIsRespected) {
  const std::string out = child_says([](int fd) {
    static ParcagpuInstanceMarkerV1 other_copy = {"parcagpu instance marker v1", {nullptr}};
    parcagpu_instance_marker_v1.owner.store(&other_copy);
    std::string other;
    say(fd, claim_process(&other) == Claim::Another ? "another;" : "ours;");
    say(fd, other.c_str());
    _exit(0);
  });
  // The loader names the main program by its argv[0].
  EXPECT_EQ(out, std::string("another;") + program_invocation_name);
}

// exit() and quick_exit() alike run the flush installed, once however often it was installed.
TEST(ProcessGuard, ExitAndQuickExitDeliverWhatWasCollected) {
  const std::function<void()> ways_out[] = {[] { std::exit(0); }, [] { std::quick_exit(0); }};
  for (const auto &leave : ways_out) {
    const std::string out = child_says([&leave](int fd) {
      g_fd = fd;
      install(&at_exit_says_flushed);
      install(&at_exit_says_flushed);  // a second install adds nothing
      leave();
    });
    EXPECT_EQ(out, "flushed;");
  }
}

// A child forked after the start has the parent's state frozen mid-way: it knows it is a
// forked child, and its exit does not run the parent's flush.
TEST(ProcessGuard, AForkedChildExitsWithoutTheFlush) {
  const std::string out = child_says([](int fd) {
    g_fd = fd;
    install(&at_exit_says_flushed);
    say(fd, forked_child() ? "forked;" : "started;");
    const pid_t grandchild = fork();
    if (grandchild == 0) {
      say(fd, forked_child() ? "forked;" : "started;");
      std::exit(0);
    }
    int s = 0;
    waitpid(grandchild, &s, 0);
    say(fd, "child done;");
    _exit(0);  // not exit: the flush would run here, in the process that started
  });
  EXPECT_EQ(out, "started;forked;child done;");
}

}  // namespace
}  // namespace parcagpu::process_guard
