// agent-consumer: the test suite's stand-in for the production agent (docs/probe-abi.md). It sees
// what that agent would see of a parcagpu library, and nothing more, and prints one JSON summary
// on stdout when it stops (SIGINT/SIGTERM, -d, or the -p process exiting).
//
//   agent-consumer -l LIB [-p PID] [-d SECONDS] [-s SCALE_FACTOR] [-R BYTES_PER_SECOND]
//
// -s is the agent's --bpf-cupti-event-scale-factor: its one ring buffer of events holds
// 1 MiB << SCALE_FACTOR bytes (0, the agent's default, unless a test asks for more).
// -R reads that ring no faster than BYTES a second, as a slower reader would (the agent reads it
// from one goroutine, handling each event before the next); by default as fast as it can.
//
// Its choice of probes and addresses is agent_notes.cc, its reading is agent_consumer.bpf.c, its
// accounting agent_summary.cc. Probes are attached to LIB for every process (the agent attaches
// per file, not per process), or for PID only with -p.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "agent_consumer.skel.h"
#include "agent_notes.h"
#include "agent_summary.h"

namespace ag = parcagpu::agent;

namespace {

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

[[noreturn]] void die(const std::string &msg) {
  std::fprintf(stderr, "agent-consumer: %s\n", msg.c_str());
  std::exit(1);
}

struct Options {
  std::string lib;
  int pid = -1;
  double duration_s = 0;
  int scale_factor = 0;         // the agent ring is AC_AGENT_RING_BYTES << scale_factor
  double read_bytes_per_s = 0;  // 0: the agent ring is read as fast as this process can
};

constexpr const char *kUsage =
    "usage: agent-consumer -l LIB [-p PID] [-d SECONDS] [-s FACTOR] [-R BYTES_PER_SECOND]";

Options parse_args(int argc, char **argv) {
  Options o;
  for (int c; (c = getopt(argc, argv, "l:p:d:s:R:h")) != -1;) {
    if (c == 'l')
      o.lib = optarg;
    else if (c == 'p')
      o.pid = std::atoi(optarg);
    else if (c == 'd')
      o.duration_s = std::atof(optarg);
    else if (c == 's')
      o.scale_factor = std::atoi(optarg);
    else if (c == 'R')
      o.read_bytes_per_s = std::atof(optarg);
    else {
      std::fprintf(c == 'h' ? stdout : stderr, "%s\n", kUsage);
      std::exit(c == 'h' ? 0 : 2);
    }
  }
  char real[PATH_MAX];
  if (o.lib.empty() || optind != argc || o.pid == 0) die(kUsage);
  // The agent caps its ring at 2 GiB (tracer.go); BPF wants a power of two.
  if (o.scale_factor < 0 || o.scale_factor > 11) die("-s: a scale factor from 0 to 11");
  if (!realpath(o.lib.c_str(), real)) die("cannot resolve " + o.lib + ": " + std::strerror(errno));
  o.lib = real;
  return o;
}

// The agent's cubin read: /proc/PID/mem, at most 256 MiB.
bool read_process_memory(uint32_t pid, uint64_t addr, uint64_t size, std::vector<uint8_t> *bytes) {
  if (size == 0 || size > (256u << 20)) return false;
  const int fd = open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bytes->resize(size);
  uint64_t got = 0;
  while (got < size) {
    const ssize_t n = pread(fd, bytes->data() + got, size - got, static_cast<off_t>(addr + got));
    if (n <= 0) break;
    got += static_cast<uint64_t>(n);
  }
  close(fd);
  return got == size;
}

bpf_program *program_for(agent_consumer_bpf *skel, ac_probe p) {
  switch (p) {
    case AC_PROBE_CUDA_CORRELATION:
      return skel->progs.ac_cuda_correlation;
    case AC_PROBE_ACTIVITY_BATCH:
      return skel->progs.ac_activity_batch;
    case AC_PROBE_KERNEL_EXECUTED:
      return skel->progs.ac_kernel_executed;
    case AC_PROBE_CUBIN_LOADED:
      return skel->progs.ac_cubin_loaded;
    case AC_PROBE_PC_SAMPLE_BATCH:
      return skel->progs.ac_pc_sample_batch;
    case AC_PROBE_STALL_REASON_MAP:
      return skel->progs.ac_stall_reason_map;
    case AC_PROBE_ERROR:
      return skel->progs.ac_error;
    case AC_PROBE_GPU_CONFIG:
      return skel->progs.ac_gpu_config;
    case AC_PROBE_MAX:
      break;
  }
  return nullptr;
}

// One uprobe at the note's file offset, the note's semaphore as its reference counter, the probe
// as its cookie (which selects the argument spec stored under the same index).
bpf_link *attach_probe(agent_consumer_bpf *skel, const Options &o, ac_probe p,
                       const ag::SdtNote &n) {
  ac_probe_spec spec;
  std::string why;
  if (!ag::parse_arg_specs(n.args, &spec, &why))
    std::fprintf(stderr, "agent-consumer: %s: arguments unreadable to the agent (%s)\n",
                 n.name.c_str(), why.c_str());
  const uint32_t key = p;
  if (bpf_map__update_elem(skel->maps.specs, &key, sizeof key, &spec, sizeof spec, BPF_ANY) != 0)
    die("cannot store the argument spec of " + n.name);
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .ref_ctr_offset = n.semaphore_offset, .bpf_cookie = key);
  return bpf_program__attach_uprobe_opts(program_for(skel, p), o.pid, o.lib.c_str(), n.file_offset,
                                         &opts);
}

int on_event(void *ctx, void *data, size_t size) {
  static_cast<ag::Summary *>(ctx)->on_event(data, size);
  return 0;
}

// The agent ring's reader. libbpf hands the ring's records back one at a time (its consumer
// position moves past each record as the callback returns), so waiting here is reading slower.
// Each event costs its bytes / bytes_per_s of reading time, idle time is no credit: the reader
// is busy until busy_until and waits once it is more than a millisecond behind.
struct AgentRingReader {
  ag::Summary *summary;
  double bytes_per_s;  // 0: no limit
  std::chrono::steady_clock::time_point busy_until{};
};

int on_agent_event(void *ctx, void *data, size_t size) {
  auto *r = static_cast<AgentRingReader *>(ctx);
  r->summary->on_event(data, size);
  if (r->bytes_per_s <= 0) return 0;
  const auto now = std::chrono::steady_clock::now();
  const double bytes = static_cast<double>((size + 7) / 8 * 8 + 8);  // with the ring's header
  r->busy_until = std::max(r->busy_until, now) +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(bytes / r->bytes_per_s));
  if (r->busy_until - now > std::chrono::milliseconds(1))
    std::this_thread::sleep_until(r->busy_until);
  return 0;
}

void read_pid_stats(agent_consumer_bpf *skel, ag::Summary *summary) {
  const int fd = bpf_map__fd(skel->maps.pid_stats);
  ac_stat_key key, next;
  for (void *prev = nullptr; bpf_map_get_next_key(fd, prev, &next) == 0; prev = &key) {
    uint64_t v = 0;
    if (bpf_map_lookup_elem(fd, &next, &v) == 0) summary->add_stat(next.pid, next.stat, v);
    key = next;
  }
}

bool target_gone(int pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

// The agent's probes attached as it chooses them, with their names and those it ignores.
struct AttachedProbes {
  std::vector<bpf_link *> links;
  std::vector<std::string> attached, ignored;
};

AttachedProbes attach_chosen(agent_consumer_bpf *skel, const Options &o,
                             const ag::AgentChoice &choice) {
  AttachedProbes a;
  a.ignored = choice.ignored;
  for (const ag::ChosenProbe &c : choice.attach) {
    const ag::ChosenProbe *used = &c;
    bpf_link *l = attach_probe(skel, o, c.probe, c.note);
    if (!l && c.probe == AC_PROBE_ACTIVITY_BATCH && choice.has_kernel_fallback) {
      // The agent falls back to kernel_executed when its activity_batch program cannot be set up.
      std::fprintf(stderr, "agent-consumer: activity_batch: %s; kernel_executed instead\n",
                   std::strerror(errno));
      a.ignored.push_back("activity_batch");
      used = &choice.kernel_fallback;
      l = attach_probe(skel, o, used->probe, used->note);
    }
    if (!l) die("cannot attach " + used->note.name + " in " + o.lib + ": " + std::strerror(errno));
    a.links.push_back(l);
    a.attached.push_back(used->note.name);
  }
  return a;
}

}  // namespace

int main(int argc, char **argv) {
  const Options o = parse_args(argc, argv);
  std::vector<ag::SdtNote> notes;
  std::string error;
  if (!ag::read_sdt_notes(o.lib, &notes, &error)) die(error);
  const ag::AgentChoice choice = ag::choose_agent_probes(notes);
  if (!choice.error.empty()) die(o.lib + ": " + choice.error);

  const uint64_t ring_bytes = uint64_t{AC_AGENT_RING_BYTES} << o.scale_factor;
  agent_consumer_bpf *skel = agent_consumer_bpf__open();
  if (!skel || bpf_map__set_max_entries(skel->maps.agent_ring, ring_bytes) != 0 ||
      agent_consumer_bpf__load(skel) != 0)
    die(std::string("cannot load the BPF programs: ") + std::strerror(errno));
  const AttachedProbes probes = attach_chosen(skel, o, choice);
  const std::vector<bpf_link *> &links = probes.links;
  std::map<std::string, int> sites;
  for (const ag::SdtNote &n : notes)
    if (n.provider == "parcagpu") sites[n.name]++;

  ag::Summary summary(read_process_memory, parcagpu::trace::process_start_monotonic_ns);
  summary.set_attached(probes.attached, probes.ignored, sites);
  summary.set_ring_bytes(ring_bytes);
  AgentRingReader reader{&summary, o.read_bytes_per_s};
  ring_buffer *rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_event, &summary, nullptr);
  if (!rb || ring_buffer__add(rb, bpf_map__fd(skel->maps.agent_ring), on_agent_event, &reader) != 0)
    die("cannot open the ring buffers");
  signal(SIGINT, on_signal);
  signal(SIGTERM, on_signal);
  std::fprintf(stderr, "agent-consumer: attached %zu probes to %s (ring of %llu bytes)\n",
               links.size(), o.lib.c_str(), static_cast<unsigned long long>(ring_bytes));

  const auto start = std::chrono::steady_clock::now();
  while (!g_stop && !target_gone(o.pid) &&
         (o.duration_s <= 0 ||
          std::chrono::steady_clock::now() - start < std::chrono::duration<double>(o.duration_s)))
    ring_buffer__poll(rb, 100);
  for (bpf_link *l : links) bpf_link__destroy(l);
  ring_buffer__consume(rb);
  read_pid_stats(skel, &summary);
  std::printf("%s\n", summary.json().c_str());
  // Said at the end, as parcagpu-trace says it in its report (the JSON has the counts).
  if (const std::string line = summary.impossible_line(); !line.empty())
    std::fprintf(stderr, "agent-consumer: %s\n", line.c_str());
  ring_buffer__free(rb);
  agent_consumer_bpf__destroy(skel);
  return 0;
}
