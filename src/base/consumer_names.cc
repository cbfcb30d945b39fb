#include "base/consumer_names.h"

#include <algorithm>
#include <cstring>

namespace parcagpu {

const char *FunctionNames::intern(const char *name) {
  if (!name) name = "";
  std::lock_guard<std::mutex> lock(mu_);
  auto it = names_.find(name);
  if (it != names_.end()) return it->second.get();
  const size_t len = std::strlen(name);
  const size_t kept = std::min(len, limit_);
  std::unique_ptr<char[]> copy(new char[std::max(kept + 1, readable_)]());
  if (len > limit_) {
    parcagpu_name_stand_in(name, limit_, copy.get());
    stand_ins_++;
  } else {
    std::memcpy(copy.get(), name, len);
  }
  const char *p = copy.get();
  names_.emplace(name, std::move(copy));
  return p;
}

const char *FunctionNames::fit(const char *name) {
  if (!name || strnlen(name, limit_ + 1) <= limit_) return name;
  return intern(name);
}

size_t FunctionNames::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return names_.size();
}

size_t FunctionNames::stand_ins() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stand_ins_;
}

}  // namespace parcagpu
