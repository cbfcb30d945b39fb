#include "profile.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <unordered_set>

namespace parcagpu::trace {

void GpuProfile::add(uint32_t stack_id, uint32_t kernel, uint64_t gpu_ns, Origin origin) {
  Sum &c = cells_[Key{stack_id, kernel, origin.process, origin.device}];
  c.gpu_ns += gpu_ns;
  ++c.kernels;
  total_ns_ += gpu_ns;
  ++total_kernels_;
}

void GpuProfile::clear() {
  cells_.clear();
  total_ns_ = total_kernels_ = 0;
}

size_t GpuProfile::stacks() const {
  std::unordered_set<uint32_t> ids;
  for (const auto &[k, c] : cells_) ids.insert(k.stack_id);
  return ids.size();
}

std::vector<GpuProfile::Cell> GpuProfile::cells() const {
  std::vector<Cell> out;
  out.reserve(cells_.size());
  for (const auto &[k, c] : cells_) out.push_back({k.stack_id, k.kernel, {k.process, k.device}, c.gpu_ns, c.kernels});
  std::sort(out.begin(), out.end(), [](const Cell &a, const Cell &b) {
    return std::tie(a.stack_id, a.kernel, a.origin.process, a.origin.device) <
           std::tie(b.stack_id, b.kernel, b.origin.process, b.origin.device);
  });
  return out;
}

std::vector<GpuProfile::Row> GpuProfile::rows() const {
  std::unordered_map<uint32_t, Row> by_stack;
  std::unordered_map<uint64_t, size_t> kernel_at;  // stack << 32 | kernel -> index in by_kernel
  for (const auto &[k, c] : cells_) {
    Row &r = by_stack[k.stack_id];
    r.stack_id = k.stack_id;
    r.gpu_ns += c.gpu_ns;
    r.kernels += c.kernels;
    auto [at, fresh] = kernel_at.try_emplace(static_cast<uint64_t>(k.stack_id) << 32 | k.kernel, r.by_kernel.size());
    if (fresh) r.by_kernel.push_back({k.kernel, 0, 0});
    r.by_kernel[at->second].gpu_ns += c.gpu_ns;
    r.by_kernel[at->second].kernels += c.kernels;
  }
  std::vector<Row> rows;
  rows.reserve(by_stack.size());
  for (auto &[id, r] : by_stack) {
    std::sort(r.by_kernel.begin(), r.by_kernel.end(), [](const KernelCell &a, const KernelCell &b) {
      return a.gpu_ns != b.gpu_ns ? a.gpu_ns > b.gpu_ns : a.kernel < b.kernel;
    });
    rows.push_back(std::move(r));
  }
  std::sort(rows.begin(), rows.end(), [](const Row &a, const Row &b) {
    return a.gpu_ns != b.gpu_ns ? a.gpu_ns > b.gpu_ns : a.stack_id < b.stack_id;
  });
  return rows;
}

std::vector<StackSummary> summarize_stacks(const GpuProfile &p, const StackTable &stacks,
                                           const NameTable &names, size_t n) {
  std::vector<StackSummary> out;
  for (const GpuProfile::Row &r : p.rows()) {
    if (out.size() >= n) break;
    StackSummary s;
    s.stack_id = r.stack_id;
    s.gpu_ns = r.gpu_ns;
    s.kernels = r.kernels;
    if (const char *pseudo = StackTable::pseudo_name(r.stack_id))
      s.frames.push_back(pseudo);
    else
      for (const Frame &f : stacks.frames(r.stack_id)) s.frames.push_back(f.text());
    for (const GpuProfile::KernelCell &k : r.by_kernel)
      s.by_kernel.push_back({names.raw(k.kernel), names.demangled(k.kernel), k.gpu_ns, k.kernels});
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<ProcessSummary> summarize_processes(const GpuProfile &p, const ProcessTable &processes,
                                                const NameTable &names, size_t n) {
  struct Sums {
    uint64_t gpu_ns = 0, kernels = 0;
  };
  struct Process {
    Sums total;
    std::map<uint32_t, Sums> devices, kernels;
  };
  std::map<uint32_t, Process> by_id;
  for (const GpuProfile::Cell &c : p.cells()) {
    if (c.origin.process >= processes.size()) continue;  // no process (ProcessTable::kUnknown)
    Process &pr = by_id[c.origin.process];
    for (Sums *s : {&pr.total, &pr.devices[c.origin.device], &pr.kernels[c.kernel]}) {
      s->gpu_ns += c.gpu_ns;
      s->kernels += c.kernels;
    }
  }
  std::vector<ProcessSummary> out;
  for (const auto &[id, pr] : by_id) {
    const ProcessInfo &info = processes.info(id);
    ProcessSummary s;
    s.pid = info.pid;
    s.comm = info.comm;
    s.rank = info.rank;
    s.local_rank = info.local_rank;
    s.gpu_ns = pr.total.gpu_ns;
    s.kernels = pr.total.kernels;
    for (const auto &[device, d] : pr.devices) s.devices.push_back({device, d.gpu_ns, d.kernels});
    s.kernel_names = pr.kernels.size();
    s.by_kernel = top_kernels(pr.kernels, names, n);
    out.push_back(std::move(s));
  }
  // Ranked processes first, by rank (then local rank), then the others; pid breaks ties.
  auto order = [](const ProcessSummary &s) {
    const int64_t none = INT64_MAX;
    return std::make_tuple(s.rank ? *s.rank : s.local_rank ? *s.local_rank : none,
                           s.local_rank ? *s.local_rank : none, s.pid);
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const ProcessSummary &a, const ProcessSummary &b) { return order(a) < order(b); });
  return out;
}

std::vector<FoldedStack> folded_stacks(const GpuProfile &p, const StackTable &stacks,
                                       const NameTable &names) {
  std::vector<FoldedStack> out;
  for (const GpuProfile::Row &r : p.rows()) {
    std::vector<FlameFrame> frames;
    if (const char *pseudo = StackTable::pseudo_name(r.stack_id)) {
      frames.push_back({pseudo, FlameFrame::Kind::Pseudo});
    } else {
      const std::vector<Frame> &fs = stacks.frames(r.stack_id);
      for (auto it = fs.rbegin(); it != fs.rend(); ++it)  // root first
        frames.push_back({it->text(), it->label     ? FlameFrame::Kind::Pseudo
                                           : it->inlined ? FlameFrame::Kind::Inlined
                                                         : FlameFrame::Kind::Cpu});
    }
    for (const GpuProfile::KernelCell &k : r.by_kernel) {
      FoldedStack s;
      s.frames = frames;
      s.frames.push_back({"[gpu] " + names.display(k.kernel), FlameFrame::Kind::Gpu});
      s.value = k.gpu_ns;
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace parcagpu::trace
