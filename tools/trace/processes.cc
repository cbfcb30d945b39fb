#include "processes.h"

#include <charconv>
#include <fstream>
#include <iterator>

namespace parcagpu::trace {
namespace {

std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

std::optional<int64_t> environ_integer(std::string_view env, std::string_view name) {
  while (!env.empty()) {
    const size_t end = env.find('\0');
    const std::string_view var = env.substr(0, end);
    if (var.size() > name.size() && var.substr(0, name.size()) == name && var[name.size()] == '=') {
      const std::string_view v = var.substr(name.size() + 1);
      int64_t n = 0;
      const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec == std::errc() && p == v.data() + v.size()) return n;
      return std::nullopt;
    }
    if (end == std::string_view::npos) break;
    env.remove_prefix(end + 1);
  }
  return std::nullopt;
}

ProcessInfo read_process_info(uint32_t pid) {
  ProcessInfo p;
  p.pid = pid;
  const std::string dir = "/proc/" + std::to_string(pid);
  p.comm = read_file(dir + "/comm");
  if (!p.comm.empty() && p.comm.back() == '\n') p.comm.pop_back();
  const std::string env = read_file(dir + "/environ");  // "" when unreadable: no rank
  p.rank = environ_integer(env, "RANK");
  p.local_rank = environ_integer(env, "LOCAL_RANK");
  return p;
}

uint32_t ProcessTable::id(uint32_t pid) {
  auto [it, fresh] = current_.try_emplace(pid, static_cast<uint32_t>(infos_.size()));
  if (fresh) {
    infos_.push_back(read(pid));
    infos_.back().pid = pid;
  }
  return it->second;
}

}  // namespace parcagpu::trace
