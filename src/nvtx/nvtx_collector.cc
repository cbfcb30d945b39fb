#include "nvtx/nvtx_collector.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "base/log.h"
#include "base/process_guard.h"
#include "base/usdt.h"
#include "nvtx/nvtx_batch.h"
#include "nvtx/nvtx_decoder.h"
#include "nvtx/nvtx_thread.h"

namespace parcagpu {

__thread NvtxThread t_nvtx __attribute__((tls_model("initial-exec")));

namespace {

// Process-wide: a thread's batch is fired by the thread itself, also from its exit destructor and
// the launch path, where no collector is at hand.
std::atomic<uint64_t> g_events{0}, g_batches{0}, g_names{0};

RepeatedError g_unheard("nvtx", "NVTX events lost: their consumer left before they were fired",
                        "events");
RepeatedError g_no_batch("nvtx", "NVTX events lost: no memory for a thread's batch", "events");
RepeatedError g_truncated("nvtx", "NVTX messages cut", "messages");
RepeatedError g_unreadable("nvtx", "NVTX messages not read (registered or unknown type)",
                           "messages");

void fire(NvtxBatch &b) {
  const uint32_t n = b.count();
  if (n == 0) return;
  // A forked child inherits the forking thread's pending events: the parent's, which the parent
  // delivers.
  const bool ours = !process_guard::forked_child();
  if (ours && usdt::nvtx_event_batch_consumers() != 0) {
    usdt::nvtx_event_batch(b.pointers(), n);
    g_batches.fetch_add(1, std::memory_order_relaxed);
  } else if (ours) {
    g_unheard.report_n(n, kErrDataLost,
                       "%u NVTX events not delivered: nvtx_event_batch's consumer left before "
                       "they were fired",
                       n);
  }
  b.clear();
  t_nvtx.pending = nullptr;
}

// An exiting thread's batch: fired, then freed (pthread key destructor).
void on_thread_exit(void *batch) {
  auto *b = static_cast<NvtxBatch *>(batch);
  if (t_nvtx.batch == b) {
    fire(*b);
    t_nvtx.batch = nullptr;
  }
  delete b;
}

// One key for the process (keys are few: PTHREAD_KEYS_MAX), whatever the collectors built.
const pthread_key_t *exit_key() {
  static pthread_key_t key;
  static const bool made = [] {
    if (pthread_key_create(&key, &on_thread_exit) == 0) return true;
    report_error(kErrInternal, "nvtx",
                 "pthread_key_create failed: an exiting thread's last NVTX events are not fired");
    return false;
  }();
  return made ? &key : nullptr;
}

}  // namespace

void nvtx_fire_pending() {
  if (t_nvtx.pending) fire(*t_nvtx.pending);
}

NvtxCollector::NvtxCollector(Clock clock, uint64_t max_age_ns)
    : clock_(clock), max_age_ns_(max_age_ns), exit_key_(exit_key()) {}

// Never destroyed while threads run (the profiler is kept for the process's life); the key stays.
NvtxCollector::~NvtxCollector() = default;

NvtxBatch *NvtxCollector::thread_batch() {
  if (t_nvtx.batch) return t_nvtx.batch;
  auto *b = new (std::nothrow) NvtxBatch;
  if (!b) return nullptr;
  t_nvtx.batch = b;
  t_nvtx.tid = static_cast<uint32_t>(syscall(SYS_gettid));
  if (exit_key_) pthread_setspecific(*exit_key_, b);
  return b;
}

void NvtxCollector::on_callback(uint32_t cbid, const void *data) {
  if (!data) return;
  const NvtxDecoded d = NvtxDecoder::decode(cbid, *static_cast<const NvtxCallbackData *>(data));
  if (d.text.unreadable)
    g_unreadable.report(kErrDataLost,
                        "an NVTX message of a type the library does not read (a registered "
                        "string handle?) goes out empty (cbid %u)",
                        cbid);
  if (d.what == NvtxDecoded::What::kEvent && usdt::nvtx_event_batch_consumers() != 0)
    take_event(d);
  else if (d.what == NvtxDecoded::What::kName && usdt::nvtx_resource_name_consumers() != 0)
    fire_name(d);
}

void NvtxCollector::take_event(const NvtxDecoded &d) {
  NvtxBatch *b = thread_batch();
  if (!b) {
    g_no_batch.report(kErrDataLost,
                      "no memory for this thread's NVTX batch (%zu bytes): its "
                      "NVTX events are not collected",
                      sizeof(NvtxBatch));
    return;
  }
  const uint64_t now = clock_();
  NvtxEventRecord rec{};
  rec.timestamp_ns = now;
  rec.tid = t_nvtx.tid;
  rec.correlation_id = t_nvtx.last_correlation_id;
  rec.kind = d.kind;
  rec.color = d.color;
  rec.device_id = UINT32_MAX;  // unknown: the consumer joins by correlation ID
  rec.payload = d.payload;
  rec.range_id = d.range_id;
  NvtxBatch::Copied copied;
  b->add(rec, d.text, &copied);
  t_nvtx.pending = b;
  g_events.fetch_add(1, std::memory_order_relaxed);
  if (copied == NvtxBatch::Copied::kTruncated)
    g_truncated.report(kErrDataLost, "an NVTX message longer than %d bytes is cut there",
                       PARCAGPU_NVTX_MESSAGE_MAX);
  if (b->full() || now - b->oldest_ns() >= max_age_ns_) fire(*b);
}

void NvtxCollector::fire_name(const NvtxDecoded &d) {
  char name[NvtxBatch::kMessageBytes];
  if (!NvtxBatch::copy_text(d.text, name))
    g_truncated.report(kErrDataLost, "an NVTX name longer than %d bytes is cut there",
                       PARCAGPU_NVTX_MESSAGE_MAX);
  usdt::nvtx_resource_name(d.resource_kind, d.resource_id, name);
  g_names.fetch_add(1, std::memory_order_relaxed);
}

void NvtxCollector::fire_this_thread() { nvtx_fire_pending(); }

NvtxStats NvtxCollector::stats() const {
  NvtxStats s;
  s.events = g_events.load(std::memory_order_relaxed);
  s.batches = g_batches.load(std::memory_order_relaxed);
  s.names = g_names.load(std::memory_order_relaxed);
  s.unheard = g_unheard.count();
  s.no_batch = g_no_batch.count();
  s.truncated = g_truncated.count();
  s.unreadable = g_unreadable.count();
  return s;
}

}  // namespace parcagpu
