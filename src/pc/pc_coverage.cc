#include "pc/pc_coverage.h"

#include <functional>
#include <string_view>

namespace parcagpu {

uint64_t PcCoverage::key(const char *name) {
  return std::hash<std::string_view>{}(std::string_view(name ? name : ""));
}

bool PcCoverage::hot(const Kernel &k) const {
  return total_ns_ != 0 && static_cast<double>(k.gpu_ns) >= kHotShare * total_ns_;
}

void PcCoverage::on_kernel(const char *name, uint64_t gpu_ns) {
  if (!name) return;
  const uint64_t h = key(name);
  std::lock_guard<std::mutex> lock(mu_);
  total_ns_ += gpu_ns;
  auto it = kernels_.find(h);
  if (it == kernels_.end()) {
    if (kernels_.size() >= kMaxKernels) {
      ++not_kept_;
      return;
    }
    it = kernels_.emplace(h, Kernel{}).first;
  }
  it->second.gpu_ns += gpu_ns;
}

void PcCoverage::on_sampled(const char *name) {
  if (!name) return;
  const uint64_t h = key(name);
  std::lock_guard<std::mutex> lock(mu_);
  graph_dirty_ = true;
  auto it = kernels_.find(h);
  if (it != kernels_.end()) {
    it->second.sampled = true;
  } else if (kernels_.size() < kMaxKernels) {
    kernels_[h].sampled = true;  // its records may come before its activity record
  }
}

bool PcCoverage::wanted_at(const char *function) {
  std::lock_guard<std::mutex> lock(mu_);
  if (function) {
    auto it = kernels_.find(key(function));
    if (it == kernels_.end()) return false;
    if (!it->second.eager) graph_dirty_ = true;
    it->second.eager = true;
    return !it->second.sampled && hot(it->second);
  }
  return graph_wanted();
}

bool PcCoverage::graph_wanted() {
  if (!graph_dirty_ && ++graph_queries_ % kGraphRescan != 0) return graph_wanted_;
  graph_dirty_ = false;
  // A graph launch: its kernels are not named here. A hot kernel with no samples that was
  // never launched eagerly runs in a graph (or through a launch path without a name).
  graph_wanted_ = false;
  for (const auto &[h, k] : kernels_)
    if (!k.sampled && !k.eager && hot(k)) graph_wanted_ = true;
  return graph_wanted_;
}

size_t PcCoverage::targets() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto &[h, k] : kernels_) n += !k.sampled && hot(k);
  return n;
}

uint64_t PcCoverage::kernels_not_kept() const {
  std::lock_guard<std::mutex> lock(mu_);
  return not_kept_;
}

}  // namespace parcagpu
