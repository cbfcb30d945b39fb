#include "trackers/cubin_registry.h"

#include <dlfcn.h>

#include <cstring>

#include "base/clock.h"
#include "base/log.h"
#include "base/usdt.h"

namespace parcagpu {
namespace {

RepeatedError g_crc_error("pc_sampling", "cuptiGetCubinCrc failed");

// Whether [p, p + size) lies inside the image of a loaded ELF object (then it stays mapped as
// long as that object, which outlives its modules).
bool inside_loaded_object(const void *p, size_t size) {
  Dl_info first{}, last{};
  if (!dladdr(p, &first) || !first.dli_fname) return false;
  const void *end = static_cast<const char *>(p) + size - 1;
  return dladdr(end, &last) && last.dli_fbase == first.dli_fbase;
}

}  // namespace

bool CubinRegistry::crc_of(const void *cubin, size_t size, uint64_t *crc) {
  if (!cupti_.available(cupti_.cuptiGetCubinCrc)) return false;  // reported by load_cupti
  CUpti_GetCubinCrcParams p{};
  p.size = CUpti_GetCubinCrcParamsSize;
  p.cubinSize = size;
  p.cubin = cubin;
  const CUptiResult r = cupti_.cuptiGetCubinCrc(&p);
  if (r != CUPTI_SUCCESS) {
    g_crc_error.report(r, "cuptiGetCubinCrc failed: %s; that cubin is not published",
                       cupti_result_string(cupti_, r));
    return false;
  }
  *crc = p.cubinCrc;
  return true;
}

void CubinRegistry::on_module_loaded(const void *cubin, size_t size) {
  if (!cubin || size == 0) return;
  uint64_t crc = 0;
  const bool have_crc = crc_of(cubin, size, &crc);
  std::lock_guard<std::mutex> lock(mu_);
  stats_.loaded++;
  if (!have_crc) {
    stats_.no_crc++;
    return;
  }
  for (Entry &e : entries_) {
    if (e.crc != crc) continue;
    e.refs++;  // the same cubin in another context or module: published once
    return;
  }
  Entry e{crc, cubin, size, nullptr, nullptr, 1};
  if (inside_loaded_object(cubin, size)) {
    e.published = static_cast<const char *>(cubin);
  } else {
    e.copy.reset(new char[size]);
    std::memcpy(e.copy.get(), cubin, size);
    e.published = e.copy.get();
    stats_.copied++;
    stats_.copied_bytes += size;
  }
  loaded_.fire(crc, e.published, size);
  debug_log("cubin %#llx loaded: %zu bytes (%s)", static_cast<unsigned long long>(crc), size,
            e.copy ? "copied" : "in a loaded object");
  entries_.push_back(std::move(e));
  stats_.live = entries_.size();
}

void CubinRegistry::on_module_unload(const void *cubin, size_t size) {
  if (!cubin || size == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Entry *match = nullptr;
  for (Entry &e : entries_)
    if (e.source == cubin && e.size == size) match = &e;
  if (!match) {
    // Another module with the same bytes (its pointer differs): by CRC.
    uint64_t crc = 0;
    if (!crc_of(cubin, size, &crc)) return;
    for (Entry &e : entries_)
      if (e.crc == crc) match = &e;
  }
  if (!match) return;
  stats_.unloaded++;
  if (--match->refs > 0) return;
  const uint64_t crc = match->crc;
  usdt::cubin_unloaded(crc);
  const uint64_t now = monotonic_ns();
  if (match->copy) {
    stats_.copied_bytes -= match->size;
    retired_bytes_ += match->size;
    retired_.push_back({std::move(match->copy), match->size, now});
  }
  entries_.erase(entries_.begin() + (match - entries_.data()));
  free_retired(now);
  stats_.live = entries_.size();
  debug_log("cubin %#llx unloaded", static_cast<unsigned long long>(crc));
}

void CubinRegistry::free_retired(uint64_t now_ns) {
  size_t keep = 0;
  for (size_t i = 0; i < retired_.size(); ++i) {
    Retired &r = retired_[i];
    const bool expired = now_ns - r.since_ns > kRetiredGraceNs ||
                         (retired_bytes_ > kRetiredMaxBytes && i + 1 < retired_.size());
    if (expired) {
      retired_bytes_ -= r.size;
      continue;  // freed with the vector slot below
    }
    if (keep != i) retired_[keep] = std::move(r);
    ++keep;
  }
  retired_.resize(keep);
}

void CubinRegistry::refire() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Entry &e : entries_) loaded_.fire(e.crc, e.published, e.size);
}

CubinStats CubinRegistry::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace parcagpu
