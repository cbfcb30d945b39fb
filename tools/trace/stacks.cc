#include "stacks.h"

#include "parcagpu/abi.h"

#include <cstring>

namespace parcagpu::trace {

uint32_t NameTable::id(std::string_view name) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(names_.size());
  names_.push_back(Entry{std::string(name), {}, {}});
  ids_.emplace(std::string(name), id);
  return id;
}

const std::string &NameTable::demangled(uint32_t id) const {
  const Entry &e = names_[id];
  if (!e.demangled.empty()) return e.demangled;
  // A stand-in whose whole name is not known yet is shown as it is, and asked for again later.
  const std::string *whole = whole_ ? whole_(e.raw) : nullptr;
  unsigned long long hash = 0;
  if (!whole && parcagpu_name_is_stand_in(e.raw.data(), e.raw.size(), &hash)) return e.raw;
  e.demangled = demangle(whole ? *whole : e.raw);
  return e.demangled;
}

const std::string &NameTable::display(uint32_t id) const {
  const Entry &e = names_[id];
  if (!e.display.empty()) return e.display;
  const std::string &d = demangled(id);
  if (&d == &e.raw && !e.raw.empty()) return e.raw;  // a stand-in, not known yet
  e.display = e.raw.empty() ? "(no name)" : short_function_name(d);
  return e.display;
}

namespace {
bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
}  // namespace

bool is_mechanism_frame(const Frame &f, const std::vector<std::string> &library_paths) {
  for (const std::string &lib : library_paths)
    if (!lib.empty() && f.path == lib) return true;
  return starts_with(f.module, "libparcagpu") || starts_with(f.module, "libcupti") ||
         starts_with(f.module, "libcuda.so");
}

StackTable::StackTable(size_t max_stacks)
    : max_(max_stacks < kFirstReal ? kFirstReal : max_stacks) {
  stacks_.resize(kFirstReal);  // the pseudo stacks have no frames
}

const char *StackTable::pseudo_name(uint32_t id) {
  if (id == kNone) return "[no stack]";
  if (id == kOverflow) return "[stack table full]";
  if (id == kMechanismOnly) return "[no user frames: walk ended in CUDA libraries]";
  return nullptr;
}

uint32_t StackTable::intern(std::vector<Frame> frames) {
  if (frames.empty()) return kNone;
  std::string key;
  for (const Frame &f : frames) {
    key += f.function;
    key += '|';
    key += f.module;
    key += '|';
    key += f.file;
    key += ':';
    // Without a line, the offset tells call sites apart.
    key += f.line > 0 ? std::to_string(f.line) : "+" + std::to_string(f.offset);
    key += f.inlined ? "|i\n" : "\n";
  }
  auto it = ids_.find(key);
  if (it != ids_.end()) return it->second;
  if (stacks_.size() >= max_) {
    ++overflowed_;
    return kOverflow;
  }
  const uint32_t id = static_cast<uint32_t>(stacks_.size());
  stacks_.push_back(std::move(frames));
  ids_.emplace(std::move(key), id);
  return id;
}

uint32_t StackResolver::resolve(uint32_t pid, const uint64_t *ips, size_t n, std::string_view extra_key,
                               const std::function<void(std::vector<Frame> *)> &edit) {
  if (n == 0) return StackTable::kNone;
  std::string key(sizeof pid + n * sizeof *ips, '\0');
  std::memcpy(key.data(), &pid, sizeof pid);
  std::memcpy(key.data() + sizeof pid, ips, n * sizeof *ips);
  key += extra_key;
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  if (before_symbolize) before_symbolize();
  std::vector<Frame> frames = sym_.symbolize_stack(pid, ips, n);
  // A frame in no file's code ends the stack: beyond it the walk read garbage. The vDSO is code.
  for (size_t i = 1; i < frames.size(); ++i) {
    if (frames[i].path.empty() && frames[i].module != "[vdso]") {
      frames.resize(i);
      ++cut_at_non_code_;
      break;
    }
  }
  std::vector<Frame> kept;
  kept.reserve(frames.size());
  for (Frame &f : frames)
    if (!is_mechanism_frame(f, libs_)) kept.push_back(std::move(f));
  if (edit && !kept.empty()) edit(&kept);
  const uint32_t id = kept.empty() && !frames.empty() ? StackTable::kMechanismOnly
                                                      : table_.intern(std::move(kept));
  if (cache_.size() >= kMaxCached) {
    cache_.clear();
    keys_by_pid_.clear();
  }
  // Keys of an unordered_map stay where they are until erased: the index points at them.
  if (const auto [at, fresh] = cache_.emplace(std::move(key), id); fresh) keys_by_pid_[pid].push_back(&at->first);
  return id;
}

void StackResolver::forget(uint32_t pid) {
  const auto it = keys_by_pid_.find(pid);
  if (it == keys_by_pid_.end()) return;
  for (const std::string *key : it->second) cache_.erase(std::string(*key));  // a copy: erase frees *key
  keys_by_pid_.erase(it);
}

}  // namespace parcagpu::trace
