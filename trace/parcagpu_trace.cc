// parcagpu-trace: attaches to the USDT probes of provider "parcagpu" in a library, joins launch
// announcements (cuda_correlation) with kernel records (activity_batch) by (pid, correlation
// ID) the way the production agent does, shows a live table of kernels and a summary at exit.
//
//   parcagpu-trace -l LIB [-p PID] [-d SECONDS] [--json] [-v] [--linger MS] [--ringbuf-mb N]
//                  [--capture-sites]
//
// --capture-sites: graph kernels are attributed to the code that recorded them into their graph
// during stream capture (graph_capture_launch + graph_node_clone, trace/capture_sites.h), with
// the user stack taken at capture and symbolized from the process's own ELF files.
#include <getopt.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

#include "bpf_session.h"
#include "capture_sites.h"
#include "joiner.h"
#include "mmap_tracker.h"
#include "parcagpu/abi.h"
#include "parcagpu_trace.h"
#include "pc_session.h"
#include "report.h"
#include "sdt_notes.h"
#include "symbolizer.h"

namespace pt = parcagpu::trace;

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string lib_arg;  // LIB as given (for messages)
  std::string lib;      // resolved (for attaching)
  int pid = -1;
  double duration_s = 0;  // 0 = until Ctrl-C / target exit
  bool json = false;
  bool verbose = false;
  int linger_ms = 2000;
  uint32_t ringbuf_mb = 0;  // 0 = default: 16, or 64 with --capture-sites (17 KiB events)
  bool capture_sites = false;
  bool pc = false;  // --pc: the PC sampling view (trace/pc_session.h)
};

volatile sig_atomic_t g_signals = 0;
void on_signal(int) { g_signals = g_signals + 1; }

const char kUsage[] =
    "usage: parcagpu-trace -l LIB [-p PID] [-d SECONDS] [--json] [-v] [--linger MS] "
    "[--ringbuf-mb N] [--capture-sites] [--pc]\n"
    "  -l, --lib LIB        library with the parcagpu USDT probes (e.g. build/lib/libparcagpu.so)\n"
    "  -p, --pid PID        trace this process only, and stop when it exits (default: all)\n"
    "  -d, --duration S     stop after S seconds (default: until Ctrl-C / SIGTERM)\n"
    "      --json           print the summary as one JSON object on stdout, no live table\n"
    "  -v, --verbose        libbpf debug output and one line per event on stderr\n"
    "      --linger MS      at exit, detach cuda_correlation first and wait up to MS ms for the\n"
    "                       kernels of announced launches (default 2000, 0 = off)\n"
    "      --ringbuf-mb N   ring buffer size in MiB, a power of two (default 16; 64 with\n"
    "                       --capture-sites)\n"
    "      --capture-sites  attribute graph kernels to the code that captured them: the user\n"
    "                       stack at capture time, symbolized from the process's ELF files\n"
    "      --pc             PC sampling view: hottest kernels by PC samples, their stall\n"
    "                       reasons, hottest PC offsets and source lines (cubin line tables)\n";

[[noreturn]] void die(int code, const std::string &msg) {
  std::fprintf(stderr, "parcagpu-trace: %s\n", msg.c_str());
  std::exit(code);
}

bool parse_number(const char *s, double *out) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(s, &end);
  if (errno || end == s || *end || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

Options parse_args(int argc, char **argv) {
  static const option longopts[] = {
      {"lib", required_argument, nullptr, 'l'},     {"pid", required_argument, nullptr, 'p'},
      {"duration", required_argument, nullptr, 'd'}, {"json", no_argument, nullptr, 'j'},
      {"verbose", no_argument, nullptr, 'v'},        {"linger", required_argument, nullptr, 'L'},
      {"ringbuf-mb", required_argument, nullptr, 'R'}, {"help", no_argument, nullptr, 'h'},
      {"capture-sites", no_argument, nullptr, 'C'}, {"pc", no_argument, nullptr, 'P'},
      {nullptr, 0, nullptr, 0}};
  Options o;
  opterr = 0;
  int c;
  double v;
  while ((c = getopt_long(argc, argv, ":l:p:d:vh", longopts, nullptr)) != -1) {
    switch (c) {
      case 'l': o.lib = o.lib_arg = optarg; break;
      case 'p':
        if (!parse_number(optarg, &v) || v < 1 || v > INT_MAX || v != std::floor(v))
          die(2, std::string("bad PID '") + optarg + "'");
        o.pid = static_cast<int>(v);
        break;
      case 'd':
        if (!parse_number(optarg, &v) || v <= 0) die(2, std::string("bad duration '") + optarg + "'");
        o.duration_s = v;
        break;
      case 'j': o.json = true; break;
      case 'v': o.verbose = true; break;
      case 'L':
        if (!parse_number(optarg, &v) || v < 0 || v > 600000) die(2, std::string("bad linger '") + optarg + "'");
        o.linger_ms = static_cast<int>(v);
        break;
      case 'R':
        if (!parse_number(optarg, &v) || v < 1 || v > 1024 || v != std::floor(v) ||
            (static_cast<unsigned>(v) & (static_cast<unsigned>(v) - 1)))
          die(2, std::string("bad ring buffer size '") + optarg + "' (a power of two, 1..1024)");
        o.ringbuf_mb = static_cast<uint32_t>(v);
        break;
      case 'C': o.capture_sites = true; break;
      case 'P': o.pc = true; break;
      case 'h': std::fputs(kUsage, stdout); std::exit(0);
      case ':': die(2, std::string("option ") + argv[optind - 1] + " needs an argument (see --help)");
      default: die(2, std::string("unknown option ") + argv[optind - 1] + " (see --help)");
    }
  }
  if (optind < argc) die(2, std::string("unexpected argument '") + argv[optind] + "' (see --help)");
  if (o.lib.empty()) die(2, "missing -l LIB (see --help)");
  if (o.ringbuf_mb == 0) o.ringbuf_mb = o.capture_sites ? 64 : 16;
  return o;
}

// Resolves LIB and returns the parcagpu probes its .note.stapsdt declares (exits if none).
std::vector<std::string> check_library(Options *o) {
  char real[PATH_MAX];
  if (!realpath(o->lib.c_str(), real)) die(1, "cannot open " + o->lib + ": " + std::strerror(errno));
  o->lib = real;
  std::vector<pt::SdtNote> notes;
  std::string error;
  if (!pt::read_sdt_notes(o->lib, &notes, &error)) die(1, error);
  std::vector<std::string> probes;
  for (const auto &n : notes) {
    if (n.provider != PARCAGPU_PROVIDER) continue;
    if (o->verbose)
      std::fprintf(stderr, "parcagpu-trace: note %s:%s pc=0x%" PRIx64 " semaphore=0x%" PRIx64 " args=%s\n",
                   n.provider.c_str(), n.name.c_str(), n.pc, n.semaphore, n.args.c_str());
    bool dup = false;
    for (const auto &p : probes) dup |= p == n.name;
    if (!dup) probes.push_back(n.name);
  }
  if (probes.empty()) die(1, o->lib + " has no USDT probes of provider '" PARCAGPU_PROVIDER "'");
  if (o->verbose) {
    for (const auto &p : probes) {
      bool handled = false;
      for (const char *h : pt::handled_probes()) handled |= p == h;
      if (!handled) std::fprintf(stderr, "parcagpu-trace: probe %s not handled, not attached\n", p.c_str());
    }
    for (const char *h : pt::handled_probes()) {
      bool present = false;
      for (const auto &p : probes) present |= p == h;
      if (!present)
        std::fprintf(stderr, "parcagpu-trace: probe %s not in %s (an older library?), not attached\n",
                     h, o->lib.c_str());
    }
  }
  return probes;
}

// With -p: a process that has not loaded LIB (yet) fires nothing until it does.
void warn_if_not_mapped(int pid, const std::string &lib) {
  FILE *f = std::fopen(("/proc/" + std::to_string(pid) + "/maps").c_str(), "re");
  if (!f) return;
  char line[PATH_MAX + 256];
  bool found = false;
  while (!found && std::fgets(line, sizeof line, f)) {
    const char *path = std::strchr(line, '/');
    if (!path) continue;
    std::string p(path);
    while (!p.empty() && p.back() == '\n') p.pop_back();
    found = p == lib;
  }
  std::fclose(f);
  if (!found)
    std::fprintf(stderr, "parcagpu-trace: warning: process %d has not loaded %s (yet)\n", pid, lib.c_str());
}

// The target process, watched through a pidfd (readable once it has exited).
int open_target(int pid) {
  int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0 && errno == ESRCH) die(1, "no process with PID " + std::to_string(pid));
  if (fd < 0 && kill(pid, 0) != 0 && errno == ESRCH) die(1, "no process with PID " + std::to_string(pid));
  return fd;  // -1 (no pidfd support): fall back to kill(pid, 0)
}

bool target_exited(int pid, int pidfd) {
  if (pid <= 0) return false;
  if (pidfd >= 0) {
    struct timespec ts {};
    fd_set fds;
    FD_ZERO(&fds);
    FD_SET(pidfd, &fds);
    return pselect(pidfd + 1, &fds, nullptr, nullptr, &ts, nullptr) > 0;
  }
  return kill(pid, 0) != 0 && errno == ESRCH;
}

// Decodes the ring-buffer events and feeds the joiner and the outputs.
struct Tracer {
  const Options &opt;
  pt::Joiner joiner;
  pt::CaptureSites captures;
  pt::Symbolizer symbolizer;
  pt::MmapTracker mmaps;  // mappings as they are made (--capture-sites)
  std::vector<bool> stack_shown;  // per capture stack id: printed in the live table already
  uint32_t last_pid = 0;          // of the last event (maps snapshot, see note_process)
  bool have_pid = false;
  std::unordered_set<uint32_t> seen_pids;
  pt::KernelTable table{stdout};
  pt::Summary meta;  // figures counted here rather than in the joiner
  uint64_t malformed = 0;

  explicit Tracer(const Options &o) : opt(o), captures(o.lib) {}

  static int handle(void *ctx, void *data, size_t size) {
    static_cast<Tracer *>(ctx)->on_event(data, size);
    return 0;
  }

  template <typename T>
  const T *as(const void *data, size_t size) {
    if (size >= sizeof(T)) return static_cast<const T *>(data);
    ++malformed;
    return nullptr;
  }

  static std::string_view str(const char *s, size_t max) { return {s, strnlen(s, max)}; }

  void on_event(const void *data, size_t size) {
    const auto *h = as<pt_header>(data, size);
    if (!h) return;
    if (opt.capture_sites && (!have_pid || h->pid != last_pid)) {
      last_pid = h->pid;
      have_pid = true;
      if (seen_pids.insert(h->pid).second) {
        // A process already running at attach: its maps now, while it surely lives.
        mmaps.drain(&symbolizer);
        symbolizer.note_process(h->pid);
      }
    }
    switch (h->type) {
      case PT_EV_CORRELATION:
        if (const auto *e = as<pt_correlation_event>(data, size)) {
          joiner.on_correlation(h->pid, e->correlation_id, e->signed_cbid);
          if (opt.verbose)
            std::fprintf(stderr, "[%u/%u] cuda_correlation corr=%u cbid=%d (%s) name=%s\n", h->pid,
                         h->tid, e->correlation_id, e->signed_cbid, pt::api_name(e->signed_cbid),
                         e->name);
        }
        break;
      case PT_EV_KERNEL:
      case PT_EV_KERNEL_EXECUTED:
        if (const auto *e = as<pt_kernel_event>(data, size)) on_kernel(*e);
        break;
      case PT_EV_ACTIVITY_BATCH:
        if (const auto *e = as<pt_batch_event>(data, size)) {
          joiner.on_other(h->pid);
          std::fprintf(stderr, "[%u/%u] activity_batch records=0x%" PRIx64 " count=%u kernels=%u other_kinds=%u unreadable=%u\n",
                       h->pid, h->tid, static_cast<uint64_t>(e->records), e->count, e->kernels,
                       e->other_kinds, e->unreadable);
        }
        break;
      case PT_EV_ERROR:
        if (const auto *e = as<pt_error_event>(data, size)) {
          joiner.on_error(h->pid);
          std::fprintf(stderr, "parcagpu-trace: pid %u: library error %d [%s]: %s%s\n", h->pid,
                       e->code, e->component, e->message,
                       (h->flags & PT_F_MSG_FAULT) ? " (strings unreadable)" : "");
        }
        break;
      case PT_EV_GPU_CONFIG:
        if (const auto *e = as<pt_gpu_config_event>(data, size)) {
          joiner.on_gpu_config(h->pid);
          if (opt.verbose)
            std::fprintf(stderr, "[%u/%u] gpu_config device=%u sampling_factor=%u clock_khz=%u sm_count=%u\n",
                         h->pid, h->tid, e->device_id, e->sampling_factor, e->clock_khz, e->sm_count);
        }
        break;
      case PT_EV_GRAPH_CAPTURE:
        if (const auto *e = as<pt_capture_event>(data, size)) on_capture(*e, data, size);
        break;
      case PT_EV_GRAPH_NODE_CLONE:
        if (const auto *e = as<pt_clone_event>(data, size)) {
          joiner.on_other(h->pid);
          captures.on_clone(h->pid, e->original_node_id, e->cloned_node_id, e->exec_graph_id);
          if (opt.verbose)
            std::fprintf(stderr, "[%u/%u] graph_node_clone original=%" PRIu64 " cloned=%" PRIu64 " exec_graph=%u\n",
                         h->pid, h->tid, static_cast<uint64_t>(e->original_node_id),
                         static_cast<uint64_t>(e->cloned_node_id), e->exec_graph_id);
        }
        break;
      case PT_EV_CUBIN_LOADED:
      case PT_EV_CUBIN_UNLOADED:
      case PT_EV_STALL_REASON_MAP:
      case PT_EV_PC_SAMPLE_BATCH:
        if (const auto *e = as<pt_meta_event>(data, size)) on_meta(*e);
        break;
      default: ++malformed;
    }
  }

  void on_capture(const pt_capture_event &e, const void *data, size_t size) {
    joiner.on_other(e.h.pid);
    if (opt.verbose)
      std::fprintf(stderr, "[%u/%u] graph_capture_launch corr=%u cbid=%d (%s) graph=%u node=%" PRIu64 " name=%s\n",
                   e.h.pid, e.h.tid, e.correlation_id, e.signed_cbid, pt::api_name(e.signed_cbid),
                   e.graph_id, static_cast<uint64_t>(e.graph_node_id), e.name);
    std::vector<pt::Frame> stack;
    if (e.h.flags & PT_F_STACK) {
      const auto *se = as<pt_capture_stack_event>(data, size);
      if (!se) return;
      pt::RawUserStack raw;
      raw.ip = se->ip;
      raw.sp = se->sp;
      raw.fp = se->fp;
      const size_t n = se->stack_bytes > 0 ? std::min<size_t>(se->stack_bytes / 8, PT_STACK_MAX) : 0;
      raw.fp_frames.assign(se->frames, se->frames + n);
      raw.raw_base = se->raw_base;
      raw.raw = se->raw;
      raw.raw_len = std::min<size_t>(se->raw_bytes, sizeof se->raw);
      mmaps.drain(&symbolizer);  // every mapping made before the capture is in by now
      stack = symbolizer.symbolize_stack(e.h.pid, raw);
      if (opt.verbose) {
        std::fprintf(stderr, "    stack: %zu frame-pointer frames (", n);
        for (size_t i = 0; i < n; ++i)
          std::fprintf(stderr, "%s0x%" PRIx64, i ? " " : "", static_cast<uint64_t>(raw.fp_frames[i]));
        std::fprintf(stderr, "), %u raw bytes from sp=0x%" PRIx64 "; unwound (? = scanned), before "
                     "dropping libparcagpu/libcupti/libcuda frames:\n",
                     se->raw_bytes, static_cast<uint64_t>(se->sp));
        for (const pt::Frame &f : stack) std::fprintf(stderr, "      %s\n", f.text().c_str());
      }
    }
    captures.on_capture(e.h.pid, e.correlation_id, e.signed_cbid, str(e.name, sizeof e.name),
                        e.graph_id, e.graph_node_id, std::move(stack));
  }

  void on_kernel(const pt_kernel_event &e) {
    pt::KernelRecord k;
    k.pid = e.h.pid;
    k.correlation_id = e.correlation_id;
    k.device_id = e.device_id;
    k.stream_id = e.stream_id;
    k.graph_id = e.graph_id;
    k.graph_node_id = e.graph_node_id;
    k.start = e.start;
    k.end = e.end;
    k.name = str(e.name, sizeof e.name);
    if (e.h.type == PT_EV_KERNEL_EXECUTED) {  // -v only: a second view of the same kernel
      joiner.on_other(e.h.pid);
      std::fprintf(stderr, "[%u/%u] kernel_executed corr=%u dev=%u stream=%u graph=%u node=%" PRIu64 " start=%" PRIu64 " end=%" PRIu64 " name=%s\n",
                   e.h.pid, e.h.tid, e.correlation_id, e.device_id, e.stream_id, e.graph_id,
                   static_cast<uint64_t>(e.graph_node_id), static_cast<uint64_t>(e.start),
                   static_cast<uint64_t>(e.end), e.name);
      return;
    }
    const pt::Joiner::Match m = joiner.on_kernel(k);
    if (opt.verbose)
      std::fprintf(stderr, "[%u/%u] kernel corr=%u kind=%u dev=%u ctx=%u stream=%u graph=%u node=%" PRIu64 " start=%" PRIu64 " end=%" PRIu64 " batch=%u/%u %s name=%s\n",
                   e.h.pid, e.h.tid, e.correlation_id, e.kind, e.device_id, e.context_id,
                   e.stream_id, e.graph_id, static_cast<uint64_t>(e.graph_node_id),
                   static_cast<uint64_t>(e.start), static_cast<uint64_t>(e.end), e.batch_index,
                   e.batch_count, m.matched ? "matched" : "waiting", e.name);
    const pt::CaptureSites::Site *site =
        k.graph_id != 0 ? captures.on_graph_kernel(k.pid, k.graph_node_id, k.name, k.start, k.end)
                        : nullptr;
    if (opt.json) return;
    if (!opt.capture_sites || !site || site->stack_id == 0) {
      table.row(k, m);
      return;
    }
    const pt::CaptureSites::Stack &st = captures.stack(site->stack_id);
    const std::string at = st.captured_at_function();
    std::vector<std::string> lines;
    if (stack_shown.size() <= site->stack_id) stack_shown.resize(site->stack_id + 1);
    if (!stack_shown[site->stack_id]) {
      stack_shown[site->stack_id] = true;
      for (size_t i = 0; i < st.frames.size(); ++i)
        lines.push_back(std::string(static_cast<int>(i) == st.captured_at ? "=> " : "   ") +
                        st.frames[i].text());
    }
    const pt::CaptureNote note{at, lines.empty() ? nullptr : &lines};
    table.row(k, m, &note);
  }

  void on_meta(const pt_meta_event &e) {
    joiner.on_other(e.h.pid);
    const char *what = "";
    switch (e.h.type) {
      case PT_EV_CUBIN_LOADED: ++meta.cubin_loaded; what = "cubin_loaded"; break;
      case PT_EV_CUBIN_UNLOADED: ++meta.cubin_unloaded; what = "cubin_unloaded"; break;
      case PT_EV_STALL_REASON_MAP: ++meta.stall_reason_maps; what = "stall_reason_map"; break;
      case PT_EV_PC_SAMPLE_BATCH: ++meta.pc_sample_batches; what = "pc_sample_batch"; break;
    }
    if (opt.verbose)
      std::fprintf(stderr, "[%u/%u] %s crc=0x%" PRIx64 " ptr=0x%" PRIx64 " size/count=%" PRIu64 "%s\n",
                   e.h.pid, e.h.tid, what, static_cast<uint64_t>(e.crc), static_cast<uint64_t>(e.ptr),
                   static_cast<uint64_t>(e.size),
                   (e.h.flags & PT_F_BLOB_FAULT) ? " (blob unreadable)" : "");
  }
};

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Polls until -d elapses, a signal arrives or the target exits. Returns true if the target exited.
bool run_until_done(pt::BpfSession &s, Tracer &t, int pidfd, Clock::time_point start) {
  const Options &o = t.opt;
  while (!g_signals) {
    int n = s.poll(100);
    if (n < 0 && n != -EINTR) die(1, std::string("ring buffer poll failed: ") + std::strerror(-n));
    if (t.mmaps.is_open()) t.mmaps.drain(&t.symbolizer);  // keep the perf buffers from filling
    if (o.duration_s > 0 && seconds_since(start) >= o.duration_s) return false;
    if (target_exited(o.pid, pidfd)) return true;
  }
  return false;
}

void drain(pt::BpfSession &s) {
  while (s.consume() > 0) {
  }
}

// Exit with the traced processes still running: stop announcements first, so the library (its
// consumer count dropping) flushes the kernels of what it announced, and wait for those kernels
// while some process that still awaits them is alive, at most --linger ms.
void linger(pt::BpfSession &s, const Options &o, const pt::Joiner &j) {
  if (o.linger_ms <= 0 || j.awaiting_kernels() == 0) return;
  auto alive = [](const std::vector<uint32_t> &pids) {
    for (uint32_t p : pids)
      if (kill(static_cast<pid_t>(p), 0) == 0 || errno != ESRCH) return true;
    return false;
  };
  if (!alive(j.awaiting_pids())) return;
  s.detach("cuda_correlation");
  const sig_atomic_t signals = g_signals;
  const auto until = Clock::now() + std::chrono::milliseconds(o.linger_ms);
  auto next_check = Clock::now();
  while (j.awaiting_kernels() > 0 && Clock::now() < until && g_signals == signals) {
    s.poll(50);
    if (Clock::now() >= next_check) {  // stop once every process still awaiting has gone
      if (!alive(j.awaiting_pids())) break;
      next_check = Clock::now() + std::chrono::milliseconds(250);
    }
  }
  drain(s);
}

pt::Summary summarize(const pt::BpfSession &s, const Tracer &t, double duration) {
  uint64_t st[PT_STAT_MAX];
  s.read_stats(st);
  pt::Summary sum = t.meta;
  t.joiner.fill(&sum);
  t.captures.fill(&sum, t.opt.capture_sites);
  sum.ringbuf_drops = st[PT_STAT_RINGBUF_DROPS];
  sum.read_errors = st[PT_STAT_READ_ERRORS];
  sum.kernel_executed_events = st[PT_STAT_FIRE_KERNEL_EXECUTED];
  sum.activity_batches = st[PT_STAT_FIRE_ACTIVITY_BATCH];
  sum.batch_records_over_cap = st[PT_STAT_BATCH_OVER_CAP];
  sum.records_other_kind = st[PT_STAT_RECORDS_OTHER_KIND];
  sum.pc_sample_records = st[PT_STAT_PC_SAMPLE_RECORDS];
  sum.capture_stacks_dropped = st[PT_STAT_CAPTURE_STACKS_DROPPED];
  sum.duration_s = duration;
  sum.events_per_s = duration > 0 ? static_cast<double>(sum.events) / duration : 0;
  if (t.malformed)
    std::fprintf(stderr, "parcagpu-trace: %" PRIu64 " malformed ring-buffer events\n", t.malformed);
  if (t.opt.verbose) {
    std::fprintf(stderr, "parcagpu-trace: read errors: args %" PRIu64 ", record pointers %" PRIu64
                 ", records %" PRIu64 ", strings %" PRIu64 ", stall blob %" PRIu64 ", user stack %" PRIu64 "\n",
                 st[PT_STAT_READ_ERR_ARG], st[PT_STAT_READ_ERR_RECORD_PTR], st[PT_STAT_READ_ERR_RECORD],
                 st[PT_STAT_READ_ERR_STRING], st[PT_STAT_READ_ERR_BLOB], st[PT_STAT_READ_ERR_STACK]);
    std::fprintf(stderr, "parcagpu-trace: graph_capture_launch firings %" PRIu64 " (bpf_get_stack failed %" PRIu64
                 "), graph_node_clone firings %" PRIu64 ", ELF files loaded for symbols %" PRIu64 "\n",
                 st[PT_STAT_FIRE_GRAPH_CAPTURE_LAUNCH], st[PT_STAT_STACK_ERRORS],
                 st[PT_STAT_FIRE_GRAPH_NODE_CLONE], t.symbolizer.files_loaded());
    if (t.mmaps.is_open())
      std::fprintf(stderr, "parcagpu-trace: mapping records %" PRIu64 ", lost %" PRIu64 "\n",
                   t.mmaps.records(), t.mmaps.lost());
  }
  return sum;
}

std::string explain(const std::string &what, int err) {
  if (err == EPERM || err == EACCES)
    return what + " (run as root, or with CAP_BPF and CAP_PERFMON)";
  const std::string &w = pt::BpfSession::last_libbpf_warning();
  return w.empty() ? what : what + " (libbpf: " + w + ")";
}

}  // namespace

int main(int argc, char **argv) {
  Options opt = parse_args(argc, argv);
  const std::vector<std::string> probes = check_library(&opt);
  const int pidfd = opt.pid > 0 ? open_target(opt.pid) : -1;
  if (opt.pid > 0) warn_if_not_mapped(opt.pid, opt.lib);
  pt::BpfSession::setup_libbpf_logging(opt.verbose);
  struct sigaction sa {};
  sa.sa_handler = on_signal;  // no SA_RESTART: a signal ends the ring-buffer poll
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  pt::BpfSession session;
  Tracer tracer(opt);
  std::string error;
  int err = 0;
  if (!session.load(opt.verbose, opt.capture_sites, opt.ringbuf_mb << 20, &error, &err))
    die(1, explain(error, err));
  if (!session.open_ringbuf(&Tracer::handle, &tracer, &error)) die(1, error);
  if (opt.capture_sites && !tracer.mmaps.open(&error))
    std::fprintf(stderr, "parcagpu-trace: warning: %s; stacks of processes that exit quickly "
                 "may stay unsymbolized\n", error.c_str());
  // The PC sampling view: its own BPF object, ring buffer and thread (trace/pc_session.h).
  // Attached first: the library fires metadata when a probe's semaphore rises, which happens
  // for the first uprobe on it only.
  pt::PcSession pc;
  if (opt.pc && !pc.start(opt.lib, opt.pid, probes, opt.ringbuf_mb << 20, opt.verbose, &error))
    die(1, explain(error, EPERM));
  const int attached = session.attach(opt.lib, opt.pid, probes, &error, &err);
  if (attached < 0) die(1, explain(error, err));
  std::fprintf(stderr, "parcagpu-trace: attached %d probes to %s\n", attached + pc.attached(),
               opt.lib_arg.c_str());
  std::fflush(stderr);

  const auto start = Clock::now();
  if (!opt.json) tracer.table.header();

  const bool exited = run_until_done(session, tracer, pidfd, start);
  drain(session);
  tracer.joiner.set_closing();
  if (!exited) linger(session, opt, tracer.joiner);
  const double traced_s = seconds_since(start);
  session.detach_all();  // ~0.1 s per probe: the kernel's uprobe unregistration
  drain(session);

  pc.stop();

  const pt::Summary sum = summarize(session, tracer, traced_s);
  if (opt.json) {
    std::string j = pt::summary_json(sum);
    if (opt.pc) j.insert(j.rfind('}'), ",\"pc\":" + pc.profile().json());
    std::printf("%s\n", j.c_str());
  } else {
    pt::print_summary(stdout, sum);
    if (opt.pc) pc.profile().print(stdout);
  }
  std::fflush(stdout);
  return 0;
}
