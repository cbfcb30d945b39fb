// The exit's detaching, in a child process so that the tool ends on time (issue 44 item 9).
//
// The kernel unregisters a uprobe when the last file that holds it is closed, and that close waits
// for RCU/SRCU grace periods: 0.1-0.3 s per probe on an idle machine, seconds on busy CPUs or
// while other tools attach and detach (they queue on the same kernel mutex). A thread cannot hide
// that wait: a process whose thread sleeps in the kernel does not finish exiting until it returns.
// So at the stop the tool forks a detacher, which holds a copy of every descriptor; the tool drops
// its own copies (cheap: not the last ones), and the detacher's closes do the kernel's work, in the
// order the exit wants (every probe but activity_batch first, cuda_correlation at their head;
// activity_batch once the tool has read the kernels it waited for). The tool waits for it until
// its deadline, so on a machine where detaching is quick nothing changes (the probes are gone
// when the tool ends); past the deadline the detacher finishes alone, in its own session, with no
// terminal and no output, and the tool ends on time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <vector>

struct bpf_link;

namespace parcagpu::trace {

class ExitDetacher {
 public:
  using Clock = std::chrono::steady_clock;
  using Links = std::vector<bpf_link *>;
  // Forks the detacher, hands it the groups of `first`, then `last`, to destroy, and drops this
  // process's copies of `first`. The detacher destroys each group of `first` on a thread of its
  // own (the kernel's waits overlap), its links one after the other (libbpf's USDT bookkeeping of
  // one BPF object is not thread-safe: one group per BPF object's USDT links). Without a child
  // (fork failed) the links are destroyed here: then this process waits for the kernel.
  ExitDetacher(std::vector<Links> first, Links last);
  ~ExitDetacher();
  ExitDetacher(const ExitDetacher &) = delete;
  ExitDetacher &operator=(const ExitDetacher &) = delete;

  // Drops this process's copies of `last` and lets the detacher destroy them; waits until it has,
  // or `deadline`. True when every link is gone.
  bool finish(Clock::time_point deadline);

 private:
  bool wait_byte(Clock::time_point deadline);
  std::vector<Links> first_;
  Links last_;
  pid_t child_ = -1;
  int go_fd_ = -1;    // ours to write: one byte, "first dropped here"; closed, "last dropped here"
  int done_fd_ = -1;  // ours to read: one byte when `first` is detached, EOF when all are
  bool all_done_ = false;
};

}  // namespace parcagpu::trace
