#include "exit_detacher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <utility>

#include "usdt_attach.h"

namespace parcagpu::trace {
namespace {

// One byte (1), end of file (0) or an error (-1), waiting as long as it takes.
int read_byte(int fd) {
  for (;;) {
    char c;
    const ssize_t n = read(fd, &c, 1);
    if (n >= 0) return static_cast<int>(n);
    if (errno != EINTR) return -1;
  }
}

void write_byte(int fd) {
  const char c = 1;
  while (write(fd, &c, 1) < 0 && errno == EINTR) {
  }
}

// Each group's links one after the other; the groups on threads of their own when `overlap`.
void destroy_groups(const std::vector<ExitDetacher::Links> &groups, bool overlap) {
  std::vector<std::thread> threads;
  for (const ExitDetacher::Links &links : groups) {
    if (overlap) {
      threads.emplace_back([&links] { destroy_links(links); });
    } else {
      destroy_links(links);
    }
  }
  for (std::thread &t : threads) t.join();
}

// The detacher: out of the tool's session and output (a pipe the tool writes to must see its end
// when the tool ends), it destroys `first` once the tool has dropped its copies, says so, and
// `last` once the tool has dropped those (or has ended). Its other descriptors (maps, programs,
// the mapping records' perf events) go with its exit.
[[noreturn]] void run_detacher(int go, int done, const std::vector<ExitDetacher::Links> &first,
                               const ExitDetacher::Links &last) {
  setsid();
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_DFL);
  prctl(PR_SET_NAME, "parcagpu-detach");
  const int null = open("/dev/null", O_RDWR);
  for (int fd = 0; fd <= 2 && null >= 0; ++fd) dup2(null, fd);
  read_byte(go);  // the tool's copies of `first` are gone (or the tool is)
  destroy_groups(first, true);
  write_byte(done);
  while (read_byte(go) > 0) {
  }
  destroy_links(last);
  _exit(0);
}

}  // namespace

ExitDetacher::ExitDetacher(std::vector<Links> first, Links last)
    : first_(std::move(first)), last_(std::move(last)) {
  int go[2], done[2];
  if (pipe2(go, O_CLOEXEC) != 0) go[0] = go[1] = -1;
  if (go[0] < 0 || pipe2(done, O_CLOEXEC) != 0) done[0] = done[1] = -1;
  child_ = done[0] >= 0 ? fork() : -1;
  if (child_ == 0) {
    close(go[1]);
    close(done[0]);
    run_detacher(go[0], done[1], first_, last_);
  }
  for (int fd : {go[0], done[1]})
    if (fd >= 0) close(fd);
  if (child_ < 0) {  // no detacher: this process waits for the kernel, as it always did
    for (int fd : {go[1], done[0]})
      if (fd >= 0) close(fd);
    destroy_groups(first_, true);
    return;
  }
  go_fd_ = go[1];
  done_fd_ = done[0];
  destroy_groups(first_, false);  // not the last copies: quick
  write_byte(go_fd_);
}

ExitDetacher::~ExitDetacher() {
  if (go_fd_ >= 0) close(go_fd_);
  if (done_fd_ >= 0) close(done_fd_);
}

bool ExitDetacher::wait_byte(Clock::time_point deadline) {
  while (!all_done_) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{done_fd_, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;  // the deadline (or no way to tell)
    char c;
    const ssize_t n = read(done_fd_, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // the detacher has ended: every link is gone
      all_done_ = true;
      waitpid(child_, nullptr, 0);
      break;
    }
    return true;  // `first` is detached
  }
  return true;
}

bool ExitDetacher::finish(Clock::time_point deadline) {
  destroy_links(last_);  // with a detacher, not the last copies: quick
  if (child_ < 0) return true;
  close(std::exchange(go_fd_, -1));
  while (!all_done_ && wait_byte(deadline)) {
  }
  return all_done_;
}

}  // namespace parcagpu::trace
