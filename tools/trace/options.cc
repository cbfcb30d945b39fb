#include "options.h"

#include "trace_events.h"

#include <argp.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "parcagpu_version.h"

const char *argp_program_version = "parcagpu-trace " PARCAGPU_VERSION;
const char *argp_program_bug_address = "https://github.com/parca-dev/parcagpu/issues";

namespace parcagpu::trace {
namespace {

const char kDoc[] =
    "Which code of mine spends the GPU time? Attaches to the parcagpu USDT probes of every "
    "process that loaded libparcagpu (or only LIB / PID / a cgroup), joins each kernel's GPU "
    "time to the CPU stack of the launch that ran it, and prints GPU time by stack.\n"
    "\n"
    "EXAMPLES:\n"
    "  parcagpu-trace             # every process with the library, until Ctrl-C\n"
    "  parcagpu-trace 10          # a table of the last 10 s, every 10 s\n"
    "  parcagpu-trace 5s 3        # three 5 s tables, then exit\n"
    "  parcagpu-trace -p 1234 -d 30s   # one process, 30 s or until it exits\n"
    "  parcagpu-trace -l /usr/lib/parcagpu/libparcagpu.so   # one library file\n"
    "  parcagpu-trace -c /sys/fs/cgroup/kubepods.slice/x    # one cgroup\n"
    "  parcagpu-trace --svg gpu.svg   # and a flame graph at exit\n"
    "  parcagpu-trace --folded gpu.folded   # for flamegraph.pl / speedscope\n"
    "  parcagpu-trace --pprof gpu.pb.gz     # for pprof, Parca, Pyroscope, speedscope\n"
    "  parcagpu-trace --capture-sites  # graph kernels where they were captured\n"
    "  parcagpu-trace --pc -p 1234     # and PC samples: stall reasons, lines\n"
    "  parcagpu-trace --json -d 10s     # one JSON object at exit\n"
    "  parcagpu-trace --json=s.json     # the text report, and the JSON summary in s.json\n"
    "  parcagpu-trace --json-lines      # a JSON line per kernel, stack, interval\n"
    "  parcagpu-trace -k               # a line per kernel as it is matched\n"
    "\n"
    "DURATION is a number with a unit: 500ms, 10s, 2m, 1h (a bare number is seconds).\n"
    "Needs CAP_BPF and CAP_PERFMON, and CAP_SYS_ADMIN to attach uprobes on kernels with commit "
    "ba677dbe77af (Linux 6.16, and stable kernels updated since July 2025); root has them all.\n"
    "\vExit status: 0; 1 for a missing library or process, missing privileges or a BPF failure, "
    "or an output that could not be written at exit; 2 for bad arguments.";

enum Key {
  kJson = 1000,
  kJsonLines,
  kLinger,
  kRingbuf,
  kCaptureSites,
  kPc,
  kFolded,
  kSvg,
  kPprof,
  kNoStacks,
  kNoPython,
  kNoAutograd,
  kMaxAge,
  kMaxPending,
  kStackBytes,
  kListCounters,
  kNvtx,
};

const argp_option kOptions[] = {
    {"lib", 'l', "LIB", 0, "Only this library file (default: every file with parcagpu probes that "
                           "a process maps, now or later)", 0},
    {"pid", 'p', "PID", 0, "Only this process; stop when it exits", 0},
    {"cgroup", 'c', "PATH", 0, "Only tasks in this cgroup v2 directory", 0},
    {"duration", 'd', "DURATION", 0, "Stop after DURATION (default: Ctrl-C / SIGTERM)", 0},
    {"top", 'n', "N", 0, "Stacks in the GPU time table (default 10)", 0},
    {"kernels", 'k', nullptr, 0, "A line per kernel when it is matched to its launch", 0},
    {"folded", kFolded, "FILE", 0, "Folded stacks at exit, GPU ns as value (- = stdout): "
                                   "flamegraph.pl, inferno, speedscope read them; with -, stdout carries "
                                   "nothing else and the report goes to stderr", 0},
    {"svg", kSvg, "FILE", 0, "A flame graph of GPU time by launch stack at exit", 0},
    {"pprof", kPprof, "FILE", 0, "A gzipped pprof profile at exit: GPU ns and kernels by launch "
                                 "stack, the kernel as label \"kernel\" (pprof, Parca, Pyroscope, "
                                 "speedscope)", 0},
    {"capture-sites", kCaptureSites, nullptr, 0,
     "Graph kernels under the stack that captured them (stream capture), not the replay", 0},
    {"pc", kPc, nullptr, 0,
     "Also PC sampling (the library samples only while this is attached): the hottest kernels by "
     "PC samples, their stall reasons, hottest PC offsets and source lines (-lineinfo)", 0},
    {"nvtx", kNvtx, nullptr, 0,
     "Also NVTX ranges (the library collects them only while this is attached): each launch under "
     "its thread's open ranges, frames \"[nvtx] NAME\" at the root of its stack", 0},
    {"json", kJson, "FILE", OPTION_ARG_OPTIONAL,
     "The summary as one JSON object on stdout; --json=FILE: in FILE at exit, and the text report "
     "on stdout as without it", 0},
    {"json-lines", kJsonLines, nullptr, 0,
     "JSON objects, one per line: stack, kernel (when matched), interval, summary (last)", 0},
    {"no-stacks", kNoStacks, nullptr, 0, "Take no user stack at the launch probe", 0},
    {"no-python", kNoPython, nullptr, 0, "Show no Python frames: a stack through CPython "
                                         "(3.11-3.13) shows the interpreter's native frames only", 0},
    {"no-autograd", kNoAutograd, nullptr, 0, "PyTorch's backward launches keep their native stack "
                                             "(by default they go under the Python line of the forward "
                                             "call that created their autograd node)", 0},
    {"stack-bytes", kStackBytes, "N", 0, "User stack copied at each launch for unwinding by DWARF CFI "
                                        "(code without frame pointers), a multiple of 8 from 64 to 131072 "
                                        "(default 131072; 0 = frame pointers only)", 0},
    {"linger", kLinger, "DURATION", 0, "At exit, wait up to DURATION for the kernels of announced "
                                       "launches (default 2s; 0 = do not wait). Behind (ring buffer "
                                       "drops, or not emptied 500 ms after the stop), the exit reads "
                                       "for 500 ms and counts what is still queued as left", 0},
    {"max-age", kMaxAge, "DURATION", 0, "Forget launches and kernels that waited this long for "
                                        "each other, counted (default 30s)", 0},
    {"max-pending", kMaxPending, "N", 0, "Launches and kernels waiting at most (default 262144)", 0},
    {"ringbuf-mb", kRingbuf, "N", 0, "Ring buffer MiB, a power of two (default 32; 64 with "
                                     "--capture-sites)", 0},
    {"list-counters", kListCounters, nullptr, 0, "List the summary's counters (JSON keys, -v lines, "
                                                 "what each counts) and exit; with --json as JSON", 0},
    {"verbose", 'v', nullptr, 0, "libbpf output, one line per event and every counter, on stderr", 0},
    {},
};

// Where this tool's documentation is: installed next to it (PREFIX/bin/parcagpu-trace,
// PREFIX/DOCDIR/parcagpu-trace.md, as cmake/Packaging.cmake installs it), else the source's.
std::string doc_path() {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    const std::string self(exe, static_cast<size_t>(n));
    const std::string installed =
        self.substr(0, self.rfind('/')) + "/../" PARCAGPU_INSTALL_DOCDIR "/parcagpu-trace.md";
    char real[PATH_MAX];
    if (realpath(installed.c_str(), real)) return real;
  }
  return "tools/trace/README.md in parcagpu's source (installed as " PARCAGPU_INSTALL_DOCDIR
         "/parcagpu-trace.md)";
}

// argp's text after the options: the documentation's path, found when --help asks for it.
char *help_filter(int key, const char *text, void *) {
  if (key != ARGP_KEY_HELP_POST_DOC || !text) return const_cast<char *>(text);
  return strdup((std::string(text) + " See " + doc_path() + ".").c_str());
}

[[noreturn]] void bad(argp_state *state, const std::string &msg) {
  argp_error(state, "%s", msg.c_str());
  std::exit(2);  // argp_error exits already (argp_err_exit_status)
}

bool parse_count(const char *s, long lo, long hi, long *out) {
  char *end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// The options that name a file or directory: an empty name would quietly mean "none given".
const char *path_option(int key) {
  switch (key) {
    case 'l': return "-l";
    case 'c': return "-c";
    case kJson: return "--json";
    case kFolded: return "--folded";
    case kSvg: return "--svg";
    case kPprof: return "--pprof";
    default: return nullptr;
  }
}

// The options with a number or a duration, checked. False: `key` is not one of them.
bool parse_valued_option(int key, const char *arg, argp_state *state, Options *o) {
  long n = 0;
  double d = 0;
  switch (key) {
    case 'p':
      if (!parse_count(arg, 1, INT_MAX, &n)) bad(state, std::string("bad PID '") + arg + "'");
      o->pid = static_cast<int>(n);
      return true;
    case 'd':
      if (!parse_duration(arg, &d) || d <= 0) bad(state, std::string("bad duration '") + arg + "'");
      o->duration_s = d;
      return true;
    case 'n':
      if (!parse_count(arg, 1, 100000, &n)) bad(state, std::string("bad -n '") + arg + "'");
      o->top = static_cast<size_t>(n);
      return true;
    case kStackBytes:
      if (!parse_count(arg, 0, PT_STACK_COPY_MAX, &n) || n % 8 || (n > 0 && n < 64))
        bad(state, std::string("bad --stack-bytes '") + arg + "' (0, or a multiple of 8 from 64 to 131072)");
      o->stack_bytes = static_cast<uint32_t>(n);
      return true;
    case kLinger:
      if (!parse_duration(arg, &d) || d < 0 || d > 600) bad(state, std::string("bad linger '") + arg + "'");
      o->linger_s = d;
      return true;
    case kMaxAge:
      if (!parse_duration(arg, &d) || d <= 0) bad(state, std::string("bad max-age '") + arg + "'");
      o->max_age_s = d;
      return true;
    case kMaxPending:
      if (!parse_count(arg, 2, LONG_MAX, &n)) bad(state, std::string("bad max-pending '") + arg + "'");
      o->max_pending = static_cast<size_t>(n);
      return true;
    case kRingbuf:
      if (!parse_count(arg, 1, 1024, &n) || (n & (n - 1)))
        bad(state, std::string("bad ring buffer size '") + arg + "' (a power of two, 1..1024)");
      o->ringbuf_mb = static_cast<uint32_t>(n);
      return true;
  }
  return false;
}

// INTERVAL [COUNT], as vmstat takes them.
void parse_positional(const char *arg, argp_state *state, Options *o) {
  long n = 0;
  double d = 0;
  if (state->arg_num == 0) {
    if (!parse_duration(arg, &d) || d <= 0) bad(state, std::string("bad interval '") + arg + "'");
    o->interval_s = d;
  } else if (state->arg_num == 1) {
    if (!parse_count(arg, 1, LONG_MAX, &n)) bad(state, std::string("bad count '") + arg + "'");
    o->count = n;
  } else {
    bad(state, std::string("unexpected argument '") + arg + "'");
  }
}

error_t parse_opt(int key, char *arg, argp_state *state) {
  auto *o = static_cast<Options *>(state->input);
  if (const char *flag = path_option(key); flag && arg && *arg == '\0')
    bad(state, std::string(flag) + (key == 'l' || key == 'c' ? ": an empty path"
                                                              : ": an empty file name (a path, or - for stdout)"));
  if (parse_valued_option(key, arg, state, o)) return 0;
  switch (key) {
    case 'l': o->lib = arg; break;
    case 'c': o->cgroup = arg; break;
    case 'k': o->kernels = true; break;
    case 'v': o->verbose = true; break;
    case kJson:
      if (arg)
        o->json_path = arg;
      else
        o->json = true;
      break;
    case kJsonLines: o->json_lines = true; break;
    case kCaptureSites: o->capture_sites = true; break;
    case kPc: o->pc = true; break;
    case kNvtx: o->nvtx = true; break;
    case kListCounters: o->list_counters = true; break;
    case kNoStacks: o->stacks = false; break;
    case kNoPython: o->python = false; break;
    case kNoAutograd: o->autograd = false; break;
    case kFolded: o->folded_path = arg; break;
    case kSvg: o->svg_path = arg; break;
    case kPprof: o->pprof_path = arg; break;
    case ARGP_KEY_ARG: parse_positional(arg, state, o); break;
    default: return ARGP_ERR_UNKNOWN;
  }
  return 0;
}

// Why the file output `path` could not be written at exit, or "" when it can: an existing file
// is opened for writing (not truncated: it is written only at exit), a new one is created and
// removed again. Checked at start, so that a typo costs nothing but a message, not the trace.
std::string unwritable(const std::string &path) {
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return std::strerror(EISDIR);
    if (S_ISFIFO(st.st_mode)) return "";  // a pipe: its reader may come later
    const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return std::strerror(errno);
    close(fd);
    return "";
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return std::strerror(errno);
  close(fd);
  unlink(path.c_str());
  return "";
}

}  // namespace

bool parse_duration(const char *text, double *seconds) {
  char *end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (errno || end == text || !std::isfinite(v) || v < 0) return false;
  const std::string unit(end);
  double scale;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "ms") scale = 1e-3;
  else if (unit == "us") scale = 1e-6;
  else if (unit == "m" || unit == "min") scale = 60;
  else if (unit == "h") scale = 3600;
  else return false;
  *seconds = v * scale;
  return true;
}

Options parse_options(int argc, char **argv) {
  Options o;
  argp_err_exit_status = 2;
  static const argp parser = {kOptions, parse_opt, "[INTERVAL [COUNT]]", kDoc, nullptr, help_filter, nullptr};
  argp_parse(&parser, argc, argv, 0, nullptr, &o);
  // 32 MiB holds about 250 launch events with a whole 128 KiB stack copy each (most copies end
  // far sooner, at the stack's end: they are sent at their size): 2 s of the
  // library's default announcement rate (100 eager + 20 graph launches a second per process),
  // read every 100 ms. Larger costs attach time (the kernel allocates and zeroes it all).
  if (o.ringbuf_mb == 0) o.ringbuf_mb = o.capture_sites ? 64 : 32;
  if (o.json_path == "-") {  // --json=- is --json
    o.json = true;
    o.json_path.clear();
  }
  if (o.json && o.json_lines) {
    std::fprintf(stderr, "parcagpu-trace: --json and --json-lines exclude each other\n");
    std::exit(2);
  }
  std::string on_stdout;  // the file outputs given "-"
  for (const auto &[flag, path] : {std::pair{"--folded", &o.folded_path}, std::pair{"--svg", &o.svg_path},
                                   std::pair{"--pprof", &o.pprof_path}})
    if (*path == "-") on_stdout += (on_stdout.empty() ? "" : " and ") + std::string(flag);
  if (on_stdout.find(" and ") != std::string::npos) {
    std::fprintf(stderr, "parcagpu-trace: %s cannot all write to stdout (-): give all but one a file\n",
                 on_stdout.c_str());
    std::exit(2);
  }
  if (!on_stdout.empty() && (o.json || o.json_lines)) {
    std::fprintf(stderr, "parcagpu-trace: %s writes to stdout (-), so does %s: give one of them a file\n",
                 on_stdout.c_str(), o.json ? "--json" : "--json-lines");
    std::exit(2);
  }
  for (const auto &[flag, path] : {std::pair{"--folded", &o.folded_path}, std::pair{"--svg", &o.svg_path},
                                   std::pair{"--pprof", &o.pprof_path}, std::pair{"--json", &o.json_path}}) {
    if (path->empty() || *path == "-" || o.list_counters) continue;
    if (const std::string why = unwritable(*path); !why.empty()) {
      std::fprintf(stderr, "parcagpu-trace: %s %s: cannot write it: %s\n", flag, path->c_str(), why.c_str());
      std::exit(2);
    }
  }
  return o;
}

}  // namespace parcagpu::trace
