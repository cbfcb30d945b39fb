#include "capture_sites.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>

namespace parcagpu::trace {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "ret ns::fn<T>(args) const" -> "ns::fn": no return type, template or argument lists.
std::string qualified_name(std::string_view f) {
  std::string s;
  int depth = 0;  // <> and () nesting
  for (size_t i = 0; i < f.size(); ++i) {
    if (f.substr(i, 21) == "(anonymous namespace)") {
      if (depth == 0) s += "(anonymous namespace)";
      i += 20;
      continue;
    }
    const char c = f[i];
    if (c == '<' || c == '(') {
      if (c == '(' && depth == 0) break;  // the argument list
      ++depth;
    } else if (c == '>' || c == ')') {
      if (depth > 0) --depth;
    } else if (depth == 0) {
      if (c == ' ') {
        s.clear();  // what came before was a return type
      } else {
        s += c;
      }
    }
  }
  return s;
}

std::string base_name(const std::string &qualified) {
  const size_t colons = qualified.rfind("::");
  return colons == std::string::npos ? qualified : qualified.substr(colons + 2);
}

std::string demangle(std::string_view mangled) {
  std::string m(mangled);
  int status = 0;
  char *d = abi::__cxa_demangle(m.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : m;
  std::free(d);
  return out;
}

// CUDA runtime plumbing between the user's launch and the driver.
bool is_runtime_frame(const Frame &f, std::string_view launch_name,
                      const std::string &launch_qualified) {
  if (starts_with(f.module, "libcudart")) return true;
  if (f.function.empty()) return false;
  const std::string q = qualified_name(f.function);
  const std::string b = base_name(q);
  if (starts_with(q, "cudart::") || starts_with(b, "__cuda") || starts_with(b, "__device_stub__") ||
      starts_with(b, "cuda"))
    return true;
  if (b.size() > 2 && b[0] == 'c' && b[1] == 'u' && b[2] >= 'A' && b[2] <= 'Z') return true;
  // nvcc's host stub of the kernel carries the kernel's own (mangled) name.
  if (!launch_name.empty() && (f.function == launch_name || q == launch_qualified)) return true;
  return false;
}

}  // namespace

bool is_mechanism_frame(const Frame &f, const std::string &lib_path) {
  if (!lib_path.empty() && f.path == lib_path) return true;
  return starts_with(f.module, "libparcagpu") || starts_with(f.module, "libcupti") ||
         starts_with(f.module, "libcuda.so");
}

int captured_at_index(const std::vector<Frame> &stack, std::string_view launch_name) {
  if (stack.empty()) return -1;
  const std::string launch_qualified = launch_name.empty() ? "" : qualified_name(demangle(launch_name));
  for (size_t i = 0; i < stack.size(); ++i)
    if (!stack[i].function.empty() && !is_runtime_frame(stack[i], launch_name, launch_qualified))
      return static_cast<int>(i);
  return 0;
}

std::string CaptureSites::Stack::captured_at_function() const {
  if (captured_at < 0) return "";
  const Frame &f = frames[captured_at];
  if (!f.function.empty()) return f.function;
  Frame plain = f;
  plain.scanned = false;
  return plain.text();
}

uint32_t CaptureSites::intern(std::vector<Frame> frames, std::string_view launch_name) {
  std::string key;
  for (const Frame &f : frames) key += f.text() + "\n";
  auto it = stack_ids_.find(key);
  if (it != stack_ids_.end()) return it->second;
  Stack s;
  s.captured_at = captured_at_index(frames, launch_name);
  s.frames = std::move(frames);
  const uint32_t id = static_cast<uint32_t>(stacks_.size());
  stacks_.push_back(std::move(s));
  stack_ids_.emplace(std::move(key), id);
  return id;
}

void CaptureSites::on_capture(uint32_t pid, uint32_t, int32_t signed_cbid, std::string_view name,
                              uint32_t graph_id, uint64_t node_id, std::vector<Frame> stack) {
  ++captures_;
  Site site;
  site.launch_name = std::string(name);
  site.signed_cbid = signed_cbid;
  site.graph_id = graph_id;
  stack.erase(std::remove_if(stack.begin(), stack.end(),
                             [this](const Frame &f) { return is_mechanism_frame(f, lib_path_); }),
              stack.end());
  if (!stack.empty()) site.stack_id = intern(std::move(stack), name);
  procs_[pid].sites[node_id] = std::move(site);
}

void CaptureSites::on_clone(uint32_t pid, uint64_t original, uint64_t cloned, uint32_t) {
  ++clones_;
  if (original == cloned) return;
  procs_[pid].cloned_from[cloned] = original;
}

const CaptureSites::Site *CaptureSites::resolve(uint32_t pid, uint64_t node) const {
  auto p = procs_.find(pid);
  if (p == procs_.end()) return nullptr;
  // A node of an exec was cloned from a node of the captured graph, or from a clone of it
  // (a cloned graph instantiated): follow the chain, at most 64 steps (no loops).
  for (int hop = 0; hop < 64; ++hop) {
    if (auto s = p->second.sites.find(node); s != p->second.sites.end()) return &s->second;
    auto c = p->second.cloned_from.find(node);
    if (c == p->second.cloned_from.end()) return nullptr;
    node = c->second;
  }
  return nullptr;
}

const CaptureSites::Site *CaptureSites::on_graph_kernel(uint32_t pid, uint64_t node_id,
                                                        std::string_view kernel_name,
                                                        uint64_t start_ns, uint64_t end_ns) {
  const Site *site = resolve(pid, node_id);
  if (!site) {
    ++without_site_;
    return nullptr;
  }
  ++with_site_;
  const std::string_view name = kernel_name.empty() ? std::string_view(site->launch_name) : kernel_name;
  Agg &a = by_kernel_stack_[{std::string(name), site->stack_id}];
  ++a.records;
  if (end_ns > start_ns) a.total_ns += end_ns - start_ns;
  return site;
}

void CaptureSites::fill(Summary *s, bool with_sites) const {
  s->graph_capture_launches = captures_;
  s->graph_node_clones = clones_;
  s->graph_kernels_with_capture_site = with_site_;
  s->graph_kernels_without_capture_site = without_site_;
  s->capture_sites_enabled = with_sites;
  s->capture_sites.clear();
  if (!with_sites) return;
  for (const auto &[key, a] : by_kernel_stack_) {
    CaptureSiteSummary c;
    c.kernel = key.first;
    c.records = a.records;
    c.total_ns = a.total_ns;
    const Stack &st = stacks_[key.second];
    c.captured_at = st.captured_at_function();
    c.captured_at_index = st.captured_at;
    for (const Frame &f : st.frames) c.stack.push_back(f.text());
    s->capture_sites.push_back(std::move(c));
  }
  std::stable_sort(s->capture_sites.begin(), s->capture_sites.end(),
                   [](const CaptureSiteSummary &a, const CaptureSiteSummary &b) {
                     return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.records > b.records;
                   });
}

}  // namespace parcagpu::trace
