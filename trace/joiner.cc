#include "joiner.h"

#include "parcagpu/cbid_table.h"

namespace parcagpu::trace {

bool is_graph_cbid(int32_t c) { return parcagpu::is_graph_launch(c); }

void Joiner::see_pid(uint32_t pid) {
  ++events_;
  if (have_pid_ && pid == last_pid_) return;
  pids_.insert(pid);
  last_pid_ = pid;
  have_pid_ = true;
}

uint32_t Joiner::name_id(std::string_view name) {
  auto it = name_ids_.find(name);
  if (it != name_ids_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(names_.size());
  names_.emplace_back(std::string(name), NameCounts{});
  name_ids_.emplace(std::string(name), id);
  return id;
}

void Joiner::count_match(int32_t cbid, bool graph_record, uint32_t name, uint64_t n) {
  matched_ += n;
  matched_by_cbid_[cbid] += n;
  if (graph_record) graph_matched_ += n;
  names_[name].second.matched += n;
}

void Joiner::retire(uint64_t k, int32_t cbid) {
  if (retired_window_ == 0) return;
  while (retired_order_.size() >= retired_window_) {
    retired_.erase(retired_order_.front());
    retired_order_.pop_front();
  }
  if (retired_.emplace(k, cbid).second) retired_order_.push_back(k);
}

void Joiner::on_correlation(uint32_t pid, uint32_t corr, int32_t cbid) {
  see_pid(pid);
  ++correlations_;
  ++correlations_by_cbid_[cbid];
  const uint64_t k = key(pid, corr);
  const bool graph = is_graph_cbid(cbid);

  // A (pid, ID) announced again: the earlier announcement ends here.
  if (auto it = live_.find(k); it != live_.end()) {
    ++duplicates_;
    if (it->second.kernels == 0) {
      --awaiting_;
      (is_graph_cbid(it->second.signed_cbid) ? replaced_orphans_graph_ : replaced_orphans_eager_)++;
    }
    live_.erase(it);
  }
  retired_.erase(k);  // its deque entry stays; erase() of a missing key later is harmless

  uint32_t kernels = 0;
  if (auto p = pending_.find(k); p != pending_.end()) {
    // Kernels arrived first and waited: they match now.
    Pending &pk = p->second;
    kernels = static_cast<uint32_t>(pk.names.size());
    matched_ += kernels;
    matched_by_cbid_[cbid] += kernels;
    graph_matched_ += pk.graph_records;
    for (uint32_t n : pk.names) names_[n].second.matched++;
    pending_.erase(p);
  }
  if (kernels == 0) {
    live_.emplace(k, Correlation{cbid, 0});
    ++awaiting_;
  } else if (graph) {
    ++graph_launches_with_kernels_;
    live_.emplace(k, Correlation{cbid, kernels});
  } else {
    retire(k, cbid);
  }
}

Joiner::Match Joiner::on_kernel(const KernelRecord &r) {
  see_pid(r.pid);
  const uint64_t k = key(r.pid, r.correlation_id);
  ++kernel_records_;
  const bool graph_record = r.graph_id != 0;
  if (graph_record) ++graph_kernel_records_;
  const uint32_t name = name_id(r.name);
  names_[name].second.records++;

  if (auto it = live_.find(k); it != live_.end()) {
    const int32_t cbid = it->second.signed_cbid;
    count_match(cbid, graph_record, name);
    if (it->second.kernels++ == 0) {
      --awaiting_;
      if (is_graph_cbid(cbid)) {
        ++graph_launches_with_kernels_;
      } else {
        live_.erase(it);  // an eager launch has its kernel: keep memory flat
        retire(k, cbid);
      }
    }
    return {true, cbid};
  }
  if (auto it = retired_.find(k); it != retired_.end()) {
    count_match(it->second, graph_record, name);
    return {true, it->second};
  }
  Pending &p = pending_[k];
  p.names.push_back(name);
  if (graph_record) ++p.graph_records;
  if (closing_) ++p.while_closing;
  return {};
}

void Joiner::on_error(uint32_t pid) {
  see_pid(pid);
  ++errors_;
}

void Joiner::on_gpu_config(uint32_t pid) {
  see_pid(pid);
  ++gpu_config_;
}

void Joiner::on_other(uint32_t pid) { see_pid(pid); }

std::vector<uint32_t> Joiner::awaiting_pids() const {
  std::unordered_set<uint32_t> pids;
  for (const auto &[k, c] : live_)
    if (c.kernels == 0) pids.insert(static_cast<uint32_t>(k >> 32));
  return {pids.begin(), pids.end()};
}

void Joiner::fill(Summary *s) const {
  s->correlations = correlations_;
  s->correlations_by_cbid = correlations_by_cbid_;
  s->kernel_records = kernel_records_;
  s->graph_kernel_records = graph_kernel_records_;
  s->kernels_matched = matched_;
  s->graph_kernels_matched = graph_matched_;
  s->graph_launches_with_kernels = graph_launches_with_kernels_;
  s->duplicate_correlations = duplicates_;
  uint64_t orphan_kernels = 0, ignored = 0;
  for (const auto &[k, p] : pending_) {
    orphan_kernels += p.names.size() - p.while_closing;
    ignored += p.while_closing;
  }
  s->orphan_kernels = orphan_kernels;
  s->kernels_ignored_at_exit = ignored;
  uint64_t eager = replaced_orphans_eager_, graph = replaced_orphans_graph_;
  for (const auto &[k, c] : live_)
    if (c.kernels == 0) (is_graph_cbid(c.signed_cbid) ? graph : eager)++;
  s->orphan_correlations_eager = eager;
  s->orphan_correlations_graph = graph;
  s->events = events_;
  s->pids = pids_.size();
  s->errors = errors_;
  s->gpu_config = gpu_config_;
  s->kernels_by_name.clear();
  for (const auto &[n, c] : names_) s->kernels_by_name[n] = c;
  s->matched_by_cbid = matched_by_cbid_;
}

}  // namespace parcagpu::trace
