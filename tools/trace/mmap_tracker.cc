#include "mmap_tracker.h"

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "symbolizer.h"

namespace parcagpu::trace {
namespace {

constexpr size_t kDataPages = 16;  // per CPU: 64 KiB (~500 records) between two drains
constexpr uint64_t kKeepExitedNs = 30ull * 1000 * 1000 * 1000;

// Every record ends with its sample_id (sample_id_all): pid, tid (PERF_SAMPLE_TID), time.
struct SampleId {
  uint32_t pid, tid;
  uint64_t time;
};

struct Record {
  uint64_t time;
  size_t seq;          // arrival order within its CPU's buffer, for ties
  std::vector<uint8_t> bytes;
};

uint64_t monotonic_ns() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

}  // namespace

MmapTracker::~MmapTracker() {
  for (Cpu &c : cpus_) {
    if (c.base) munmap(c.base, c.size);
    if (c.fd >= 0) close(c.fd);
  }
}

bool MmapTracker::open(std::string *error) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_DUMMY;
  attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
  attr.sample_id_all = 1;
  attr.mmap = 1;  // executable mappings only (no mmap_data)
  attr.mmap2 = 1;
  attr.comm = 1;
  attr.comm_exec = 1;
  attr.task = 1;
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  const long page = sysconf(_SC_PAGESIZE);
  const long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  int last_errno = 0;
  for (long cpu = 0; cpu < ncpu; ++cpu) {
    const int fd = static_cast<int>(
        syscall(SYS_perf_event_open, &attr, -1, static_cast<int>(cpu), -1, PERF_FLAG_FD_CLOEXEC));
    if (fd < 0) {
      last_errno = errno;  // an offline CPU, or no permission
      continue;
    }
    Cpu c;
    c.fd = fd;
    c.size = static_cast<size_t>(page) * (1 + kDataPages);
    c.base = mmap(nullptr, c.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (c.base == MAP_FAILED) {
      last_errno = errno;
      close(fd);
      continue;
    }
    cpus_.push_back(c);
  }
  if (cpus_.empty()) {
    *error = std::string("perf_event_open (mmap records): ") + std::strerror(last_errno);
    return false;
  }
  return true;
}

namespace {

// Moves the records a CPU's buffer holds into *recs (with their time and arrival order) and
// frees their room; returns how many records the kernel said it lost.
uint64_t read_buffer(void *base, std::vector<Record> *recs) {
  auto *meta = static_cast<perf_event_mmap_page *>(base);
  const uint8_t *data = static_cast<const uint8_t *>(base) + meta->data_offset;
  const uint64_t size = meta->data_size;
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  uint64_t lost = 0;
  size_t seq = 0;
  while (tail < head) {
    perf_event_header h;
    for (size_t i = 0; i < sizeof h; ++i)
      reinterpret_cast<uint8_t *>(&h)[i] = data[(tail + i) % size];
    if (h.size < sizeof h || tail + h.size > head) break;
    Record r;
    r.bytes.resize(h.size);
    for (size_t i = 0; i < h.size; ++i) r.bytes[i] = data[(tail + i) % size];
    tail += h.size;
    if (h.type == PERF_RECORD_LOST) {
      uint64_t n = 0;
      if (h.size >= sizeof h + 16) std::memcpy(&n, r.bytes.data() + sizeof h + 8, 8);
      lost += n;
      continue;
    }
    if (h.size < sizeof h + sizeof(SampleId)) continue;
    SampleId id;
    std::memcpy(&id, r.bytes.data() + h.size - sizeof id, sizeof id);
    r.time = id.time;
    r.seq = seq++;
    recs->push_back(std::move(r));
  }
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
  return lost;
}

// A PERF_RECORD_MMAP2's body as the mapping it made, and its process in *pid.
// u32 pid, tid; u64 addr, len, pgoff; u32 maj, min; u64 ino, ino_generation; u32 prot, flags;
// char filename[]. False when it is too short or has a build ID where maj, min and ino would be.
bool mmap2_entry(const uint8_t *body, size_t body_size, uint16_t misc, uint32_t *pid,
                 MapEntry *m) {
  constexpr size_t kFixed = 4 + 4 + 8 + 8 + 8 + 4 + 4 + 8 + 8 + 4 + 4;
  if (body_size <= kFixed || (misc & PERF_RECORD_MISC_MMAP_BUILD_ID)) return false;
  uint32_t maj, min, prot;
  uint64_t addr, len, pgoff, ino;
  std::memcpy(pid, body, 4);
  std::memcpy(&addr, body + 8, 8);
  std::memcpy(&len, body + 16, 8);
  std::memcpy(&pgoff, body + 24, 8);
  std::memcpy(&maj, body + 32, 4);
  std::memcpy(&min, body + 36, 4);
  std::memcpy(&ino, body + 40, 8);
  std::memcpy(&prot, body + 56, 4);
  const char *name = reinterpret_cast<const char *>(body + kFixed);
  m->start = addr;
  m->end = addr + len;
  m->offset = pgoff;
  m->exec = (prot & PROT_EXEC) != 0;
  m->inode = ino;
  char dev[32];
  std::snprintf(dev, sizeof dev, "%02x:%02x", maj, min);
  m->dev = dev;
  m->path.assign(name, strnlen(name, body_size - kFixed));
  return true;
}

// One record applied to the symbolizer (and told to the hooks that want it).
void apply_record(const Record &r, Symbolizer *sym, const MmapTracker::Hooks &hooks) {
  perf_event_header h;
  std::memcpy(&h, r.bytes.data(), sizeof h);
  const uint8_t *body = r.bytes.data() + sizeof h;
  const size_t body_size = h.size - sizeof h - sizeof(SampleId);
  uint32_t pid, ppid, tid;
  switch (h.type) {
    case PERF_RECORD_MMAP2: {
      MapEntry m;
      if (!mmap2_entry(body, body_size, h.misc, &pid, &m)) break;
      if (hooks.mapping && m.exec) hooks.mapping(pid, m);
      sym->on_mmap(pid, std::move(m));
      break;
    }
    case PERF_RECORD_COMM:
      if (!(h.misc & PERF_RECORD_MISC_COMM_EXEC) || body_size < 8) break;
      std::memcpy(&pid, body, 4);
      if (hooks.exec) hooks.exec(pid);
      sym->on_exec(pid);
      break;
    case PERF_RECORD_FORK:
    case PERF_RECORD_EXIT:
      if (body_size < 16) break;
      std::memcpy(&pid, body, 4);
      std::memcpy(&ppid, body + 4, 4);
      std::memcpy(&tid, body + 8, 4);
      if (pid != tid) break;  // threads
      if (h.type == PERF_RECORD_FORK && pid != ppid) sym->on_fork(ppid, pid);
      if (h.type == PERF_RECORD_EXIT) sym->on_exit(pid, r.time);
      break;
    default: break;
  }
}

}  // namespace

void MmapTracker::drain(Symbolizer *sym, const Hooks &hooks) {
  std::vector<Record> recs;
  for (Cpu &c : cpus_) lost_ += read_buffer(c.base, &recs);
  // The CPUs' buffers interleave: an exec on one CPU, the new program's mmaps on another.
  std::stable_sort(recs.begin(), recs.end(),
                   [](const Record &a, const Record &b) { return a.time < b.time; });
  for (const Record &r : recs) {
    ++records_;
    apply_record(r, sym, hooks);
  }
  const uint64_t now = monotonic_ns();
  if (now - last_prune_ns_ > 1000000000ull) {
    for (uint32_t pid : sym->prune(now, kKeepExitedNs))
      if (hooks.gone) hooks.gone(pid);
    last_prune_ns_ = now;
  }
}

}  // namespace parcagpu::trace
