// The kernels seen in kernel activity records while PC sampling was enabled, by the hash of their
// names: the first record of one is a kernel first used in an episode, which keeps the episode
// learning (PcScheduler, P19/P20). PcSampler::on_kernel_record, on CUPTI's buffer thread.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>
#include <unordered_set>

namespace parcagpu {

class PcKernelsSeen {
 public:
  // True the first time `name` is seen.
  bool first_seen(const char *name) {
    const uint64_t h = std::hash<std::string_view>{}(std::string_view(name));
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.insert(h).second;
  }

 private:
  std::mutex mu_;
  std::unordered_set<uint64_t> seen_;
};

}  // namespace parcagpu
