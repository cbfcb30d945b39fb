// Kernel activity of the mock CUPTI: which kinds are enabled (globally, per context), the
// kernel records (CUpti_ActivityKernel10, or 9 for the CUDA 12 personality) written into the
// library's buffers, and the delivery of full buffers on a CUPTI worker thread or, on
// cuptiActivityFlushAll, on the calling thread.
//
// No mock lock is ever held while calling into the library: its buffer callbacks may call back
// into CUPTI (cuptiActivityGetNextRecord, cuptiActivityFlushAll, ...) from any thread.
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#pragma GCC visibility push(default)
#include <cupti.h>

#include "mock_cupti_control.h"
#pragma GCC visibility pop

#include <cupti_activity_deprecated.h>

#include "cupti_mock_internal.h"

namespace mockcupti {
namespace {

constexpr size_t kAlignment = 8;  // ACTIVITY_RECORD_ALIGNMENT of real CUPTI
constexpr uint32_t kMaxContexts = 64;
constexpr uint32_t kNumKinds = CUPTI_ACTIVITY_KIND_COUNT;

std::atomic<bool> g_kind_enabled[kNumKinds];
// CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED as set, and where the buffers went at the
// first kernel activity enable (-1: not yet, 0: device, 1: host): as real CUPTI, a later setting
// applies to new buffers only, so the first placement is what a process keeps.
std::atomic<int> g_host_pinned{0};
std::atomic<int> g_buffers_placed{-1};
std::atomic<bool> g_kind_ever_enabled[kNumKinds];
std::atomic<bool> g_context_kind_enabled[kMaxContexts][kNumKinds];

std::atomic<CUpti_BuffersCallbackRequestFunc> g_request{nullptr};
std::atomic<CUpti_BuffersCallbackCompleteFunc> g_complete{nullptr};
std::atomic<uint64_t> g_dropped_since_query{0};
std::atomic<uint32_t> g_flush_period_ms{0};

// A buffer the library handed over. `used` counts from `data`, alignment padding included, and
// is what bufferCompleted reports as validSize.
struct Buffer {
  uint8_t *data;
  size_t size;
  size_t used;
  size_t records;
  size_t max_records;  // 0: as many as fit
};

struct BufferQueue {
  std::mutex mutex;
  std::condition_variable ready_cv;
  bool has_current = false;
  Buffer current{};
  std::deque<Buffer> spare;  // requested, not written to yet
  std::deque<Buffer> ready;  // complete, to be delivered in order
  bool worker_running = false;
};

// Never destroyed: the library may flush from its exit handlers after this library's
// destructors would have run.
BufferQueue &queue() {
  static BufferQueue *q = new BufferQueue;
  return *q;
}

size_t alignment_padding(const uint8_t *p) {
  return (kAlignment - reinterpret_cast<uintptr_t>(p) % kAlignment) % kAlignment;
}

bool kind_enabled_for(uint32_t context_id, CUpti_ActivityKind kind) {
  return g_kind_enabled[kind].load(std::memory_order_relaxed) ||
         (context_id < kMaxContexts &&
          g_context_kind_enabled[context_id][kind].load(std::memory_order_relaxed));
}

void drop_record() {
  Stats::add(stat::records_dropped);
  g_dropped_since_query.fetch_add(1, std::memory_order_relaxed);
}

void deliver(const Buffer &b) {
  if (CUpti_BuffersCallbackCompleteFunc complete = g_complete.load(std::memory_order_acquire)) {
    // Buffers are global since CUDA 6: context NULL, stream 0.
    complete(nullptr, 0, b.data, b.size, b.used);
    Stats::add(stat::buffers_completed);
  }
}

// MOCK_CUPTI_WORKER_DELAY_MS=N: the worker thread holds each buffer it took off the queue this
// long before handing it to the library, as a CUPTI worker preempted between the two does (a
// loaded machine): a flush on another thread meanwhile finds neither the buffer queued nor the
// library reading it.
std::chrono::milliseconds worker_delay() {
  static const std::chrono::milliseconds delay{[] {
    const char *v = std::getenv("MOCK_CUPTI_WORKER_DELAY_MS");
    return v ? std::strtol(v, nullptr, 10) : 0L;
  }()};
  return delay;
}

void worker_main() {
  BufferQueue &q = queue();
  std::unique_lock<std::mutex> lock(q.mutex);
  for (;;) {
    q.ready_cv.wait(lock, [&] { return !q.ready.empty(); });
    const Buffer b = q.ready.front();
    q.ready.pop_front();
    lock.unlock();
    if (worker_delay().count() > 0) std::this_thread::sleep_for(worker_delay());
    deliver(b);
    lock.lock();
  }
}

void queue_ready_locked(BufferQueue &q, const Buffer &b) {
  q.ready.push_back(b);
  if (!q.worker_running) {
    q.worker_running = true;
    std::thread(worker_main).detach();
  }
  q.ready_cv.notify_one();
}

// Delivers the buffers waiting in the queue on the calling thread, in order: at most `limit`
// of them, so a flush ends even while launching threads keep filling buffers (it delivers what
// was complete when it was called, as real CUPTI's does).
void drain_on_caller(size_t limit = SIZE_MAX) {
  BufferQueue &q = queue();
  std::unique_lock<std::mutex> lock(q.mutex);
  for (size_t n = 0; n < limit && !q.ready.empty(); ++n) {
    const Buffer b = q.ready.front();
    q.ready.pop_front();
    lock.unlock();
    deliver(b);
    lock.lock();
  }
}

// MOCK_CUPTI_BAD_TIMESTAMPS=overlap|reversed|long: every kBadEvery-th kernel record gets times no
// GPU could give, for the consumers' impossible-record checks (tools/trace/timestamp_check.h) to be
// seen firing. reversed: start and end swapped; long: an end an hour after the start; overlap:
// the record moves (keeping its length) to the start of the last record written for its stream
// (context, stream) of another launch, so it overlaps that one by the shorter of their lengths
// (give kernels a length over a microsecond, MOCK_CUDA_KERNEL_NS, for the overlap to count).
// Counted in records_spoiled.
enum class BadTimes { kNone, kOverlap, kReversed, kLong };
constexpr uint64_t kBadEvery = 10;

BadTimes bad_times() {
  static const BadTimes mode = [] {
    const char *v = std::getenv("MOCK_CUPTI_BAD_TIMESTAMPS");
    if (!v || !*v) return BadTimes::kNone;
    const std::string s = v;
    if (s == "overlap") return BadTimes::kOverlap;
    if (s == "reversed") return BadTimes::kReversed;
    if (s == "long") return BadTimes::kLong;
    std::fprintf(stderr, "mock-cupti: warning: MOCK_CUPTI_BAD_TIMESTAMPS=%s: not overlap, reversed "
                 "or long; ignored\n", v);
    return BadTimes::kNone;
  }();
  return mode;
}

struct LastOnStream {
  uint64_t start, end;
  uint32_t correlation;
};
std::mutex g_bad_mu;
uint64_t g_bad_seen = 0;      // kernel records written under the knob
bool g_bad_due = false;       // overlap: the next record that can overlap another launch's is spoiled
std::unordered_map<uint64_t, LastOnStream> *g_last_on_stream = nullptr;

// Spoils the kernel record about to be written, if it is its turn.
template <typename Record>
void spoil_times(Record *r) {
  const BadTimes mode = bad_times();
  if (mode == BadTimes::kNone) return;
  std::lock_guard<std::mutex> lock(g_bad_mu);
  const bool turn = ++g_bad_seen % kBadEvery == 0;
  bool spoiled = false;
  if (mode == BadTimes::kReversed && turn) {
    const uint64_t start = r->start, end = r->end;  // packed fields: no std::swap
    r->start = end > start ? end : start + 1;
    r->end = start;
    spoiled = true;
  } else if (mode == BadTimes::kLong && turn) {
    r->end = r->start + 3600ull * 1000000000ull;
    spoiled = true;
  } else if (mode == BadTimes::kOverlap) {
    if (!g_last_on_stream) g_last_on_stream = new std::unordered_map<uint64_t, LastOnStream>;
    g_bad_due |= turn;
    const uint64_t key = static_cast<uint64_t>(r->contextId) << 32 | r->streamId;
    auto it = g_last_on_stream->find(key);
    if (g_bad_due && it != g_last_on_stream->end() && it->second.correlation != r->correlationId &&
        r->end > r->start) {
      const uint64_t length = r->end - r->start;
      r->start = it->second.start;
      r->end = r->start + length;
      g_bad_due = false;
      spoiled = true;
    } else {
      (*g_last_on_stream)[key] = {r->start, r->end, r->correlationId};
    }
  }
  if (spoiled) {
    r->completed = r->end;
    Stats::add(stat::records_spoiled);
  }
}

// The size of a record of `kind` as the mock writes it (8-byte multiples, as CUPTI aligns them).
size_t record_size(uint32_t kind) {
  size_t size = kernel_record_size();
  if (kind == CUPTI_ACTIVITY_KIND_MEMCPY) size = sizeof(CUpti_ActivityMemcpy6);
  if (kind == CUPTI_ACTIVITY_KIND_MEMCPY2) size = sizeof(CUpti_ActivityMemcpyPtoP4);
  if (kind == CUPTI_ACTIVITY_KIND_MEMSET) size = sizeof(CUpti_ActivityMemset4);
  return (size + kAlignment - 1) / kAlignment * kAlignment;
}

bool written_kind(uint32_t kind) {
  return kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_KERNEL ||
         kind == CUPTI_ACTIVITY_KIND_MEMCPY || kind == CUPTI_ACTIVITY_KIND_MEMCPY2 ||
         kind == CUPTI_ACTIVITY_KIND_MEMSET;
}

void write_record(const void *record) {
  const uint32_t kind = static_cast<const CUpti_Activity *>(record)->kind;
  const size_t kRecordSize = record_size(kind);
  BufferQueue &q = queue();
  for (;;) {
    std::unique_lock<std::mutex> lock(q.mutex);
    if (q.has_current) {
      Buffer &b = q.current;
      if (b.used + kRecordSize <= b.size && (b.max_records == 0 || b.records < b.max_records)) {
        std::memcpy(b.data + b.used, record, kRecordSize);
        b.used += kRecordSize;
        ++b.records;
        Stats::add(stat::records_written);
        // graphId sits at the same offset in Kernel9 and Kernel10 (include/parcagpu/abi.h).
        if (kRecordSize == record_size(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) &&
            (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_KERNEL) &&
            static_cast<const CUpti_ActivityKernel9 *>(record)->graphId != 0)
          Stats::add(stat::graph_records_written);
        return;
      }
      q.has_current = false;  // full: to the worker thread, as real CUPTI does
      queue_ready_locked(q, b);
    }
    if (!q.spare.empty()) {
      q.current = q.spare.front();
      q.spare.pop_front();
      q.has_current = true;
      continue;
    }
    CUpti_BuffersCallbackRequestFunc request = g_request.load(std::memory_order_acquire);
    lock.unlock();
    if (!request) {
      drop_record();
      return;
    }
    uint8_t *data = nullptr;
    size_t size = 0, max_records = 0;
    request(&data, &size, &max_records);
    if (!data || size < alignment_padding(data) + kRecordSize) {
      Stats::add(stat::buffers_refused);
      drop_record();
      if (data) {  // too small: give it back empty so the library can free it
        lock.lock();
        queue_ready_locked(q, Buffer{data, size, 0, 0, 0});
      }
      return;
    }
    Stats::add(stat::buffers_requested);
    lock.lock();
    q.spare.push_back(Buffer{data, size, alignment_padding(data), 0, max_records});
  }
}

// clang-format off
#define MOCK_CUPTI_ACTIVITY_KINDS(X)                                                               \
  X(MEMCPY) X(MEMSET) X(KERNEL) X(DRIVER) X(RUNTIME) X(EVENT) X(METRIC) X(DEVICE) X(CONTEXT)       \
  X(CONCURRENT_KERNEL) X(NAME) X(MARKER) X(MARKER_DATA) X(SOURCE_LOCATOR) X(GLOBAL_ACCESS)         \
  X(BRANCH) X(OVERHEAD) X(CDP_KERNEL) X(PREEMPTION) X(ENVIRONMENT) X(EVENT_INSTANCE) X(MEMCPY2)    \
  X(METRIC_INSTANCE) X(INSTRUCTION_EXECUTION) X(UNIFIED_MEMORY_COUNTER) X(FUNCTION) X(MODULE)      \
  X(DEVICE_ATTRIBUTE) X(SHARED_ACCESS) X(PC_SAMPLING) X(PC_SAMPLING_RECORD_INFO)                   \
  X(INSTRUCTION_CORRELATION) X(OPENACC_DATA) X(OPENACC_LAUNCH) X(OPENACC_OTHER) X(CUDA_EVENT)      \
  X(STREAM) X(SYNCHRONIZATION) X(EXTERNAL_CORRELATION) X(NVLINK) X(INSTANTANEOUS_EVENT)            \
  X(INSTANTANEOUS_EVENT_INSTANCE) X(INSTANTANEOUS_METRIC) X(INSTANTANEOUS_METRIC_INSTANCE)         \
  X(MEMORY) X(PCIE) X(OPENMP) X(INTERNAL_LAUNCH_API) X(MEMORY2) X(MEMORY_POOL) X(GRAPH_TRACE)      \
  X(JIT) X(DEVICE_GRAPH_TRACE) X(MEM_DECOMPRESS)
// clang-format on

// cupti_activity.h: "Starting with the CUDA 13.0 release ... Enabling it will return the error
// code CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED", and the other legacy event/metric kinds.
bool legacy_kind(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_EVENT:
    case CUPTI_ACTIVITY_KIND_METRIC:
    case CUPTI_ACTIVITY_KIND_SOURCE_LOCATOR:
    case CUPTI_ACTIVITY_KIND_GLOBAL_ACCESS:
    case CUPTI_ACTIVITY_KIND_BRANCH:
    case CUPTI_ACTIVITY_KIND_EVENT_INSTANCE:
    case CUPTI_ACTIVITY_KIND_METRIC_INSTANCE:
    case CUPTI_ACTIVITY_KIND_INSTRUCTION_EXECUTION:
    case CUPTI_ACTIVITY_KIND_SHARED_ACCESS:
    case CUPTI_ACTIVITY_KIND_PC_SAMPLING:
    case CUPTI_ACTIVITY_KIND_PC_SAMPLING_RECORD_INFO:
    case CUPTI_ACTIVITY_KIND_INSTRUCTION_CORRELATION:
    case CUPTI_ACTIVITY_KIND_INSTANTANEOUS_EVENT:
    case CUPTI_ACTIVITY_KIND_INSTANTANEOUS_EVENT_INSTANCE:
    case CUPTI_ACTIVITY_KIND_INSTANTANEOUS_METRIC:
    case CUPTI_ACTIVITY_KIND_INSTANTANEOUS_METRIC_INSTANCE:
      return true;
    default:
      return false;
  }
}

CUptiResult check_kind(CUpti_ActivityKind kind) {
  if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT)
    return CUPTI_ERROR_INVALID_KIND;
  if (legacy_kind(kind)) return CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED;
  return CUPTI_SUCCESS;
}

CUptiResult context_index(CUcontext context, uint32_t *index) {
  uint32_t id = 0;
  if (!context || mock_bridge_context_ids(context, &id, nullptr) != CUDA_SUCCESS ||
      id >= kMaxContexts)
    return CUPTI_ERROR_INVALID_CONTEXT;
  *index = id;
  return CUPTI_SUCCESS;
}

bool kind_enabled_anywhere(uint32_t kind) {
  if (g_kind_enabled[kind].load(std::memory_order_relaxed)) return true;
  for (auto &ctx : g_context_kind_enabled)
    if (ctx[kind].load(std::memory_order_relaxed)) return true;
  return false;
}

// After fork() only the forking thread exists in the child: the queue's mutex may have been
// held by another thread of the parent, and the worker is gone. It is started again only if the
// child fills a buffer (a child that merely exits starts no thread; TSan forbids new threads
// after a multithreaded fork); buffers already complete wait for a flush.
void reset_in_forked_child() {
  BufferQueue &q = queue();
  new (&q.mutex) std::mutex;
  new (&q.ready_cv) std::condition_variable;
  q.worker_running = false;
}

__attribute__((constructor)) void register_fork_handler() {
  pthread_atfork(nullptr, nullptr, reset_in_forked_child);
}

// The kernel record as CUPTI writes it: CUpti_ActivityKernel10 (CUDA 13) or
// CUpti_ActivityKernel9 (CUDA 12), which name these fields alike.
template <typename Record>
void fill_kernel_record(Record *r, CUpti_ActivityKind kind, const mockbridge::KernelRun *run) {
  std::memset(static_cast<void *>(r), 0, sizeof *r);
  r->kind = kind;
  r->registersPerThread = 32;
  r->start = run->start;
  r->end = run->end;
  if (r->start == 0) {  // activity was switched on while the driver was running the kernel
    Stats::add(stat::starts_unknown);
    r->start = mockbridge::now_ns();
    r->end = r->start + 1000;
  }
  r->completed = r->end;
  r->deviceId = run->device_id;
  r->contextId = run->context_id;
  r->streamId = run->stream_id;
  r->gridX = run->grid[0];
  r->gridY = run->grid[1];
  r->gridZ = run->grid[2];
  r->blockX = run->block[0];
  r->blockY = run->block[1];
  r->blockZ = run->block[2];
  r->dynamicSharedMemory = run->dynamic_shared_memory;
  r->correlationId = run->correlation_id;
  r->gridId = run->grid_id;
  r->name = run->name;
  r->queued = CUPTI_TIMESTAMP_UNKNOWN;  // latency timestamps are off by default
  r->submitted = CUPTI_TIMESTAMP_UNKNOWN;
  r->launchType = run->launch_type;
  r->graphNodeId = run->graph_node_id;
  r->shmemLimitConfig = CUPTI_FUNC_SHMEM_LIMIT_DEFAULT;
  r->graphId = run->graph_id;
  r->channelID = run->stream_id % 32;
  r->channelType = CUPTI_CHANNEL_TYPE_COMPUTE;
}

}  // namespace

uint32_t kernel_activity_enabled(uint32_t context_id) {
  if (kind_enabled_for(context_id, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL))
    return CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  if (kind_enabled_for(context_id, CUPTI_ACTIVITY_KIND_KERNEL)) return CUPTI_ACTIVITY_KIND_KERNEL;
  return 0;
}

// Real CUPTI gives a graph kernel that finishes while kernel activity is disabled an end
// timestamp of about the next time activity is enabled (docs/cupti-facts.md, measured on an
// H100). The mock holds each graph kernel's record until its kernel has finished: finished while
// kernel activity was on, it is written as it is; finished while activity was off everywhere,
// its end becomes the moment activity is next enabled (or the end of collection at exit).
//
// MOCK_CUPTI_GRAPH_RECORD_LAG_US=N: CUPTI finishes a graph kernel's record N us after the kernel
// ended, as real CUPTI does on a busy machine (an H200 running PyTorch: longer than the library's
// 2 ms grace, docs/cupti-facts.md); a disable in that time makes its end the next enable's too.
uint64_t graph_record_lag_ns() {
  static const uint64_t lag = [] {
    const char *v = std::getenv("MOCK_CUPTI_GRAPH_RECORD_LAG_US");
    return v ? std::strtoull(v, nullptr, 10) * 1000 : 0ull;
  }();
  return lag;
}

struct HeldRecord {
  CUpti_ActivityKernel10 k10;
  CUpti_ActivityKernel9 k9;
  uint64_t end;
  bool stale;  // kernel activity is off everywhere (since it was held or since its last disable)
};
std::mutex g_held_mu;
std::vector<HeldRecord> *g_held = [] {  // never freed: used at exit
  auto *v = new std::vector<HeldRecord>;
  v->reserve(4096);  // no growth (allocation) on the launch path in the usual case
  return v;
}();
std::atomic<size_t> g_held_count{0};  // g_held->size(), read without the lock

// In a forked child the lock may be held, and the list half-changed, by a thread that is gone:
// the child leaves them alone (the held records are the parent's kernels; a child that launches
// writes its graph kernels' records at once), and allocates nothing at the fork.
std::atomic<bool> g_held_forked{false};
__attribute__((constructor)) void register_held_fork_handler() {
  pthread_atfork(nullptr, nullptr, [] { g_held_forked.store(true, std::memory_order_relaxed); });
}

void write_held(HeldRecord &h, uint64_t end) {
  if (personality() == 12) {
    h.k9.end = h.k9.completed = end;
    spoil_times(&h.k9);
    write_record(&h.k9);
  } else {
    h.k10.end = h.k10.completed = end;
    spoil_times(&h.k10);
    write_record(&h.k10);
  }
}

bool kernel_activity_on_anywhere() {
  return kind_enabled_anywhere(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ||
         kind_enabled_anywhere(CUPTI_ACTIVITY_KIND_KERNEL);
}

// What happened to kernel activity just now: `on` after an enable, off after a disable, or a
// look at the held records (a flush, a new record). Writes those that are settled.
enum class Settle { kLook, kEnabled, kDisabled, kExit };
void settle_held(Settle why) {
  if (g_held_forked.load(std::memory_order_relaxed)) return;
  if (why == Settle::kLook && g_held_count.load(std::memory_order_relaxed) == 0) return;
  const uint64_t now = mockbridge::now_ns();
  const bool on = kernel_activity_on_anywhere();
  // Written under the lock, with no allocation of its own: a thread allocating at a fork() can
  // leave a sanitizer's allocator locked in the child (write_record takes the queue's lock
  // after this one, and nothing takes them the other way round).
  std::lock_guard<std::mutex> lock(g_held_mu);
  size_t kept = 0;
  for (HeldRecord &h : *g_held) {
    const bool finished = h.end + graph_record_lag_ns() <= now;
    if (!h.stale && finished) {
      write_held(h, h.end);  // finished while activity was on
    } else if (h.stale && finished && (why == Settle::kEnabled || why == Settle::kExit)) {
      Stats::add(stat::graph_ends_stretched);
      write_held(h, std::max(now, h.k10.start));  // finished while off: the enable's time
    } else if (h.stale && why == Settle::kExit) {
      Stats::add(stat::graph_ends_stretched);
      write_held(h, std::max(now, h.k10.start));
    } else if (why == Settle::kExit) {
      write_held(h, h.end);
    } else {
      if (why == Settle::kDisabled && !on) h.stale = true;
      if (why == Settle::kEnabled) h.stale = false;  // on again before its kernel finished
      (*g_held)[kept++] = h;
    }
  }
  g_held->resize(kept);
  g_held_count.store(kept, std::memory_order_relaxed);
}

void kernel_ran(const mockbridge::KernelRun *run) {
  pc_kernel_ran(run);  // PC sampling sees every kernel, whatever activity collects
  if (run->collect_kind == 0) {
    Stats::add(stat::records_not_collected);
    return;
  }
  const auto kind = static_cast<CUpti_ActivityKind>(run->collect_kind);
  if (!g_request.load(std::memory_order_relaxed)) {  // no buffers to write into
    drop_record();
    return;
  }
  if (run->graph_id != 0 && !g_held_forked.load(std::memory_order_relaxed)) {
    HeldRecord h;
    fill_kernel_record(&h.k9, kind, run);
    fill_kernel_record(&h.k10, kind, run);
    h.end = run->end;
    bool held = false;
    {
      // Whether it is still running and whether activity is on, read together under the lock
      // that enables and disables settle under (they switch the flag first): an enable or
      // disable either came before and is seen here, or settles this record after. Read apart,
      // a thread preempted between the two (tens of ms under CPU load) took a kernel that had
      // finished while activity was on for one still running with activity off, and gave it
      // the next enable's time as its end: a stream overlap of the mock's own making.
      std::lock_guard<std::mutex> lock(g_held_mu);
      h.stale = !kernel_activity_on_anywhere();
      if (run->end + graph_record_lag_ns() > mockbridge::now_ns()) {
        g_held->push_back(h);
        g_held_count.store(g_held->size(), std::memory_order_relaxed);
        held = true;
      }
    }
    settle_held(Settle::kLook);
    if (!held) write_held(h, h.end);  // finished already: written as it is, filled once
    return;
  }
  settle_held(Settle::kLook);
  if (personality() == 12) {
    CUpti_ActivityKernel9 r;
    fill_kernel_record(&r, kind, run);
    spoil_times(&r);
    write_record(&r);
  } else {
    CUpti_ActivityKernel10 r;
    fill_kernel_record(&r, kind, run);
    spoil_times(&r);
    write_record(&r);
  }
}

bool activity_kind_enabled(uint32_t context_id, uint32_t kind) {
  return kind < kNumKinds && kind_enabled_for(context_id, static_cast<CUpti_ActivityKind>(kind));
}

namespace {

// A copy or fill record of `kind`, zeroed, with the fields every such record has from the run:
// the caller adds its own kind's and writes it.
template <typename Record>
Record memory_record(CUpti_ActivityKind kind, const mockbridge::MemoryRun *run) {
  Record r;
  std::memset(static_cast<void *>(&r), 0, sizeof r);
  r.kind = kind;
  r.bytes = run->bytes;
  r.start = run->start;
  r.end = run->end;
  r.deviceId = run->device_id;
  r.contextId = run->context_id;
  r.streamId = run->stream_id;
  r.correlationId = run->correlation_id;
  return r;
}

// A copy record (MEMCPY or the peer MEMCPY2): its copy and memory kinds besides.
template <typename Record>
Record copy_record(CUpti_ActivityKind kind, const mockbridge::MemoryRun *run) {
  Record r = memory_record<Record>(kind, run);
  r.copyKind = run->copy_kind;
  r.srcKind = run->src_kind;
  r.dstKind = run->dst_kind;
  r.flags = run->flags ? CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC : 0;
  return r;
}

void write_memcpy(const mockbridge::MemoryRun *run) {
  auto r = copy_record<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY, run);
  r.copyCount = 1;
  write_record(&r);
}

void write_memcpy_peer(const mockbridge::MemoryRun *run) {
  auto r = copy_record<CUpti_ActivityMemcpyPtoP4>(CUPTI_ACTIVITY_KIND_MEMCPY2, run);
  r.srcDeviceId = run->device_id;
  r.dstDeviceId = run->peer_device_id;
  write_record(&r);
}

void write_memset(const mockbridge::MemoryRun *run) {
  auto r = memory_record<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET, run);
  r.value = run->fill_value;
  r.flags = run->flags ? CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC : 0;
  r.memoryKind = run->dst_kind;
  write_record(&r);
}

}  // namespace

// Copies and fills, like kernels, are written only if their kind was enabled inside their call.
void memory_ran(const mockbridge::MemoryRun *run) {
  if (!run->collect) {
    Stats::add(stat::records_not_collected);
    return;
  }
  if (!g_request.load(std::memory_order_relaxed)) {
    drop_record();
    return;
  }
  if (run->kind == CUPTI_ACTIVITY_KIND_MEMCPY) write_memcpy(run);
  if (run->kind == CUPTI_ACTIVITY_KIND_MEMCPY2) write_memcpy_peer(run);
  if (run->kind == CUPTI_ACTIVITY_KIND_MEMSET) write_memset(run);
}

void finalize_activity() {
  settle_held(Settle::kExit);
  BufferQueue &q = queue();
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    if (q.has_current) q.ready.push_back(q.current);
    q.has_current = false;
    for (const Buffer &b : q.spare) q.ready.push_back(b);  // returned empty
    q.spare.clear();
  }
  drain_on_caller();
  for (uint32_t k = 0; k < kNumKinds; ++k) {
    g_kind_enabled[k].store(false, std::memory_order_relaxed);
    for (auto &ctx : g_context_kind_enabled) ctx[k].store(false, std::memory_order_relaxed);
  }
  g_request.store(nullptr, std::memory_order_release);
  g_complete.store(nullptr, std::memory_order_release);
}

const char *activity_buffers_placed() {
  const int placed = g_buffers_placed.load();
  return placed < 0 ? "none" : placed ? "host" : "device";
}

std::vector<std::string> activity_kinds(bool ever) {
  std::vector<std::string> kinds;
  for (uint32_t k = 1; k < kNumKinds; ++k)
    if (ever ? g_kind_ever_enabled[k].load(std::memory_order_relaxed) : kind_enabled_anywhere(k))
      kinds.emplace_back(mock_cupti_activity_kind_name(k));
  return kinds;
}

}  // namespace mockcupti

using namespace mockcupti;

namespace {

bool is_kernel_kind(CUpti_ActivityKind kind) {
  return kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || kind == CUPTI_ACTIVITY_KIND_KERNEL;
}

// A kind switched on or off (`flag`: for every context or one), counted; kernel records held for
// a decision are settled by it.
CUptiResult switch_kind(std::atomic<bool> &flag, CUpti_ActivityKind kind, bool on) {
  if (on && is_kernel_kind(kind)) {
    int unplaced = -1;
    g_buffers_placed.compare_exchange_strong(unplaced, g_host_pinned.load());
  }
  flag.store(on, std::memory_order_relaxed);
  if (on) g_kind_ever_enabled[kind].store(true, std::memory_order_relaxed);
  if (is_kernel_kind(kind)) settle_held(on ? Settle::kEnabled : Settle::kDisabled);
  return CUPTI_SUCCESS;
}

// cuptiActivityEnableContext (on) and DisableContext.
CUptiResult switch_context_kind(CUcontext context, CUpti_ActivityKind kind, bool on) {
  if (const CUptiResult r = check_kind(kind)) return error(r);
  uint32_t ctx = 0;
  if (const CUptiResult r = context_index(context, &ctx)) return error(r);
  Stats::add(on ? stat::activity_enable_calls : stat::activity_disable_calls);
  return switch_kind(g_context_kind_enabled[ctx][kind], kind, on);
}

}  // namespace

extern "C" {

CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  MOCK_CUPTI_FAULT_POINT(cuptiActivityEnable);
  if (const CUptiResult r = check_kind(kind)) return error(r);
  Stats::add(stat::activity_enable_calls);
  // As real CUPTI: kernel activity cannot be switched on while PC sampling is enabled.
  if (is_kernel_kind(kind) && !g_kind_enabled[kind].load(std::memory_order_relaxed) &&
      pc_sampling_enabled_anywhere())
    return error(CUPTI_ERROR_NOT_COMPATIBLE);
  return switch_kind(g_kind_enabled[kind], kind, true);
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  MOCK_CUPTI_FAULT_POINT(cuptiActivityDisable);
  if (const CUptiResult r = check_kind(kind)) return error(r);
  Stats::add(stat::activity_disable_calls);
  return switch_kind(g_kind_enabled[kind], kind, false);
}

CUptiResult cuptiActivityEnableContext(CUcontext context, CUpti_ActivityKind kind) {
  MOCK_CUPTI_FAULT_POINT(cuptiActivityEnableContext);
  return switch_context_kind(context, kind, true);
}

CUptiResult cuptiActivityDisableContext(CUcontext context, CUpti_ActivityKind kind) {
  MOCK_CUPTI_FAULT_POINT(cuptiActivityDisableContext);
  return switch_context_kind(context, kind, false);
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                           CUpti_BuffersCallbackCompleteFunc complete) {
  MOCK_CUPTI_FAULT_POINT(cuptiActivityRegisterCallbacks);
  if (!request || !complete) return error(CUPTI_ERROR_INVALID_PARAMETER);
  g_complete.store(complete, std::memory_order_release);
  g_request.store(request, std::memory_order_release);
  return CUPTI_SUCCESS;
}

// Only the placement of the timestamp buffers is modelled; other attributes are accepted.
CUptiResult cuptiActivitySetAttribute(CUpti_ActivityAttribute attr, size_t *size, void *value) {
  MOCK_CUPTI_FAULT_POINT(cuptiActivitySetAttribute);
  if (!size || !value) return error(CUPTI_ERROR_INVALID_PARAMETER);
  if (attr != CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED) return CUPTI_SUCCESS;
  if (*size != sizeof(uint8_t)) return error(CUPTI_ERROR_INVALID_PARAMETER);
  g_host_pinned.store(*static_cast<const uint8_t *>(value) != 0);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;  // every mock record is complete: forced and default flushes are the same
  MOCK_CUPTI_FAULT_POINT(cuptiActivityFlushAll);
  Stats::add(stat::flush_all_calls);
  if (!g_complete.load(std::memory_order_acquire)) return error(CUPTI_ERROR_INVALID_OPERATION);
  settle_held(Settle::kLook);
  BufferQueue &q = queue();
  size_t complete = 0;
  {
    std::lock_guard<std::mutex> lock(q.mutex);
    if (q.has_current && q.current.records > 0) {
      q.ready.push_back(q.current);
      q.has_current = false;
    }
    complete = q.ready.size();
  }
  // Buffers the worker thread already holds are delivered by it, concurrently.
  drain_on_caller(complete);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushPeriod(uint32_t time_ms) {
  MOCK_CUPTI_FAULT_POINT(cuptiActivityFlushPeriod);
  // Per cupti_activity.h a periodic flush returns only full buffers, which the mock's worker
  // delivers at once anyway: the period is recorded and changes nothing.
  g_flush_period_ms.store(time_ms, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid_size,
                                       CUpti_Activity **record) {
  MOCK_CUPTI_FAULT_POINT(cuptiActivityGetNextRecord);
  if (!buffer || !record) return error(CUPTI_ERROR_INVALID_PARAMETER);
  const uint8_t *next;
  if (*record == nullptr) {
    next = buffer + alignment_padding(buffer);
  } else {
    const auto *current = reinterpret_cast<const uint8_t *>(*record);
    const size_t size = record_size((*record)->kind);
    if (current < buffer || current + size > buffer + valid_size)
      return error(CUPTI_ERROR_INVALID_PARAMETER);
    next = current + size;
  }
  // The smallest record the mock writes: anything shorter left is the end of the buffer.
  if (next + sizeof(CUpti_Activity) > buffer + valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  const auto *a = reinterpret_cast<const CUpti_Activity *>(next);
  if (!written_kind(a->kind)) return error(CUPTI_ERROR_INVALID_KIND);
  if (next + record_size(a->kind) > buffer + valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = const_cast<CUpti_Activity *>(a);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t stream_id,
                                              size_t *dropped) {
  (void)context;  // all buffers are global: one count
  (void)stream_id;
  MOCK_CUPTI_FAULT_POINT(cuptiActivityGetNumDroppedRecords);
  if (!dropped) return error(CUPTI_ERROR_INVALID_PARAMETER);
  // "The dropped count maintained for the queue is reset to zero when this function is called."
  *dropped = g_dropped_since_query.exchange(0, std::memory_order_relaxed);
  return CUPTI_SUCCESS;
}

// ---- Introspection (mock_cupti_control.h) ----

int mock_cupti_activity_kind_enabled(uint32_t kind) {
  return kind < kNumKinds && kind_enabled_anywhere(kind);
}

int mock_cupti_activity_kind_ever_enabled(uint32_t kind) {
  return kind < kNumKinds && g_kind_ever_enabled[kind].load(std::memory_order_relaxed);
}

int mock_cupti_kernel_activity_enabled(void) {
  return kind_enabled_anywhere(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ||
         kind_enabled_anywhere(CUPTI_ACTIVITY_KIND_KERNEL);
}

int mock_cupti_kernel_activity_ever_enabled(void) {
  return mock_cupti_activity_kind_ever_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ||
         mock_cupti_activity_kind_ever_enabled(CUPTI_ACTIVITY_KIND_KERNEL);
}

const char *mock_cupti_activity_kind_name(uint32_t kind) {
  switch (kind) {
#define MOCK_CUPTI_KIND_NAME(name) \
  case CUPTI_ACTIVITY_KIND_##name: \
    return #name;
    MOCK_CUPTI_ACTIVITY_KINDS(MOCK_CUPTI_KIND_NAME)
#undef MOCK_CUPTI_KIND_NAME
    default:
      return "UNKNOWN";
  }
}

}  // extern "C"
