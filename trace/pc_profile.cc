#include "pc_profile.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "parcagpu/abi.h"
#include "parcagpu/cbid_table.h"

namespace parcagpu::trace {
namespace {

std::string quote(const std::string &s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

template <typename K>
std::vector<std::pair<K, uint64_t>> top(const std::map<K, uint64_t> &m, size_t n) {
  std::vector<std::pair<K, uint64_t>> v(m.begin(), m.end());
  std::stable_sort(v.begin(), v.end(), [](const auto &a, const auto &b) { return a.second > b.second; });
  if (v.size() > n) v.resize(n);
  return v;
}

std::string pct(uint64_t part, uint64_t whole) {
  char b[16];
  std::snprintf(b, sizeof b, "%.1f%%", whole ? 100.0 * part / whole : 0.0);
  return b;
}

}  // namespace

uint32_t PcProfile::crc32(const uint8_t *data, size_t size) {
  static uint32_t table[256];
  static bool init = [] {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    return true;
  }();
  (void)init;
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) c = table[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::string PcProfile::short_reason(const std::string &name) {
  static const char kPrefix[] = "smsp__pcsamp_warps_issue_stalled_";
  if (name.compare(0, sizeof kPrefix - 1, kPrefix) == 0) return name.substr(sizeof kPrefix - 1);
  return name;
}

void PcProfile::on_correlation(uint32_t pid, uint32_t correlation_id, int32_t signed_cbid) {
  announced_[{pid, correlation_id}] = signed_cbid;
}

void PcProfile::on_stall_map(uint32_t pid, const char *names, size_t size) {
  stall_maps_++;
  std::vector<std::string> v(PARCAGPU_STALL_REASON_MAX);
  for (size_t i = 0; i < PARCAGPU_STALL_REASON_MAX; ++i) {
    const size_t off = i * PARCAGPU_STALL_REASON_NAME_LEN;
    if (off + PARCAGPU_STALL_REASON_NAME_LEN > size) break;
    v[i].assign(names + off, strnlen(names + off, PARCAGPU_STALL_REASON_NAME_LEN));
  }
  stall_names_[pid] = std::move(v);
}

void PcProfile::on_cubin(uint32_t pid, uint64_t crc, uint64_t size, const std::vector<uint8_t> &bytes) {
  auto &c = cubins_[{pid, crc}];
  if (c && c->read) return;  // fired again for another consumer: the first read stands
  c = std::make_unique<Cubin>();
  c->size = size;
  c->read = !bytes.empty() && bytes.size() == size;
  if (c->read) {
    c->bytes_crc32 = crc32(bytes.data(), bytes.size());
    std::string error;
    c->lines.load(bytes.data(), bytes.size(), &error);
  }
}

void PcProfile::on_cubin_unloaded(uint32_t pid, uint64_t crc) {
  cubins_unloaded_++;
  auto it = cubins_.find({pid, crc});
  if (it != cubins_.end()) it->second->unloaded = true;
}

void PcProfile::on_gpu_config(uint32_t pid, uint32_t device, uint32_t factor, uint32_t clock_khz,
                              uint32_t sm_count) {
  gpu_config_firings_++;
  configs_.emplace(std::make_pair(pid, device), Config{device, factor, clock_khz, sm_count});
}

void PcProfile::on_sample(const PcSample &s) {
  Kernel &k = kernels_[{s.pid, s.function}];
  k.pid = s.pid;
  k.function = s.function;
  k.cubin_crc = s.cubin_crc;
  k.records++;
  records_++;
  uint64_t total = 0;
  for (const auto &[index, n] : s.stalls) {
    if (n == 0) continue;
    total += n;
    k.pairs++;
    pairs_++;
    k.stalls[index] += n;
    k.pcs[s.pc_offset].stalls[index] += n;
  }
  if (total == 0) records_no_stalls_++;
  k.samples += total;
  samples_ += total;
  k.pcs[s.pc_offset].samples += total;
  k.by_correlation[s.correlation_id] += total;
}

std::string PcProfile::stall_name(uint32_t pid, uint32_t index) const {
  auto it = stall_names_.find(pid);
  if (it != stall_names_.end() && index < it->second.size() && !it->second[index].empty())
    return short_reason(it->second[index]);
  return "#" + std::to_string(index);
}

const PcProfile::Cubin *PcProfile::cubin(uint32_t pid, uint64_t crc) const {
  auto it = cubins_.find({pid, crc});
  return it == cubins_.end() ? nullptr : it->second.get();
}

std::vector<const PcProfile::Kernel *> PcProfile::ranked() const {
  std::vector<const Kernel *> v;
  for (const auto &kv : kernels_) v.push_back(&kv.second);
  std::stable_sort(v.begin(), v.end(), [](const Kernel *a, const Kernel *b) { return a->samples > b->samples; });
  return v;
}

std::map<std::string, uint64_t> PcProfile::by_launch(const Kernel &k) const {
  std::map<std::string, uint64_t> m;
  for (const auto &[corr, n] : k.by_correlation) {
    if (corr == 0) {
      m["uncorrelated"] += n;
      continue;
    }
    auto it = announced_.find({k.pid, corr});
    m[it == announced_.end() ? std::string("unannounced") : std::to_string(it->second)] += n;
  }
  return m;
}

void PcProfile::print(FILE *out, size_t nkernels, size_t npcs) const {
  std::fprintf(out, "\nPC samples: %" PRIu64 " samples in %" PRIu64 " records (%" PRIu64
                    " PC/stall-reason pairs), %zu kernels\n",
               samples_, records_, pairs_, kernels_.size());
  for (const auto &[key, c] : configs_) {
    const double ns = c.clock_khz ? (double)(1ull << c.factor) * 1e6 / c.clock_khz : 0;
    std::fprintf(out, "  pid %u device %u: sampling factor %u (every 2^%u cycles, %.0f ns at %u kHz), %u SMs\n",
                 key.first, c.device, c.factor, c.factor, ns, c.clock_khz, c.sm_count);
  }
  if (records_ == 0) return;
  const auto v = ranked();
  for (size_t i = 0; i < v.size() && i < nkernels; ++i) {
    const Kernel &k = *v[i];
    std::fprintf(out, "\n%3zu. %s  (pid %u)\n     %" PRIu64 " samples, %s of all; %zu launches;",
                 i + 1, k.function.c_str(), k.pid, k.samples, pct(k.samples, samples_).c_str(),
                 k.by_correlation.size());
    for (const auto &[what, n] : by_launch(k)) {
      const bool api = what != "unannounced" && what != "uncorrelated";
      std::fprintf(out, " %s %s", api ? launch_api_name(std::stoi(what)) : what.c_str(),
                   pct(n, k.samples).c_str());
    }
    std::fprintf(out, "\n     stalls:");
    for (const auto &[index, n] : top(k.stalls, 4))
      std::fprintf(out, " %s %s", stall_name(k.pid, index).c_str(), pct(n, k.samples).c_str());
    std::fprintf(out, "\n");
    std::map<uint64_t, uint64_t> pcs;
    for (const auto &[pc, st] : k.pcs) pcs[pc] = st.samples;
    const Cubin *c = cubin(k.pid, k.cubin_crc);
    for (const auto &[pc, n] : top(pcs, npcs)) {
      CubinLines::Line line;
      std::string where = "(no line information)";
      if (!c || !c->read)
        where = "(cubin not received)";
      else if (c->lines.lookup(k.function, pc, &line))
        where = line.file + ":" + std::to_string(line.line);
      const auto &st = k.pcs.at(pc).stalls;
      const auto t = top(st, 1);
      std::fprintf(out, "       +0x%04" PRIx64 " %6" PRIu64 " %6s  %-20s %s\n", pc, n,
                   pct(n, k.samples).c_str(), t.empty() ? "" : stall_name(k.pid, t[0].first).c_str(),
                   where.c_str());
    }
  }
}

std::string PcProfile::json(size_t nkernels, size_t npcs) const {
  std::string j = "{";
  char b[512];
  std::snprintf(b, sizeof b,
                "\"records\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"pairs\":%" PRIu64
                ",\"records_without_stall_samples\":%" PRIu64 ",\"stall_reason_maps\":%" PRIu64
                ",\"gpu_config_firings\":%" PRIu64 ",\"cubins_unloaded\":%" PRIu64,
                records_, samples_, pairs_, records_no_stalls_, stall_maps_, gpu_config_firings_,
                cubins_unloaded_);
  j += b;
  std::snprintf(b, sizeof b,
                ",\"bpf\":{\"batches\":%" PRIu64 ",\"records\":%" PRIu64 ",\"over_cap\":%" PRIu64
                ",\"read_errors\":%" PRIu64 ",\"ringbuf_drops\":%" PRIu64 "}",
                bpf_.batches, bpf_.records, bpf_.over_cap, bpf_.read_errors, bpf_.ringbuf_drops);
  j += b;
  j += ",\"stall_reasons_named\":[";
  bool first = true;
  for (const auto &[pid, names] : stall_names_)
    for (size_t i = 0; i < names.size(); ++i)
      if (!names[i].empty()) {
        std::snprintf(b, sizeof b, "%s{\"pid\":%u,\"index\":%zu,\"name\":%s}", first ? "" : ",",
                      pid, i, quote(names[i]).c_str());
        j += b;
        first = false;
      }
  j += "],\"gpu_configs\":[";
  first = true;
  for (const auto &[key, c] : configs_) {
    std::snprintf(b, sizeof b,
                  "%s{\"pid\":%u,\"device\":%u,\"sampling_factor\":%u,\"clock_khz\":%u,"
                  "\"sm_count\":%u}",
                  first ? "" : ",", key.first, c.device, c.factor, c.clock_khz, c.sm_count);
    j += b;
    first = false;
  }
  j += "],\"cubins\":[";
  first = true;
  for (const auto &[key, c] : cubins_) {
    std::snprintf(b, sizeof b,
                  "%s{\"pid\":%u,\"crc\":%" PRIu64 ",\"size\":%" PRIu64
                  ",\"read\":%s,\"bytes_crc32\":%u,\"functions\":%zu,\"has_lines\":%s,"
                  "\"unloaded\":%s}",
                  first ? "" : ",", key.first, key.second, c->size, c->read ? "true" : "false",
                  c->bytes_crc32, c->lines.functions(), c->lines.has_lines() ? "true" : "false",
                  c->unloaded ? "true" : "false");
    j += b;
    first = false;
  }
  j += "],\"kernels\":[";
  const auto v = ranked();
  for (size_t i = 0; i < v.size() && i < nkernels; ++i) {
    const Kernel &k = *v[i];
    std::snprintf(b, sizeof b,
                  "%s{\"pid\":%u,\"function\":%s,\"cubin_crc\":%" PRIu64 ",\"samples\":%" PRIu64
                  ",\"records\":%" PRIu64 ",\"pairs\":%" PRIu64 ",\"launches\":%zu",
                  i ? "," : "", k.pid, quote(k.function).c_str(), k.cubin_crc, k.samples, k.records,
                  k.pairs, k.by_correlation.size());
    j += b;
    j += ",\"by_launch\":{";
    bool f2 = true;
    for (const auto &[what, n] : by_launch(k)) {
      std::snprintf(b, sizeof b, "%s%s:%" PRIu64, f2 ? "" : ",", quote(what).c_str(), n);
      j += b;
      f2 = false;
    }
    j += "},\"correlation_ids\":[";
    f2 = true;
    size_t shown = 0;
    for (const auto &[corr, n] : k.by_correlation) {
      if (shown++ == 64) break;
      std::snprintf(b, sizeof b, "%s%u", f2 ? "" : ",", corr);
      j += b;
      f2 = false;
    }
    j += "],\"stall_reasons\":[";
    f2 = true;
    for (const auto &[index, n] : top(k.stalls, 8)) {
      std::snprintf(b, sizeof b, "%s{\"index\":%u,\"name\":%s,\"samples\":%" PRIu64 "}", f2 ? "" : ",",
                    index, quote(stall_name(k.pid, index)).c_str(), n);
      j += b;
      f2 = false;
    }
    j += "],\"hot_pcs\":[";
    std::map<uint64_t, uint64_t> pcs;
    for (const auto &[pc, st] : k.pcs) pcs[pc] = st.samples;
    const Cubin *c = cubin(k.pid, k.cubin_crc);
    f2 = true;
    std::map<std::string, uint64_t> by_line;
    for (const auto &[pc, st] : k.pcs) {
      CubinLines::Line line;
      if (c && c->read && c->lines.lookup(k.function, pc, &line))
        by_line[line.file + ":" + std::to_string(line.line)] += st.samples;
    }
    for (const auto &[pc, n] : top(pcs, npcs)) {
      CubinLines::Line line;
      const bool have = c && c->read && c->lines.lookup(k.function, pc, &line);
      const auto t = top(k.pcs.at(pc).stalls, 1);
      std::snprintf(b, sizeof b, "%s{\"pc_offset\":%" PRIu64 ",\"samples\":%" PRIu64 ",\"stall\":%s",
                    f2 ? "" : ",", pc, n,
                    quote(t.empty() ? "" : stall_name(k.pid, t[0].first)).c_str());
      j += b;
      if (have) j += ",\"file\":" + quote(line.file) + ",\"line\":" + std::to_string(line.line);
      j += "}";
      f2 = false;
    }
    j += "],\"source_lines\":[";
    f2 = true;
    for (const auto &[where, n] : top(by_line, npcs)) {
      std::snprintf(b, sizeof b, "%s{\"where\":%s,\"samples\":%" PRIu64 "}", f2 ? "" : ",",
                    quote(where).c_str(), n);
      j += b;
      f2 = false;
    }
    j += "]}";
  }
  j += "]}";
  return j;
}

}  // namespace parcagpu::trace
