#include "pc/pc_publish.h"

#include <time.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "base/agent_ring_pacer.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/usdt.h"
#include "pc/pc_coverage.h"
#include "pc/pc_launch_state.h"
#include "pc/pc_records.h"
#include "pc/pc_session.h"
#include "pc/pc_stats.h"

namespace parcagpu {
namespace {

RepeatedError g_unfired("pc_sampling", "PC records not fired: the firing queue was full",
                        "records");
RepeatedError g_no_thread("pc_sampling", "PC records fired at once: no firing thread", "records");

void sleep_ns(uint64_t ns) {
  timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
  nanosleep(&ts, nullptr);
}

// One drained buffer's records, out of CUPTI's buffer: each with its own stall-reason array of
// PARCAGPU_STALL_REASON_MAX entries (the consumer reads all of them), its function name the
// interned one (kept for the life of the process).
struct QueuedRecords {
  std::vector<CUpti_PCSamplingPCData> records;
  std::vector<CUpti_PCSamplingStallReason> stall;
  std::vector<const void *> ptrs;
  size_t fired = 0;  // the firing thread's only

  QueuedRecords(const void *const *from, size_t n)
      : records(n), stall(n * PARCAGPU_STALL_REASON_MAX), ptrs(n) {
    for (size_t i = 0; i < n; ++i) {
      records[i] = *static_cast<const CUpti_PCSamplingPCData *>(from[i]);
      const CUpti_PCSamplingStallReason *s = records[i].stallReason;
      std::copy(s, s + PARCAGPU_STALL_REASON_MAX, &stall[i * PARCAGPU_STALL_REASON_MAX]);
      records[i].stallReason = &stall[i * PARCAGPU_STALL_REASON_MAX];
      ptrs[i] = &records[i];
    }
  }
};

// Fires `n` records at `ptrs` on `probe` in slices the agent's ring has room for, waiting for it.
uint64_t fire_paced(usdt::pc_sample_batch_probe probe, const void **ptrs, size_t n,
                    uint64_t *unheard) {
  uint64_t firings = 0;
  AgentRingPacer &pacer = AgentRingPacer::instance();
  for (size_t done = 0; done < n;) {
    const size_t k = n - done < kPcFiringRecords ? n - done : kPcFiringRecords;
    const uint64_t bytes = k * kAgentPcEventBytes;
    for (uint64_t w; (w = pacer.wait_ns(bytes, monotonic_ns())) > 0;) sleep_ns(w);
    pacer.take(bytes, monotonic_ns());
    if (probe.consumers() != 0) {
      probe.fire(ptrs + done, static_cast<uint32_t>(k));
      firings++;
    } else {
      *unheard += k;  // the last consumer left while they waited
    }
    done += k;
  }
  return firings;
}

}  // namespace

// The firing thread and its queue. Started at the first records queued (never in a process
// without a pc_sample_batch consumer).
class PcPublisher::Firer {
 public:
  explicit Firer(usdt::pc_sample_batch_probe probe) : probe_(probe) {}
  ~Firer() { finish(); }

  // False: not queued (the queue is full, or no thread could be started: fired here instead).
  bool enqueue(const void *const *ptrs, size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!started_) start();
    if (thread_failed_) {
      lock.unlock();
      std::vector<const void *> copy(ptrs, ptrs + n);
      uint64_t unheard = 0;
      const uint64_t f = fire_paced(probe_, copy.data(), n, &unheard);
      std::lock_guard<std::mutex> relock(mu_);
      firings_ += f;
      unheard_ += unheard;
      return true;
    }
    if (queued_ + n > kPcQueuedRecordsMax) return false;
    queue_.push_back(std::make_unique<QueuedRecords>(ptrs, n));
    queued_ += n;
    cv_.notify_one();
    return true;
  }

  void finish() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

  void add_stats(PcStats &s) const {
    std::lock_guard<std::mutex> lock(mu_);
    s.batches += firings_;
    s.unpublished += unheard_;
  }

 private:
  void start() {  // under mu_
    started_ = true;
    try {
      thread_ = std::thread([this] { run(); });
    } catch (...) {
      thread_failed_ = true;
      g_no_thread.report(kErrDataLost,
                         "cannot start the PC firing thread: PC records are fired on the "
                         "draining thread, as the agent's ring takes them");
    }
  }

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, everything fired
      QueuedRecords &q = *queue_.front();
      lock.unlock();
      uint64_t unheard = 0;
      const uint64_t f = fire_paced(probe_, q.ptrs.data(), q.ptrs.size(), &unheard);
      lock.lock();
      firings_ += f;
      unheard_ += unheard;
      queued_ -= q.ptrs.size();
      queue_.pop_front();
    }
  }

  const usdt::pc_sample_batch_probe probe_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<QueuedRecords>> queue_;
  size_t queued_ = 0;  // records in queue_
  uint64_t firings_ = 0, unheard_ = 0;
  bool started_ = false, thread_failed_ = false, stopping_ = false;
  std::thread thread_;
};

PcPublisher::PcPublisher(const PcLaunchState &state, PcCoverage *coverage,
                         usdt::pc_sample_batch_probe probe)
    : state_(state),
      coverage_(coverage),
      probe_(probe),
      names_(std::make_unique<FunctionNames>()),
      firer_(std::make_unique<Firer>(probe)) {}

PcPublisher::~PcPublisher() = default;

bool PcPublisher::was_announced(const void *state, uint32_t correlation_id) {
  return static_cast<const PcLaunchState *>(state)->was_announced(correlation_id);
}

void PcPublisher::publish(PcRecordBuffer &buf, PcStats &stats) {
  const PcBatchTally t = buf.prepare(*names_, &PcPublisher::was_announced, &state_);
  stats.gpu_only += t.gpu_only;
  stats.gpu_only_samples += t.gpu_only_samples;
  if (t.records == 0) return;
  if (coverage_)
    for (size_t i = 0; i < t.records; ++i)
      coverage_->on_sampled(
          static_cast<const CUpti_PCSamplingPCData *>(buf.ptrs()[i])->functionName);
  stats.records += t.records;
  stats.pairs += t.pairs;
  stats.samples += t.samples;
  stats.uncorrelated += t.uncorrelated;
  if (probe_.consumers() == 0) {
    stats.unpublished += t.records;
  } else if (!firer_->enqueue(buf.ptrs(), t.records)) {
    stats.unfired += t.records;
    g_unfired.report_n(t.records, kErrDataLost,
                       "%zu PC records not fired: %zu were waiting already (the consumer's ring "
                       "is filled at most %llu bytes a second, agent_ring_pacer.h)",
                       t.records, kPcQueuedRecordsMax,
                       static_cast<unsigned long long>(AgentRingPacer::kBytesPerSecond));
  }
}

void PcPublisher::finish() { firer_->finish(); }

void PcPublisher::add_firing_stats(PcStats &stats) const { firer_->add_stats(stats); }

PcResult PcPublisher::drain(PcSession &session, PcStats &stats) {
  stats.drains++;
  for (int guard = 0; guard < 100000; ++guard) {
    const PcResult r = session.get_data();
    if (!r.ok()) return r;
    PcRecordBuffer &buf = session.data_buffer();
    const CUpti_PCSamplingData &d = *buf.data();
    // Expected, not an error: kernels first launched (graphs first uploaded) between episodes
    // never give records (docs/pc-sampling.md P19-P20). Counted for the totals; the
    // application's stderr is no place for it.
    if (d.nonUsrKernelsTotalSamples > 0 && stats.nonuser_samples == 0)
      debug_log(
          "PC samples of kernels CUPTI does not attribute (non-user kernels: first launched, "
          "or in a graph first uploaded, between episodes): counted as non-user samples, "
          "not published");
    stats.nonuser_samples += d.nonUsrKernelsTotalSamples;
    stats.dropped_samples += d.droppedSamples;
    if (d.totalNumPcs == 0) break;
    publish(buf, stats);
    if (d.remainingNumPcs == 0) break;
  }
  return {};
}

}  // namespace parcagpu
