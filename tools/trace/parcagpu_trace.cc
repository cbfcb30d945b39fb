// parcagpu-trace: which code spends the GPU time. Attaches to the USDT probes of provider
// "parcagpu" in every library file that carries them (or -l LIB), joins launch announcements
// (cuda_correlation, with the user stack) and kernel records (activity_batch) by (pid,
// correlation ID) the way the production agent does, and reports GPU time by launch stack.
//
// The pieces: options.cc (argp), targets.cc (which files, discovery), bpf_session.cc (the
// skeleton), mmap_tracker.cc (mappings as they are made), tracer.cc (decoding, joining,
// outputs), and with --pc the PC sampling extension: pc_bpf_session.cc (its BPF object, attached to
// each library before the tracer's) and pc_profile.cc (what the tracer feeds). This file is the
// loop and the exit sequence.
#include <fcntl.h>
#include <signal.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bpf_session.h"
#include "exit_detacher.h"
#include "mmap_tracker.h"
#include "options.h"
#include "pc_profile.h"
#include "pc_bpf_session.h"
#include "privileges.h"
#include "report.h"
#include "targets.h"
#include "tracer.h"

namespace pt = parcagpu::trace;

namespace {

using Clock = std::chrono::steady_clock;
volatile sig_atomic_t g_signals = 0;
void on_signal(int) { g_signals = g_signals + 1; }

[[noreturn]] void die(const std::string &msg) {
  std::fprintf(stderr, "parcagpu-trace: %s\n", msg.c_str());
  std::exit(1);
}

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// -p's process, watched through a pidfd (readable once it has exited), else kill(pid, 0).
struct Target {
  int pid = -1, pidfd = -1;
  explicit Target(int p) : pid(p) {
    if (pid <= 0) return;
    pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    if ((pidfd < 0 && errno == ESRCH) || (pidfd < 0 && kill(pid, 0) != 0 && errno == ESRCH))
      die("no process with PID " + std::to_string(pid));
  }
  bool exited() const {
    if (pid <= 0) return false;
    if (pidfd < 0) return kill(pid, 0) != 0 && errno == ESRCH;
    timespec ts{};
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(pidfd, &fds);
    return pselect(pidfd + 1, &fds, nullptr, nullptr, &ts, nullptr) > 0;
  }
};

bool alive(const std::vector<uint32_t> &pids) {
  for (uint32_t p : pids)
    if (kill(static_cast<pid_t>(p), 0) == 0 || errno != ESRCH) return true;
  return false;
}

// From the stop (a signal, -d, COUNT intervals, -p's exit) the exit reads for this long when it
// is behind, whatever the backlog: when the ring buffer dropped events (kernels it would wait for
// may be among them) or is not emptied by then. What it still holds is counted as left
// (events_left_at_exit), not read. Otherwise it lingers for the kernels of announced launches,
// --linger from the stop (a kernel record can take the library's periodic flush, a second, to
// come, longer on busy CPUs).
constexpr auto kExitReadingBehind = std::chrono::milliseconds(500);

// Unregistering a uprobe waits 0.1-0.3 s, one after the other in the kernel, seconds on busy CPUs
// or while other tools attach and detach. A detacher process does it (tools/trace/exit_detacher.h),
// every probe but the kernel records' from the stop, cuda_correlation first, while the exit reads;
// so does the process-exit program, whose tracepoint's unregistration waits as long. The tool
// waits for it this long from the stop, then leaves it to finish alone: so the tool ends within 2 s
// of SIGINT under overload on busy CPUs (47-62 s in issue 44, 2.2-6 s with the detaching on
// threads of the tool).
constexpr auto kExitDetachingAtMost = std::chrono::milliseconds(1200);

// What the ring buffer still holds at the end is counted for at most this long: past
// kExitDetachingAtMost the probes may still be attached, and their events still coming.
constexpr auto kExitCountingAtMost = std::chrono::milliseconds(200);

// A poll hands back after this long even when the ring buffer never empties (libbpf reads until
// it is empty, and producers under overload keep it full), so the loop sees signals and -d.
constexpr auto kPollSlice = std::chrono::milliseconds(100);

// What the ring-buffer callback needs besides the tracer.
struct Reader {
  pt::Tracer *tracer = nullptr;
  Clock::time_point slice_end = Clock::time_point::max();   // this poll hands back then
  Clock::time_point read_until = Clock::time_point::max();  // later events: counted as left
  sig_atomic_t signals = 0;                                 // g_signals when this poll began
};

int on_event(void *ctx, void *data, size_t size) {
  Reader &r = *static_cast<Reader *>(ctx);
  const Clock::time_point now = Clock::now();
  if (now >= r.read_until) {
    r.tracer->left_at_exit();
  } else {
    pt::Tracer::handle(r.tracer, data, size);
  }
  // Negative: libbpf stops reading (this event is consumed) and the poll returns it.
  return now >= r.slice_end || g_signals != r.signals ? -ECANCELED : 0;
}

// Everything the tool holds while it runs.
struct Tool {
  const pt::Options &opt;
  pt::Tracer tracer;
  Reader reader;
  pt::BpfSession bpf;
  pt::PcBpfSession pc;                       // --pc: its BPF object
  pt::PcSampling *pc_sampling = nullptr;  // --pc: the extension, owned by the tracer
  pt::MmapTracker mmaps;
  pt::Targets targets;
  explicit Tool(const pt::Options &o) : opt(o), tracer(o), targets(o, bpf) { reader.tracer = &tracer; }
};

// Reads the ring buffer for at most kPollSlice: polls, waiting up to timeout_ms for an event, or
// (timeout_ms < 0) reads what is there. Events read, 1 when handed back early (more may wait), or
// a negative errno.
int read_events(Tool &t, int timeout_ms) {
  t.reader.slice_end = Clock::now() + kPollSlice;
  t.reader.signals = g_signals;
  const int n = timeout_ms >= 0 ? t.bpf.poll(timeout_ms) : t.bpf.consume();
  return n == -ECANCELED ? 1 : n;
}

// Reads until the ring buffer is empty (true) or the exit's reading time is up.
bool drain(Tool &t) {
  while (Clock::now() < t.reader.read_until) {
    const int n = read_events(t, -1);
    if (n == 0) return true;
    if (n < 0) return false;
  }
  return false;
}

// Exit with traced processes still running, announcements stopping (detaching the kernel probes
// with cuda_correlation still attached would take launches announced meanwhile without their
// kernels), caught up with the ring buffer: waits for the kernels of what was announced while a
// process that still awaits them lives, until the exit's reading time is up.
void linger(Tool &t) {
  const pt::Joiner &j = t.tracer.joiner();
  if (j.awaiting_kernels() == 0 || !alive(j.awaiting_pids())) return;
  const sig_atomic_t signals = g_signals;
  auto next_check = Clock::now();
  while (j.awaiting_kernels() > 0 && Clock::now() < t.reader.read_until && g_signals == signals) {
    read_events(t, 50);
    if (Clock::now() < next_check) continue;
    if (!alive(j.awaiting_pids())) break;  // every process still awaiting kernels has gone
    next_check = Clock::now() + std::chrono::milliseconds(250);
  }
}

// The exit sequence, from the stop: announcements stop and every probe but activity_batch is
// detached (by the detacher), cuda_correlation first, while the exit reads what came and, unless it
// is behind, lingers; then activity_batch goes, what is left is read until the reading time is up
// and the rest counted. The seconds traced (until the announcements began to stop).
double finish(Tool &t, bool target_exited, Clock::time_point start) {
  const Clock::time_point stop = Clock::now();
  t.reader.read_until = stop + kExitReadingBehind;
  t.tracer.set_closing();
  // The tracer's USDT links (cuda_correlation first), PC sampling's (another BPF object), the
  // others (autograd uprobes, the process-exit program); activity_batch last.
  std::vector<bpf_link *> usdt = t.bpf.take_links([](const char *p) { return std::strcmp(p, "cuda_correlation") != 0; });
  for (bpf_link *l : t.bpf.take_links([](const char *p) { return std::strcmp(p, "activity_batch") == 0; }))
    usdt.push_back(l);
  pt::ExitDetacher detacher({std::move(usdt), t.pc.take_links(), t.bpf.take_other_links()},
                            t.bpf.take_links([](const char *) { return false; }));
  const double traced_s = since(start);
  const bool caught_up = drain(t);
  if (caught_up && t.bpf.read_stat(PT_STAT_RINGBUF_DROPS) == 0 && !target_exited && t.opt.linger_s > 0) {
    t.reader.read_until = std::max(t.reader.read_until, stop + std::chrono::duration_cast<Clock::duration>(
                                                                   std::chrono::duration<double>(t.opt.linger_s)));
    linger(t);
  }
  if (detacher.finish(stop + kExitDetachingAtMost)) drain(t);
  // What the ring buffer holds now is counted, fast.
  t.reader.read_until = Clock::time_point::min();
  const Clock::time_point count_until = Clock::now() + kExitCountingAtMost;
  while (read_events(t, -1) > 0 && Clock::now() < count_until) {
  }
  return traced_s;
}

// --pc: the PC sampling programs write into the tracer's ring buffer and attach to each library
// file just before the tracer's (Targets::before_attach), -l's or found, now or later.
void setup_pc_sampling(Tool &t, int cgroup_fd) {
  std::string error;
  int err = 0;
  if (!t.pc.load(t.bpf.events_fd(), t.bpf.meta_events_fd(), t.bpf.cgroup_map_fd(), cgroup_fd >= 0, &error, &err)) {
    const std::string hint = pt::privilege_hint(pt::Step::LoadBpf, err);
    die(error + (hint.empty() ? "" : "; " + hint));
  }
  auto pc = std::make_unique<pt::PcSampling>(t.opt.verbose);
  t.pc_sampling = pc.get();
  t.tracer.add_extension(std::move(pc));
  t.targets.before_attach = [&t](const pt::Library &l, std::string *error) {
    int err = 0;
    const int n = t.pc.attach(l.path, t.opt.pid, l.probes, error, &err);
    if (n < 0) {
      if (std::string hint = pt::privilege_hint(pt::Step::AttachUprobe, err); !hint.empty())
        *error += "; " + hint;
      return false;
    }
    if (t.opt.verbose)
      std::fprintf(stderr, "parcagpu-trace: PC sampling: attached %d probes to %s\n", n,
                   l.shown.c_str());
    return true;
  };
}

// Loads the programs, opens the ring buffer and the mapping records, attaches to the
// library files; exits with a message when one of them is refused.
void setup(Tool &t) {
  const pt::Options &opt = t.opt;
  std::string error;
  int err = 0;
  const int cgroup_fd =
      opt.cgroup.empty() ? -1 : open(opt.cgroup.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (!opt.cgroup.empty() && (cgroup_fd < 0 || pt::cgroup_v2_path(opt.cgroup).empty()))
    die("-c " + opt.cgroup + ": not a directory of a cgroup v2 file system");
  if (!t.bpf.load({opt.verbose, opt.stacks, opt.capture_sites, opt.stack_bytes,
                   opt.ringbuf_mb << 20, cgroup_fd, opt.pc, opt.nvtx},
                  &error, &err)) {
    const std::string hint = pt::privilege_hint(pt::Step::LoadBpf, err);
    die(error + (hint.empty() ? "" : "; " + hint));
  }
  if (opt.pc) setup_pc_sampling(t, cgroup_fd);
  if (!t.bpf.open_ringbuf(&on_event, &t.reader, &error)) die(error);
  if (!t.mmaps.open(&error))
    std::fprintf(
        stderr,
        "parcagpu-trace: warning: %s (%s); stacks of processes that exit quickly may "
        "stay unsymbolized%s\n",
        error.c_str(), pt::privilege_hint(pt::Step::MappingRecords, EACCES).c_str(),
        t.targets.discovering() ? ", new libraries are found by rescanning /proc every 2 s" : "");
  t.tracer.python_map = [&t](uint32_t pid, const pt_py_proc *p) {
    return t.bpf.set_python_process(pid, p);
  };
  if (opt.autograd && opt.python && opt.stacks)
    t.tracer.autograd_attach = [&t](const std::string &path, const pt::AutogradLayout &l, std::string *error) {
      return t.bpf.attach_autograd(path, t.opt.pid, l.seq_symbol, l.eval_symbol, l.node_seq_offset, error);
    };
  t.tracer.use_mapping_records(
      &t.mmaps,
      {[&t](uint32_t pid, const pt::MapEntry &m) { t.targets.on_mapping(pid, m); }, {}, {}});
  t.targets.on_attached = [&t](const pt::Library &l) {
    t.tracer.on_library(l.path, l.shown, l.pid);
  };
  if (!t.targets.start(&error, &err)) die(error);
}

// Polls until a signal, -d, COUNT intervals or -p's exit. True when -p's process exited.
bool run(Tool &t, const Target &target, Clock::time_point start) {
  const pt::Options &opt = t.opt;
  auto interval_start = start;
  long intervals = 0;
  uint64_t next_loss_check = 0;
  t.tracer.begin_output();
  while (!g_signals) {
    const int n = read_events(t, 100);
    if (n < 0 && n != -EINTR) die(std::string("ring buffer poll failed: ") + std::strerror(-n));
    t.tracer.drain_mapping_records();  // keeps the perf buffers from filling; finds new libraries
    if (!t.mmaps.is_open()) t.targets.rescan(monotonic_ns());
    const uint64_t now = monotonic_ns();
    t.tracer.tick(now);
    if (now >= next_loss_check) {  // the live loss warnings: a few map lookups, 10 times a second
      t.tracer.warn_of_losses({t.bpf.read_stat(PT_STAT_RINGBUF_DROPS), t.bpf.read_stat(PT_STAT_META_RINGBUF_DROPS),
                               t.bpf.read_stat(PT_STAT_ERROR_DROPS)});
      next_loss_check = now + 100'000'000;
    }
    if (opt.interval_s > 0 && since(interval_start) >= opt.interval_s) {
      t.tracer.print_interval(since(interval_start));
      interval_start = Clock::now();
      if (opt.count > 0 && ++intervals >= opt.count) return false;
    }
    if (opt.duration_s > 0 && since(start) >= opt.duration_s) return false;
    if (target.exited()) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char **argv) {
  const pt::Options opt = pt::parse_options(argc, argv);
  if (opt.list_counters) {
    pt::print_counter_table(stdout, opt.json);
    return 0;
  }
  const Target target(opt.pid);
  pt::BpfSession::setup_libbpf_logging(opt.verbose);
  struct sigaction sa {};
  sa.sa_handler = on_signal;  // no SA_RESTART: a signal ends the ring-buffer poll
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  Tool t(opt);
  setup(t);

  const auto start = Clock::now();
  const bool exited = run(t, target, start);
  const double traced_s = finish(t, exited, start);
  if (t.pc_sampling) t.pc_sampling->set_bpf(t.pc.counters());
  uint64_t stats[PT_STAT_MAX];
  t.bpf.read_stats(stats);
  // Losses that began after the last poll tick (while lingering or detaching) are said too.
  t.tracer.warn_of_losses({stats[PT_STAT_RINGBUF_DROPS], stats[PT_STAT_META_RINGBUF_DROPS], stats[PT_STAT_ERROR_DROPS]});
  std::vector<std::string> libs;
  for (const pt::Library &l : t.targets.libraries()) libs.push_back(l.shown);
  return t.tracer.report(t.tracer.summarize(stats, traced_s, libs)) ? 0 : 1;
}
