#include "profile.h"

#include <algorithm>
#include <unordered_set>

namespace parcagpu::trace {

void GpuProfile::add(uint32_t stack_id, uint32_t kernel, uint64_t gpu_ns) {
  Cell &c = cells_[static_cast<uint64_t>(stack_id) << 32 | kernel];
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
  for (const auto &[k, c] : cells_) ids.insert(static_cast<uint32_t>(k >> 32));
  return ids.size();
}

std::vector<GpuProfile::Row> GpuProfile::rows() const {
  std::unordered_map<uint32_t, Row> by_stack;
  for (const auto &[k, c] : cells_) {
    Row &r = by_stack[static_cast<uint32_t>(k >> 32)];
    r.stack_id = static_cast<uint32_t>(k >> 32);
    r.gpu_ns += c.gpu_ns;
    r.kernels += c.kernels;
    r.by_kernel.push_back({static_cast<uint32_t>(k), c.gpu_ns, c.kernels});
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
        frames.push_back({it->site_text(), it->inlined ? FlameFrame::Kind::Inlined : FlameFrame::Kind::Cpu});
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
