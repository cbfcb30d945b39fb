// parcagpu-trace's command line (argp, as libbpf-tools parse theirs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace parcagpu::trace {

struct Options {
  std::string lib;           // -l: this library file only ("" = every file with parcagpu notes)
  int pid = -1;              // -p: this process only; stop when it exits
  std::string cgroup;        // -c: tasks of this cgroup (v2 directory) only
  double duration_s = 0;     // -d: 0 = until Ctrl-C / SIGTERM / -p's exit
  double interval_s = 0;     // INTERVAL: a summary of the last interval every INTERVAL
  long count = 0;            // COUNT: stop after COUNT intervals (0 = no limit)
  bool json = false;         // the summary as one JSON object on stdout (instead of the text)
  std::string json_path;     // --json=FILE: the JSON summary in FILE, the text report as usual
  bool json_lines = false;   // a JSON object per line: kernels, stacks, intervals, summary
  bool kernels = false;      // -k: one line per matched kernel
  bool verbose = false;      // -v
  bool list_counters = false;  // --list-counters: print the counter table (tools/trace/counters.h), exit
  bool capture_sites = false;
  bool pc = false;           // --pc: PC sampling (tools/trace/pc_profile.h)
  bool nvtx = false;         // --nvtx: NVTX ranges as frames (tools/trace/nvtx_ranges.h)
  bool stacks = true;        // --no-stacks: no user stack at cuda_correlation
  bool python = true;        // --no-python: no CPython frames in launch stacks
  bool autograd = true;      // --no-autograd: PyTorch backward launches not put under their forward
  uint32_t stack_bytes = 131072;  // --stack-bytes: user stack copied per stack for DWARF unwinding;
                                // a GEMM library's frames alone passed 8 KiB on the H100 (issue 29)
  std::string folded_path;   // --folded FILE ("-" = stdout)
  std::string svg_path;      // --svg FILE ("-" = stdout)
  std::string pprof_path;    // --pprof FILE ("-" = stdout): gzipped pprof profile

  // Whether a file output (--folded, --svg, --pprof) is "-": stdout then carries that file alone,
  // and the text report goes to stderr, so that `--folded=- | flamegraph.pl` reads nothing else.
  bool stdout_is_a_file() const { return folded_path == "-" || svg_path == "-" || pprof_path == "-"; }
  size_t top = 10;           // -n: stacks in the tables
  double linger_s = 2;       // --linger (the exit sequence: parcagpu_trace.cc)
  double max_age_s = 30;     // --max-age: the joiner forgets what waited this long
  size_t max_pending = 1 << 18;  // --max-pending: launches + kernels the joiner holds
  uint32_t ringbuf_mb = 0;   // 0 = default: 32, or 64 with --capture-sites
};

// Parses argv; prints --help / --version and exits 0, or a message and exits 2 on bad input.
Options parse_options(int argc, char **argv);

// "10s", "500ms", "2m", "1h", "250us"; a bare number is seconds. False on anything else.
bool parse_duration(const char *text, double *seconds);

}  // namespace parcagpu::trace
