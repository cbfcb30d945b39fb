// The fault lists of the mock libraries, MOCK_CUPTI_FAIL and MOCK_CUDA_FAIL, share a syntax:
//   NAME[:RESULT][*COUNT],...
// NAME an entry point, RESULT the error it returns (the library's default if absent), COUNT how
// many calls fail before it works again (default: every call). Header-only: each mock library
// carries its own copy.
#pragma once

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace mockfault {

// Comma-separated items, blanks around them trimmed, empty ones dropped.
inline std::vector<std::string> split(const char *list) {
  std::vector<std::string> items;
  std::string item;
  for (const char *p = list;; ++p) {
    if (*p == ',' || *p == '\0') {
      while (!item.empty() && std::isspace(static_cast<unsigned char>(item.back())))
        item.pop_back();
      size_t b = 0;
      while (b < item.size() && std::isspace(static_cast<unsigned char>(item[b]))) ++b;
      if (b < item.size()) items.push_back(item.substr(b));
      item.clear();
      if (*p == '\0') break;
    } else {
      item += *p;
    }
  }
  return items;
}

inline bool parse_uint(const std::string &text, unsigned long *value) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  char *end = nullptr;
  *value = std::strtoul(text.c_str(), &end, 10);
  return *end == '\0';
}

// A result by number, by its name ("CUDA_ERROR_NOT_READY") or by its name without `prefix`
// ("NOT_READY"), from `table`'s {value, name} rows.
template <typename Result, typename Table>
bool parse_named_result(const std::string &text, const Table &table, const char *prefix,
                        Result *result) {
  unsigned long n = 0;
  if (parse_uint(text, &n)) {
    *result = static_cast<Result>(n);
    return true;
  }
  const size_t prefix_len = std::strlen(prefix);
  for (const auto &r : table) {
    const char *short_name =
        std::strncmp(r.name, prefix, prefix_len) == 0 ? r.name + prefix_len : r.name;
    if (text == r.name || text == short_name) {
      *result = r.value;
      return true;
    }
  }
  return false;
}

struct Item {
  std::string name;
  std::string result;  // empty: the default error
  int64_t count = -1;  // calls that fail; -1: all of them
};

// One item; false with *error set if COUNT is not a positive number.
inline bool parse_item(const std::string &text, Item *item, std::string *error) {
  std::string rest = text;
  const size_t star = rest.find('*');
  if (star != std::string::npos) {
    unsigned long n = 0;
    if (!parse_uint(rest.substr(star + 1), &n) || n == 0) {
      *error = "'" + rest.substr(star + 1) + "' is not a positive call count";
      return false;
    }
    item->count = static_cast<int64_t>(n);
    rest.resize(star);
  }
  const size_t colon = rest.find(':');
  item->name = rest.substr(0, colon);
  item->result = colon == std::string::npos ? "" : rest.substr(colon + 1);
  return true;
}

// The injected failure of one entry point. Armed once before any call; thread-safe afterwards.
struct Fault {
  int32_t result = 0;                 // 0: none
  std::atomic<int64_t> left{-1};      // calls still to fail; -1: all

  void arm(int32_t r, int64_t count) {
    result = r;
    left.store(count, std::memory_order_relaxed);
  }
  // The error this call returns, or 0.
  int32_t take() {
    if (result == 0) return 0;
    int64_t n = left.load(std::memory_order_relaxed);
    for (;;) {
      if (n < 0) return result;
      if (n == 0) return 0;
      if (left.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) return result;
    }
  }
};

// A MOCK_*_FAIL list (`var`) armed: each ENTRY[:RESULT][*COUNT] in faults[i] for the entry point
// entry_names[i]; RESULT read by parse_result, `unknown` when left out. An entry that cannot be
// used is said through warn() and ignored.
template <typename Result, size_t N, typename ParseResult, typename Warn>
void arm_faults(const char *list, const char *var, const char *result_kind, Result unknown,
                Result success, const char *success_name, const char *const (&entry_names)[N],
                Fault *faults, ParseResult parse_result, Warn warn) {
  for (const std::string &item : split(list)) {
    const std::string entry = std::string(var) + " entry '" + item + "'";
    Item f;
    std::string why;
    if (!parse_item(item, &f, &why)) {
      warn(entry + ": " + why + "; entry ignored");
      continue;
    }
    Result result = unknown;
    if (!f.result.empty() && !parse_result(f.result, &result)) {
      warn(entry + ": '" + f.result + "' is not a " + result_kind + " or number; entry ignored");
      continue;
    }
    if (result == success) {
      warn(entry + " asks for " + success_name + ", which is no failure; entry ignored");
      continue;
    }
    size_t i = 0;
    while (i < N && f.name != entry_names[i]) ++i;
    if (i == N) {
      std::string known;
      for (const char *n : entry_names) known += (known.empty() ? "" : ", ") + std::string(n);
      warn(entry + ": no entry point named '" + f.name + "' (known: " + known +
           "); entry ignored");
      continue;
    }
    faults[i].arm(result, f.count);
  }
}

}  // namespace mockfault
