#include "joiner.h"

#include <algorithm>

#include "parcagpu/cbid_table.h"

namespace parcagpu::trace {

bool is_graph_cbid(int32_t c) { return parcagpu::is_graph_launch(c); }

Joiner::Joiner(Limits limits, MatchSink *sink) : limits_(limits), sink_(sink) {
  if (limits_.max_entries < 2) limits_.max_entries = 2;
}

void Joiner::see_pid(uint32_t pid) {
  ++c_.events;
  if (have_pid_ && pid == last_pid_) return;
  pids_.insert(pid);
  last_pid_ = pid;
  have_pid_ = true;
}

void Joiner::see_time(uint64_t now_ns) {
  if (now_ns <= now_ns_) return;
  now_ns_ = now_ns;
  if (rotated_at_ns_ == 0) rotated_at_ns_ = now_ns;
  const uint64_t half = std::max<uint64_t>(limits_.max_age_ns / 2, 1);
  if (now_ns_ - rotated_at_ns_ < half) return;
  rotate(Rotation::kByAge);
  if (now_ns_ - rotated_at_ns_ >= 2 * half) rotate(Rotation::kByAge);  // quiet for max_age: the rest goes too
  rotated_at_ns_ = now_ns_;
}

void Joiner::tick(uint64_t now_ns) { see_time(now_ns); }

size_t Joiner::entries() const { return cur_.size() + old_.size(); }

void Joiner::forget(Generation &g, Rotation why) {
  for (auto &[k, c] : g.live) {
    if (c.kernels == 0) {
      --awaiting_;
      if (why == Rotation::kAtMaxPending) ++c_.forgotten_at_max_pending;
      (is_graph_cbid(c.launch.signed_cbid) ? c_.forgotten_correlations_graph : c_.forgotten_correlations_eager)++;
    } else {
      ++c_.retired_graph_launches;  // later kernels of it still match, within the retired window
      retire(k, c.launch);
    }
  }
  for (auto &[k, v] : g.pending) {
    for (const PendingKernel &p : v) (p.while_closing ? forgotten_kernels_closing_ : forgotten_kernels_)++;
    if (why == Rotation::kAtMaxPending) c_.forgotten_at_max_pending += v.size();
  }
  g = Generation{};
}

void Joiner::rotate(Rotation why) {
  forget(old_, why);
  old_ = std::move(cur_);
  cur_ = Generation{};
}

Joiner::Correlation *Joiner::find_live(uint64_t k) {
  if (auto it = cur_.live.find(k); it != cur_.live.end()) return &it->second;
  auto it = old_.live.find(k);
  if (it == old_.live.end()) return nullptr;
  Correlation &moved = cur_.live[k] = it->second;  // active again: keep it a full max_age
  old_.live.erase(it);
  return &moved;
}

void Joiner::count_match(int32_t cbid, bool graph_record, uint32_t name, uint64_t n) {
  c_.kernels_matched += n;
  c_.matched_by_cbid[cbid] += n;
  if (graph_record) c_.graph_kernels_matched += n;
  name_counts_[name].matched += n;
}

void Joiner::retire(uint64_t k, const Launch &l) {
  if (limits_.retired_window == 0) return;
  while (retired_order_.size() >= limits_.retired_window) {
    retired_.erase(retired_order_.front());
    retired_order_.pop_front();
  }
  if (retired_.insert_or_assign(k, l).second) retired_order_.push_back(k);
}

void Joiner::on_correlation(uint32_t pid, uint32_t corr, int32_t cbid, uint32_t stack_id,
                            uint64_t now_ns) {
  see_pid(pid);
  see_time(now_ns);
  ++c_.correlations;
  ++c_.correlations_by_cbid[cbid];
  const uint64_t k = key(pid, corr);
  const bool graph = is_graph_cbid(cbid);
  const Launch launch{pid, corr, cbid, stack_id, now_ns};

  // A (pid, ID) announced again: the earlier announcement ends here.
  for (Generation *g : {&cur_, &old_}) {
    auto it = g->live.find(k);
    if (it == g->live.end()) continue;
    ++c_.duplicate_correlations;
    if (it->second.kernels == 0) {
      --awaiting_;
      (is_graph_cbid(it->second.launch.signed_cbid) ? replaced_orphans_graph_ : replaced_orphans_eager_)++;
    }
    g->live.erase(it);
  }
  retired_.erase(k);  // its deque entry stays; erase() of a missing key later is harmless

  uint32_t kernels = 0;
  for (Generation *g : {&old_, &cur_}) {  // kernels arrived first and waited: they match now
    auto p = g->pending.find(k);
    if (p == g->pending.end()) continue;
    for (PendingKernel &pk : p->second) {
      count_match(cbid, pk.rec.graph_id != 0, pk.name_id);
      if (sink_) {
        pk.rec.name = names_.raw(pk.name_id);
        sink_->on_match(launch, pk.rec, pk.name_id, pk.tag);
      }
    }
    kernels += static_cast<uint32_t>(p->second.size());
    g->pending_kernels -= p->second.size();
    g->pending.erase(p);
  }
  if (kernels == 0) {
    cur_.live.emplace(k, Correlation{launch, 0});
    ++awaiting_;
  } else if (graph) {
    ++c_.graph_launches_with_kernels;
    cur_.live.emplace(k, Correlation{launch, kernels});
  } else {
    retire(k, launch);
  }
  if (cur_.size() >= limits_.max_entries / 2) rotate(Rotation::kAtMaxPending);
  peak_entries_ = std::max(peak_entries_, entries());
}

Joiner::Match Joiner::on_kernel(const KernelRecord &r, uint32_t tag) {
  see_pid(r.pid);
  see_time(r.seen_ns);
  const uint64_t k = key(r.pid, r.correlation_id);
  ++c_.kernel_records;
  const bool graph_record = r.graph_id != 0;
  if (graph_record) ++c_.graph_kernel_records;
  const uint32_t name = names_.id(r.name);
  if (name_counts_.size() <= name) name_counts_.resize(name + 1);
  name_counts_[name].records++;

  if (Correlation *c = find_live(k)) {
    const Launch launch = c->launch;
    count_match(launch.signed_cbid, graph_record, name);
    if (c->kernels++ == 0) {
      --awaiting_;
      if (is_graph_cbid(launch.signed_cbid)) {
        ++c_.graph_launches_with_kernels;
      } else {
        cur_.live.erase(k);  // an eager launch has its kernel: keep memory flat
        retire(k, launch);
      }
    }
    if (sink_) sink_->on_match(launch, r, name, tag);
    if (cur_.size() >= limits_.max_entries / 2) rotate(Rotation::kAtMaxPending);
    peak_entries_ = std::max(peak_entries_, entries());
    return {true, launch.signed_cbid};
  }
  if (auto it = retired_.find(k); it != retired_.end()) {
    count_match(it->second.signed_cbid, graph_record, name);
    if (sink_) sink_->on_match(it->second, r, name, tag);
    return {true, it->second.signed_cbid};
  }
  PendingKernel p;
  p.rec = r;
  p.rec.name = {};
  p.name_id = name;
  p.tag = tag;
  p.while_closing = closing_;
  cur_.pending[k].push_back(p);
  ++cur_.pending_kernels;
  if (cur_.size() >= limits_.max_entries / 2) rotate(Rotation::kAtMaxPending);
  peak_entries_ = std::max(peak_entries_, entries());
  return {};
}

Impossible Joiner::judge(KernelRecord *r) {
  KernelTimes t = kernel_times(*r, r->pid, r->seen_ns, r->process_start_ns);
  const uint64_t k = key(r->pid, r->correlation_id);  // the launch, if announced already
  if (auto it = cur_.live.find(k); it != cur_.live.end()) {
    t.announced_ns = it->second.launch.announced_ns;
  } else if (auto o = old_.live.find(k); o != old_.live.end()) {
    t.announced_ns = o->second.launch.announced_ns;
  } else if (auto d = retired_.find(k); d != retired_.end()) {
    t.announced_ns = d->second.announced_ns;
  }
  r->impossible = times_.check(t);
  return r->impossible;
}

void Joiner::on_error(uint32_t pid) {
  see_pid(pid);
  ++c_.errors;
}

void Joiner::on_gpu_config(uint32_t pid) {
  see_pid(pid);
  ++c_.gpu_config;
}

void Joiner::on_other(uint32_t pid) { see_pid(pid); }

std::vector<uint32_t> Joiner::awaiting_pids() const {
  std::unordered_set<uint32_t> pids;
  for (const Generation *g : {&cur_, &old_})
    for (const auto &[k, c] : g->live)
      if (c.kernels == 0) pids.insert(static_cast<uint32_t>(k >> 32));
  return {pids.begin(), pids.end()};
}

void Joiner::add_to(Counters *s) const {
  Counters c = c_;
  uint64_t orphan_kernels = forgotten_kernels_, ignored = forgotten_kernels_closing_;
  uint64_t eager = replaced_orphans_eager_ + c_.forgotten_correlations_eager;
  uint64_t graph = replaced_orphans_graph_ + c_.forgotten_correlations_graph;
  for (const Generation *g : {&cur_, &old_}) {
    for (const auto &[k, v] : g->pending)
      for (const PendingKernel &p : v) (p.while_closing ? ignored : orphan_kernels)++;
    for (const auto &[k, l] : g->live)
      if (l.kernels == 0) (is_graph_cbid(l.launch.signed_cbid) ? graph : eager)++;
  }
  c.orphan_kernels = orphan_kernels;
  c.kernels_ignored_at_exit = ignored;
  c.orphan_correlations_eager = eager;
  c.orphan_correlations_graph = graph;
  c.forgotten_kernels = forgotten_kernels_ + forgotten_kernels_closing_;
  c.joiner_peak_entries = peak_entries_;
  c.joiner_max_entries = limits_.max_entries;
  c.joiner_max_age_s = static_cast<double>(limits_.max_age_ns) * 1e-9;
  c.pids = pids_.size();
  c.impossible_kernel_records = times_.total();
  c.impossible_reversed = times_.count(Impossible::kReversed);
  c.impossible_longer_than_process = times_.count(Impossible::kLongerThanProcess);
  c.impossible_longer_than_launch = times_.count(Impossible::kLongerThanLaunch);
  c.impossible_stream_overlap = times_.count(Impossible::kStreamOverlap);
  c.impossible_device_overfull = times_.count(Impossible::kDeviceOverfull);
  for (size_t i = 0; i < name_counts_.size(); ++i)
    c.kernels_by_name[names_.raw(static_cast<uint32_t>(i))] = name_counts_[i];
  add_counters(s, c);
}

}  // namespace parcagpu::trace
