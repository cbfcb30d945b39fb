#include "nvtx_ranges.h"

#include <algorithm>

#include "parcagpu/abi.h"

namespace parcagpu::trace {

std::string nvtx_frame_name(std::string_view message) {
  return message.empty() ? std::string("[nvtx] (no message)") : "[nvtx] " + std::string(message);
}

void NvtxRanges::on_record(uint32_t pid, uint32_t tid, uint16_t kind, uint64_t range_id,
                           std::string_view message) {
  ++c_.nvtx_records;
  switch (kind) {
    case PARCAGPU_NVTX_KIND_RANGE_PUSH:
      push(pid, tid, message);
      break;
    case PARCAGPU_NVTX_KIND_RANGE_POP:
      pop(pid, tid);
      break;
    case PARCAGPU_NVTX_KIND_RANGE_START:
      start(pid, tid, range_id, message);
      break;
    case PARCAGPU_NVTX_KIND_RANGE_END:
      end(pid, range_id);
      break;
    case PARCAGPU_NVTX_KIND_MARK:
      ++c_.nvtx_marks;
      break;
    default:
      ++c_.nvtx_unknown_kinds;
  }
}

NvtxRanges::Thread *NvtxRanges::thread_for_open(uint32_t pid, uint32_t tid) {
  const uint64_t k = key(pid, tid);
  if (auto it = threads_.find(k); it != threads_.end()) return &it->second;
  if (threads_.size() >= limits_.max_threads) {
    ++c_.nvtx_threads_over_cap;
    return nullptr;
  }
  return &threads_[k];
}

void NvtxRanges::release_if_empty(uint64_t k) {
  if (auto it = threads_.find(k); it != threads_.end() && it->second.empty()) threads_.erase(it);
}

void NvtxRanges::push(uint32_t pid, uint32_t tid, std::string_view message) {
  Thread *t = thread_for_open(pid, tid);
  if (!t) return;
  if (t->pushed.size() >= limits_.max_depth) {
    ++t->pushed_beyond;
    ++c_.nvtx_depth_overflows;
    return;
  }
  t->pushed.push_back({++seq_, 0, std::string(message)});
}

void NvtxRanges::pop(uint32_t pid, uint32_t tid) {
  const uint64_t k = key(pid, tid);
  auto it = threads_.find(k);
  if (it == threads_.end() || (it->second.pushed.empty() && it->second.pushed_beyond == 0)) {
    ++c_.nvtx_unmatched_pops;
    return;
  }
  Thread &t = it->second;
  if (t.pushed_beyond > 0)
    --t.pushed_beyond;
  else
    t.pushed.pop_back();
  release_if_empty(k);
}

void NvtxRanges::start(uint32_t pid, uint32_t tid, uint64_t range_id, std::string_view message) {
  Thread *t = thread_for_open(pid, tid);
  if (!t) return;
  if (t->started.size() >= limits_.max_started) {
    ++c_.nvtx_starts_over_cap;
    release_if_empty(key(pid, tid));
    return;
  }
  // A range ID still open (not unique, or its end lost): the later start replaces it.
  if (started_by_.count({pid, range_id})) end(pid, range_id);
  t = &threads_[key(pid, tid)];  // end() may have released the thread
  t->started.push_back({++seq_, range_id, std::string(message)});
  started_by_[{pid, range_id}] = tid;
}

void NvtxRanges::end(uint32_t pid, uint64_t range_id) {
  auto at = started_by_.find({pid, range_id});
  if (at == started_by_.end()) {
    ++c_.nvtx_unmatched_ends;
    return;
  }
  const uint64_t k = key(pid, at->second);
  started_by_.erase(at);
  auto it = threads_.find(k);
  if (it == threads_.end()) return;
  std::vector<Range> &started = it->second.started;
  started.erase(std::remove_if(started.begin(), started.end(),
                               [range_id](const Range &r) { return r.range_id == range_id; }),
                started.end());
  release_if_empty(k);
}

std::vector<std::string_view> NvtxRanges::open_ranges(uint32_t pid, uint32_t tid) const {
  std::vector<std::string_view> out;
  auto it = threads_.find(key(pid, tid));
  if (it == threads_.end()) return out;
  const Thread &t = it->second;
  // Both lists are in opening order: merged, the earliest opened is the outermost.
  size_t p = 0, s = 0;
  while (p < t.pushed.size() || s < t.started.size()) {
    const bool take_pushed =
        s == t.started.size() || (p < t.pushed.size() && t.pushed[p].seq < t.started[s].seq);
    out.push_back(take_pushed ? t.pushed[p++].message : t.started[s++].message);
  }
  return out;
}

uint32_t NvtxRanges::launch_stack(uint32_t pid, uint32_t tid, uint32_t stack, StackTable *table) {
  const std::vector<std::string_view> ranges = open_ranges(pid, tid);
  if (ranges.empty()) return stack;
  ++c_.nvtx_launches_in_ranges;
  std::string k(reinterpret_cast<const char *>(&stack), sizeof stack);
  for (std::string_view r : ranges) {
    k += '\0';
    k += r;
  }
  if (auto it = cache_.find(k); it != cache_.end()) return it->second;
  std::vector<Frame> frames = table->frames(stack);  // innermost first
  auto label = [](std::string text) {
    Frame f;
    f.function = std::move(text);
    f.module = "[nvtx]";
    f.label = true;
    return f;
  };
  if (const char *pseudo = StackTable::pseudo_name(stack)) frames.push_back(label(pseudo));
  for (auto r = ranges.rbegin(); r != ranges.rend(); ++r)
    frames.push_back(label(nvtx_frame_name(*r)));
  const uint32_t id = table->intern(std::move(frames));
  if (cache_.size() >= limits_.max_cached) cache_.clear();
  cache_.emplace(std::move(k), id);
  return id;
}

void NvtxRanges::free_thread(uint64_t k) {
  auto it = threads_.find(k);
  if (it == threads_.end()) return;
  const Thread &t = it->second;
  c_.nvtx_ranges_left_open += t.pushed.size() + t.pushed_beyond + t.started.size();
  const uint32_t pid = static_cast<uint32_t>(k >> 32);
  for (const Range &r : t.started) started_by_.erase({pid, r.range_id});
  threads_.erase(it);
}

void NvtxRanges::thread_exit(uint32_t pid, uint32_t tid) { free_thread(key(pid, tid)); }

void NvtxRanges::forget_process(uint32_t pid) {
  std::vector<uint64_t> gone;
  for (const auto &[k, t] : threads_)
    if (static_cast<uint32_t>(k >> 32) == pid) gone.push_back(k);
  for (uint64_t k : gone) free_thread(k);
  // Ranges started by threads no longer held (none should be left): dropped with the process.
  started_by_.erase(started_by_.lower_bound({pid, 0}), started_by_.lower_bound({pid + 1, 0}));
}

}  // namespace parcagpu::trace
