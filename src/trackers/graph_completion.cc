#include "trackers/graph_completion.h"

#include <chrono>

#include "base/log.h"
#include "base/process_guard.h"

namespace parcagpu {

namespace {

RepeatedError g_watch_failed("activity", "graph launches whose end could not be watched");
RepeatedError g_timed_out("activity", "graph launches still running 2 s after their call",
                          "launches");
RepeatedError g_waiter_start_failed("activity", "graph completion thread could not start");

}  // namespace

GraphCompletion::GraphCompletion(const CudaApi *cuda, std::function<void()> done,
                                 std::function<uint64_t()> now_ns)
    : cuda_(cuda), done_(std::move(done)), now_ns_(std::move(now_ns)) {}

GraphCompletion::~GraphCompletion() { shutdown(); }

void GraphCompletion::start_thread() {
  std::lock_guard<std::mutex> lock(mu_);
  if (waiter_.joinable() || stopping_) return;
  try {
    waiter_ = std::thread([this] { waiter_main(); });
  } catch (...) {
    thread_failed_ = true;
    g_waiter_start_failed.report(kErrInternal,
                                 "cannot start the graph completion thread; kernel activity "
                                 "goes off at the end of graph launch calls, and graph "
                                 "kernels still running then get wrong end timestamps");
  }
}

uint64_t GraphCompletion::lengthen_grace() {
  uint64_t g = grace_ns_.load(std::memory_order_relaxed), next;
  do {
    next = std::min(std::max<uint64_t>(g, 1) * 4, kMaxGraceNs);
  } while (next != g && !grace_ns_.compare_exchange_weak(g, next, std::memory_order_relaxed));
  if (next != g)
    debug_log(
        "graph kernel records came with a made-up end: kernel activity now stays on %.0f ms "
        "after the GPU is past an announced graph launch",
        static_cast<double>(next) / 1e6);
  return next;
}

void GraphCompletion::on_made_up_ends(uint64_t total) {
  if (total <= made_up_seen_) return;
  made_up_seen_ = total;
  lengthen_grace();
}

bool GraphCompletion::watch(CUstream stream) {
  if (!cuda_) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || thread_failed_) return false;
  }
  CUevent event = nullptr;
  // No timing: the cheapest event, and it makes the driver track nothing but completion.
  CUresult r = cuda_->cuEventCreate(&event, CU_EVENT_DISABLE_TIMING);
  const char *what = "cuEventCreate";
  if (r == CUDA_SUCCESS) {
    r = cuda_->cuEventRecord(event, stream);
    what = "cuEventRecord";
    if (r != CUDA_SUCCESS) cuda_->cuEventDestroy_v2(event);
  }
  if (r != CUDA_SUCCESS) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.failed;
    }
    g_watch_failed.report(kErrDriver,
                          "%s failed (CUresult %d): kernel activity goes off at the end of such "
                          "graph launch calls, and graph kernels still running then get wrong "
                          "end timestamps (docs/cupti-facts.md)",
                          what, static_cast<int>(r));
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    watched_.push_back({event, now_ns_()});
    ++stats_.watched;
  }
  cv_.notify_one();
  return true;
}

void GraphCompletion::poll() {
  std::vector<Watched> ended;
  uint64_t timed_out = 0, failed = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t now = now_ns_();
    const uint64_t grace = grace_ns();
    size_t kept = 0;
    for (Watched &w : watched_) {
      if (w.complete_ns != 0) {
        if (now - w.complete_ns < grace)
          watched_[kept++] = w;
        else
          ended.push_back(w);
        continue;
      }
      const CUresult r = cuda_->cuEventQuery(w.event);
      if (r == CUDA_ERROR_NOT_READY && now - w.since_ns < kTimeoutNs) {
        watched_[kept++] = w;
        continue;
      }
      if (r == CUDA_SUCCESS && grace > 0) {
        w.complete_ns = now;
        watched_[kept++] = w;
        continue;
      }
      if (r == CUDA_ERROR_NOT_READY)
        ++timed_out;
      else if (r != CUDA_SUCCESS)
        ++failed;
      ended.push_back(w);
    }
    watched_.resize(kept);
    stats_.finished += ended.size() - timed_out - failed;
    stats_.timed_out += timed_out;
    stats_.failed += failed;
  }
  // Outside the lock: done() takes the activity collector's lock, and a launch may be in
  // watch() meanwhile.
  for (const Watched &w : ended) {
    cuda_->cuEventDestroy_v2(w.event);
    done_();
  }
  if (timed_out)
    g_timed_out.report_n(timed_out, kErrDataLost,
                         "%llu graph launches still running 2 s after their call: kernel "
                         "activity went off, so their kernels still running then get wrong end "
                         "timestamps (docs/cupti-facts.md)",
                         static_cast<unsigned long long>(timed_out));
  if (failed)
    g_watch_failed.report(kErrDriver,
                          "cuEventQuery failed: kernel activity went off at once for %llu graph "
                          "launches, and their kernels still running then get wrong end "
                          "timestamps (docs/cupti-facts.md)",
                          static_cast<unsigned long long>(failed));
}

void GraphCompletion::waiter_main() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (watched_.empty()) {
      cv_.wait(lock, [this] { return stopping_ || !watched_.empty(); });
      continue;
    }
    cv_.wait_for(lock, std::chrono::nanoseconds(kPollNs), [this] { return stopping_; });
    if (stopping_ || process_guard::forked_child()) break;
    lock.unlock();
    poll();
    lock.lock();
  }
}

void GraphCompletion::shutdown() {
  std::vector<Watched> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    ended.swap(watched_);
  }
  cv_.notify_all();
  if (waiter_.joinable()) waiter_.join();
  // Ended without a look: at exit everything is flushed anyway. The events are given back (a
  // driver already torn down says so and frees nothing: the process is ending).
  for (const Watched &w : ended) {
    if (cuda_) cuda_->cuEventDestroy_v2(w.event);
    done_();
  }
}

GraphCompletion::Stats GraphCompletion::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

size_t GraphCompletion::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watched_.size();
}

}  // namespace parcagpu
