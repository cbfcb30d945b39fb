// Interned names and stacks, shared by the joiner, the GPU profile, capture sites and the
// outputs: a kernel name or a symbolized stack is stored once and referred to by a small id.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "symbolizer.h"

namespace parcagpu::trace {

// Kernel names as the records carry them (mangled), with their demangled forms.
class NameTable {
 public:
  uint32_t id(std::string_view name);
  const std::string &raw(uint32_t id) const { return names_[id].raw; }
  const std::string &demangled(uint32_t id) const;  // full signature
  const std::string &display(uint32_t id) const;    // short: no parameters ("k_add")
  size_t size() const { return names_.size(); }
  // Where a raw name is the library's stand-in for a longer one (include/parcagpu/abi.h):
  // `whole` gives the whole name when it is known (from a cubin), else null. Until it is known,
  // demangled() and display() show the stand-in.
  void set_whole_names(std::function<const std::string *(std::string_view)> whole) {
    whole_ = std::move(whole);
  }

 private:
  std::function<const std::string *(std::string_view)> whole_;
  struct Entry {
    std::string raw;
    mutable std::string demangled, display;  // filled on first use
  };
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<Entry> names_;
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> ids_;
};

// The mechanism between the user's launch and the probe, not the user's code: frames in the
// traced library (libparcagpu*, or any file given), in libcupti* and in libcuda.so*.
bool is_mechanism_frame(const Frame &f, const std::vector<std::string> &library_paths);

// Symbolized stacks (innermost first), interned. Three ids are pseudo stacks: kNone (taken
// without stacks, or the ring buffer had no room for one), kOverflow (more than `max_stacks`
// distinct stacks: counted in overflowed()) and kMechanismOnly (the frame-pointer walk ended
// inside libcupti / libcuda / the library: code built without frame pointers, see README).
class StackTable {
 public:
  static constexpr uint32_t kNone = 0;
  static constexpr uint32_t kOverflow = 1;
  static constexpr uint32_t kMechanismOnly = 2;
  static constexpr uint32_t kFirstReal = 3;
  explicit StackTable(size_t max_stacks = 1 << 16);
  uint32_t intern(std::vector<Frame> frames);
  const std::vector<Frame> &frames(uint32_t id) const { return stacks_[id]; }
  // What a table shows for a stack: its pseudo name for the two special ids.
  static const char *pseudo_name(uint32_t id);  // nullptr for real stacks
  static bool is_pseudo(uint32_t id) { return id < kFirstReal; }
  size_t size() const { return stacks_.size(); }
  uint64_t overflowed() const { return overflowed_; }

 private:
  size_t max_;
  std::vector<std::vector<Frame>> stacks_;
  std::unordered_map<std::string, uint32_t> ids_;  // joined frame texts -> id
  uint64_t overflowed_ = 0;
};

// Raw user stacks of a process -> stack ids: symbolized once per distinct (pid, addresses),
// mechanism frames dropped. The cache is bounded and forgets a process when it is gone.
class StackResolver {
 public:
  StackResolver(Symbolizer &sym, StackTable &table) : sym_(sym), table_(table) {}
  void set_library_paths(std::vector<std::string> paths) { libs_ = std::move(paths); }
  void add_library_path(const std::string &path) { libs_.push_back(path); }
  const std::vector<std::string> &library_paths() const { return libs_; }
  // Called before a stack not seen yet is symbolized (to bring the mappings up to date).
  std::function<void()> before_symbolize;
  // `extra_key`: more of what makes the stack (the Python frame chain); `edit` changes the
  // symbolized frames (mechanism frames dropped) before they are interned, on a cache miss.
  uint32_t resolve(uint32_t pid, const uint64_t *ips, size_t n, std::string_view extra_key = {},
                   const std::function<void(std::vector<Frame> *)> &edit = {});
  void forget(uint32_t pid);
  size_t cached() const { return cache_.size(); }
  // Distinct stacks cut short at a frame in no file's code ([heap], [stack], [anon], unmapped:
  // what a frame-pointer walk reads through code without frame pointers).
  uint64_t cut_at_non_code() const { return cut_at_non_code_; }

 private:
  static constexpr size_t kMaxCached = 1 << 16;
  Symbolizer &sym_;
  StackTable &table_;
  std::vector<std::string> libs_;
  std::unordered_map<std::string, uint32_t> cache_;  // pid + raw addresses -> id
  // The keys of cache_ by pid: forget() costs what that process had, not the whole cache, since
  // every process that exits on the machine is forgotten (issue 44).
  std::unordered_map<uint32_t, std::vector<const std::string *>> keys_by_pid_;
  uint64_t cut_at_non_code_ = 0;
};

}  // namespace parcagpu::trace
