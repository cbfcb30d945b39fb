#include "capture_sites.h"

#include <algorithm>

namespace parcagpu::trace {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string base_name(const std::string &qualified) {
  const size_t colons = qualified.rfind("::");
  return colons == std::string::npos ? qualified : qualified.substr(colons + 2);
}

// CUDA runtime plumbing between the user's launch and the driver.
bool is_runtime_frame(const Frame &f, std::string_view launch_name,
                      const std::string &launch_short) {
  if (starts_with(f.module, "libcudart")) return true;
  if (f.function.empty()) return false;
  const std::string q = short_function_name(f.function);
  const std::string b = base_name(q);
  if (starts_with(q, "cudart::") || starts_with(b, "__cuda") || starts_with(b, "__device_stub__") ||
      starts_with(b, "cuda"))
    return true;
  if (b.size() > 2 && b[0] == 'c' && b[1] == 'u' && b[2] >= 'A' && b[2] <= 'Z') return true;
  // nvcc's host stub of the kernel carries the kernel's own (mangled) name.
  if (!launch_name.empty() && (f.function == launch_name || q == launch_short)) return true;
  return false;
}

}  // namespace

int captured_at_index(const std::vector<Frame> &stack, std::string_view launch_name) {
  if (stack.empty()) return -1;
  const std::string launch_short =
      launch_name.empty() ? "" : short_function_name(demangle(launch_name));
  for (size_t i = 0; i < stack.size(); ++i)
    if (!stack[i].function.empty() && !is_runtime_frame(stack[i], launch_name, launch_short))
      return static_cast<int>(i);
  return 0;
}

std::string CaptureSites::captured_at_function(const Site &s) const {
  if (s.captured_at < 0 || StackTable::is_pseudo(s.stack_id)) return "";
  return stacks_.frames(s.stack_id)[s.captured_at].name();
}

template <typename Map>
typename Map::mapped_type *CaptureSites::find(Map Generation::*which, const Key &k) {
  Map &cur = cur_.*which;
  if (auto it = cur.find(k); it != cur.end()) return &it->second;
  Map &old = old_.*which;
  auto it = old.find(k);
  if (it == old.end()) return nullptr;
  auto &moved = cur[k] = std::move(it->second);  // still in use: keep it
  old.erase(it);
  return &moved;
}

void CaptureSites::maybe_rotate() {
  if (cur_.size() < max_entries_ / 2) return;
  c_.capture_entries_forgotten += old_.size();
  old_ = std::move(cur_);
  cur_ = Generation{};
}

size_t CaptureSites::entries() const { return cur_.size() + old_.size(); }

void CaptureSites::on_capture(uint32_t pid, uint32_t, int32_t signed_cbid, std::string_view name,
                              uint32_t graph_id, uint64_t node_id, uint32_t stack_id) {
  ++c_.graph_capture_launches;
  Site site;
  site.launch_name = std::string(name);
  site.signed_cbid = signed_cbid;
  site.graph_id = graph_id;
  site.stack_id = stack_id;
  if (!StackTable::is_pseudo(stack_id)) site.captured_at = captured_at_index(stacks_.frames(stack_id), name);
  pids_.insert(pid);
  old_.sites.erase({pid, node_id});
  cur_.sites[{pid, node_id}] = std::move(site);
  maybe_rotate();
}

void CaptureSites::on_clone(uint32_t pid, uint64_t original, uint64_t cloned, uint32_t) {
  ++c_.graph_node_clones;
  if (original == cloned) return;
  pids_.insert(pid);
  old_.cloned_from.erase({pid, cloned});
  cur_.cloned_from[{pid, cloned}] = original;
  maybe_rotate();
}

const CaptureSites::Site *CaptureSites::resolve(uint32_t pid, uint64_t node) {
  // A node of an exec was cloned from a node of the captured graph, or from a clone of it
  // (a cloned graph instantiated): follow the chain, at most 64 steps (no loops).
  const Site *found = nullptr;
  for (int hop = 0; hop < 64 && !found; ++hop) {
    if (const Site *s = find(&Generation::sites, Key{pid, node})) {
      found = s;
      break;
    }
    const uint64_t *from = find(&Generation::cloned_from, Key{pid, node});
    if (!from) break;
    node = *from;
  }
  // Moving a generation moves its nodes: `found` stays valid when the current one becomes old.
  maybe_rotate();
  return found;
}

const CaptureSites::Site *CaptureSites::on_graph_kernel(uint32_t pid, uint64_t node_id,
                                                        uint32_t kernel_name_id, uint64_t gpu_ns) {
  const Site *site = resolve(pid, node_id);
  if (!site) {
    ++c_.graph_kernels_without_capture_site;
    return nullptr;
  }
  ++c_.graph_kernels_with_capture_site;
  Agg &a = by_kernel_stack_[{kernel_name_id, site->stack_id}];
  ++a.records;
  a.total_ns += gpu_ns;
  if (a.launch_name.empty()) {
    a.launch_name = site->launch_name;
    a.captured_at = site->captured_at;
  }
  return site;
}

void CaptureSites::forget(uint32_t pid) {
  // Every process that exits on the machine comes here: only one that captured or cloned walks.
  if (pids_.erase(pid) == 0) return;
  bool any = false;
  for (Generation *g : {&cur_, &old_}) {
    any |= std::erase_if(g->cloned_from, [pid](const auto &e) { return e.first.pid == pid; }) > 0;
    any |= std::erase_if(g->sites, [pid](const auto &e) { return e.first.pid == pid; }) > 0;
  }
  if (any) ++c_.capture_processes_forgotten;
}

void CaptureSites::fill(Summary *s, bool with_sites) const {
  add_counters(s, c_);
  s->capture_sites_enabled = with_sites;
  s->capture_sites.clear();
  if (!with_sites) return;
  for (const auto &[key, a] : by_kernel_stack_) {
    CaptureSiteSummary c;
    const auto [name_id, stack_id] = key;
    c.kernel = names_.raw(name_id).empty() ? a.launch_name : names_.raw(name_id);
    c.kernel_demangled = demangle(c.kernel);
    c.records = a.records;
    c.total_ns = a.total_ns;
    c.captured_at_index = a.captured_at;
    if (!StackTable::is_pseudo(stack_id)) {
      const std::vector<Frame> &frames = stacks_.frames(stack_id);
      if (a.captured_at >= 0) c.captured_at = frames[a.captured_at].name();
      for (const Frame &f : frames) c.stack.push_back(f.text());
    }
    s->capture_sites.push_back(std::move(c));
  }
  std::stable_sort(s->capture_sites.begin(), s->capture_sites.end(),
                   [](const CaptureSiteSummary &a, const CaptureSiteSummary &b) {
                     return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.records > b.records;
                   });
}

}  // namespace parcagpu::trace
