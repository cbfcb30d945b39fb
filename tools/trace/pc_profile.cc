#include "pc_profile.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "parcagpu/abi.h"
#include "parcagpu/cbid_table.h"
#include "parcagpu/record_field.h"
#include "pc_events.h"
#include "symbolizer.h"

namespace parcagpu::trace {
namespace {

template <typename K>
std::vector<std::pair<K, uint64_t>> top(const std::map<K, uint64_t> &m, size_t n) {
  std::vector<std::pair<K, uint64_t>> v(m.begin(), m.end());
  std::stable_sort(v.begin(), v.end(),
                   [](const auto &a, const auto &b) { return a.second > b.second; });
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
  return static_cast<uint32_t>(crc32_z(0, data, size));
}

std::string PcProfile::short_reason(const std::string &name) {
  static const char kPrefix[] = "smsp__pcsamp_warps_issue_stalled_";
  if (name.compare(0, sizeof kPrefix - 1, kPrefix) == 0) return name.substr(sizeof kPrefix - 1);
  return name;
}

void PcProfile::on_correlation(uint32_t pid, uint32_t correlation_id, int32_t signed_cbid) {
  if (announced_.size() >= kAnnouncedGeneration) {
    announced_old_.swap(announced_);
    announced_.clear();
  }
  announced_[uint64_t{pid} << 32 | correlation_id] = signed_cbid;
}

const int32_t *PcProfile::announced(uint32_t pid, uint32_t corr) const {
  const uint64_t key = uint64_t{pid} << 32 | corr;
  for (const Announced *g : {&announced_, &announced_old_})
    if (auto it = g->find(key); it != g->end()) return &it->second;
  return nullptr;
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

void PcProfile::on_cubin(uint32_t pid, uint64_t crc, uint64_t size,
                         const std::vector<uint8_t> &bytes) {
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

std::string PcProfile::full_name(const PcSample &s, bool *cut) const {
  // The probe's copy ends at PV_FUNCTION_NAME_LEN - 1 bytes, as the production consumer's does.
  const bool maybe_cut = s.function.size() + 1 >= PV_FUNCTION_NAME_LEN;
  *cut = false;
  unsigned long long hash = 0;
  const bool stand_in = parcagpu_name_is_stand_in(s.function.data(), s.function.size(), &hash);
  if (const Cubin *c = cubin(s.pid, s.cubin_crc); c && c->read) {
    // The symbol at CUPTI's functionIndex, where it agrees with the copy: the same name, its cut,
    // or the library's stand-in for it (a name longer than the agent keeps, parcagpu/abi.h).
    const std::string *f = c->lines.function_at(s.function_index);
    if (f && (stand_in ? parcagpu_name_hash(f->c_str()) == hash
                       : f->compare(0, s.function.size(), s.function) == 0))
      return *f;
    if (stand_in && (f = c->lines.function_with_hash(hash))) return *f;
    if (maybe_cut && !stand_in && (f = c->lines.only_function_starting(s.function))) return *f;
  }
  *cut = maybe_cut;
  return s.function;
}

void PcProfile::on_sample(const PcSample &s) {
  bool cut = false;
  std::string name = full_name(s, &cut);
  if (name.size() > s.function.size()) names_completed_++;
  if (cut) names_left_cut_++;
  // A name left cut (its cubin not read) keeps its function's place in its cubin in the key:
  // two kernels are never one because their first bytes agree.
  std::string key = name;
  if (cut) key += '\0' + std::to_string(s.cubin_crc) + ':' + std::to_string(s.function_index);
  Kernel &k = kernels_[{s.pid, key}];
  k.pid = s.pid;
  if (name != s.function) k.received_name = s.function;
  k.function = std::move(name);
  k.name_cut = cut;
  k.cubin_crc = s.cubin_crc;
  k.function_index = s.function_index;
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
  if (s.correlation_id == 0) {
    k.by_launch["gpu_only"] += total;
    k.gpu_only += total;
  } else if (const int32_t *cbid = announced(s.pid, s.correlation_id)) {
    k.by_launch[std::to_string(*cbid)] += total;
    k.with_stack += total;
  } else {
    k.by_launch["unannounced"] += total;
    k.unannounced += total;
  }
}

const std::string *PcProfile::whole_name(std::string_view name) const {
  unsigned long long hash = 0;
  if (!parcagpu_name_is_stand_in(name.data(), name.size(), &hash)) return nullptr;
  for (const auto &[key, c] : cubins_)
    if (c->read)
      if (const std::string *f = c->lines.function_with_hash(hash)) return f;
  return nullptr;
}

void PcProfile::on_kernel(uint32_t pid, const char *name, size_t name_len, uint32_t device,
                          uint64_t gpu_ns) {
  (void)device;
  Ran &r = ran_[{pid, std::string(name, name_len)}];
  r.gpu_ns += gpu_ns;
  r.kernels++;
}

void PcProfile::on_library_error(uint32_t pid, const std::string &component,
                                 const std::string &message) {
  // A library before issue 44 said so in an error ("... PC samples of kernels CUPTI does not
  // attribute ..."); today's counts them without one.
  if (component == "pc_sampling" && message.find("CUPTI does not attribute") != std::string::npos)
    not_attributed_reports_[pid]++;
}

std::string PcProfile::kernel_function(uint32_t pid, const std::string &name,
                                       bool *in_cubin) const {
  unsigned long long hash = 0;
  const bool stand_in = parcagpu_name_is_stand_in(name.data(), name.size(), &hash);
  const bool maybe_cut = name.size() + 1 >= PT_NAME_LEN;
  *in_cubin = false;
  const std::string *only = nullptr;
  size_t candidates = 0;
  for (auto it = cubins_.lower_bound({pid, 0}); it != cubins_.end() && it->first.first == pid;
       ++it) {
    if (!it->second->read) continue;
    const CubinLines &l = it->second->lines;
    const std::string *f = stand_in ? l.function_with_hash(hash) : nullptr;
    if (!f && !stand_in && l.has_function(name)) f = &name;
    if (f) {
      *in_cubin = true;
      return *f;
    }
    if (maybe_cut && !stand_in)
      if (const std::string *p = l.only_function_starting(name)) only = p, candidates++;
  }
  if (only && candidates == 1) {
    *in_cubin = true;
    return *only;
  }
  return name;
}

const char *PcProfile::why_not_sampled(uint32_t pid, const std::string &function, uint64_t gpu_ns,
                                       bool in_cubin, std::string *why) const {
  bool any_cubin = false, cubin_read = false;
  for (auto it = cubins_.lower_bound({pid, 0}); it != cubins_.end() && it->first.first == pid;
       ++it) {
    any_cubin = true;
    cubin_read |= it->second->read;
  }
  auto config = configs_.lower_bound({pid, 0});
  const bool configured = config != configs_.end() && config->first.first == pid;
  if (!configured && !stall_names_.count(pid)) {
    *why = "PC sampling was never on in this process (no gpu_config, no stall-reason map)";
    return "no_pc_sampling";
  }
  if (!cubin_read) {
    *why = any_cubin ? "no cubin of the process could be read from its memory"
                     : "the library published no cubin of this process";
    return "no_cubin";
  }
  if (!in_cubin) {
    *why = "its code is in no cubin the library published: CUPTI does not attribute its samples";
    return "not_in_cubins";
  }
  if (auto it = not_attributed_reports_.find(pid); it != not_attributed_reports_.end()) {
    *why = "the library reported PC samples CUPTI does not attribute, which a kernel first run "
           "while PC sampling was off gets (docs/pc-sampling.md P19, P20)";
    return "not_attributed";
  }
  const Config &c = config->second;
  const double period_ns = configured && c.clock_khz ? (double)(1ull << c.factor) * 1e6 / c.clock_khz : 0;
  if (configured && gpu_ns < period_ns) {
    char b[160];
    std::snprintf(b, sizeof b,
                  "below the rate: %" PRIu64 " ns of GPU time, less than one sampling period "
                  "(%.0f ns)",
                  gpu_ns, period_ns);
    *why = b;
    return "below_rate";
  }
  (void)function;
  *why = "it ran only outside the sampling episodes, or CUPTI did not attribute its samples";
  return "not_in_episodes";
}

std::vector<PcProfile::NotSampled> PcProfile::not_sampled() const {
  // (pid, function) sampled, and the GPU time of each kernel that ran, by its whole name.
  std::set<std::pair<uint32_t, std::string>> sampled;
  for (const auto &[key, k] : kernels_) sampled.insert({k.pid, k.function});
  std::map<std::pair<uint32_t, std::string>, std::pair<Ran, bool>> ran;
  for (const auto &[key, r] : ran_) {
    bool in_cubin = false;
    auto &e = ran[{key.first, kernel_function(key.first, key.second, &in_cubin)}];
    e.first.gpu_ns += r.gpu_ns;
    e.first.kernels += r.kernels;
    e.second |= in_cubin;
  }
  std::vector<NotSampled> out;
  for (const auto &[key, e] : ran) {
    if (sampled.count(key)) continue;
    NotSampled n{key.first, key.second, e.first.gpu_ns, e.first.kernels, nullptr, {}};
    n.reason = why_not_sampled(key.first, key.second, e.first.gpu_ns, e.second, &n.why);
    out.push_back(std::move(n));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const NotSampled &a, const NotSampled &b) { return a.gpu_ns > b.gpu_ns; });
  return out;
}

void PcProfile::print_not_sampled(FILE *out, size_t n) const {
  const std::vector<NotSampled> v = not_sampled();
  if (v.empty()) return;
  uint64_t total = 0, missed = 0;
  for (const auto &[key, r] : ran_) total += r.gpu_ns;
  for (const NotSampled &k : v) missed += k.gpu_ns;
  std::fprintf(out,
               "\nKernels with GPU time and no PC samples: %zu, %s of the GPU time of kernels "
               "seen\n",
               v.size(), pct(missed, total).c_str());
  for (size_t i = 0; i < v.size() && i < n; ++i)
    std::fprintf(out, "  %s  (pid %u): %s of GPU time in %" PRIu64 " kernel%s: %s\n",
                 demangle(v[i].function).c_str(), v[i].pid, pct(v[i].gpu_ns, total).c_str(),
                 v[i].kernels, v[i].kernels == 1 ? "" : "s", v[i].why.c_str());
  if (v.size() > n) std::fprintf(out, "  ... %zu more in the JSON\n", v.size() - n);
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
  std::stable_sort(v.begin(), v.end(),
                   [](const Kernel *a, const Kernel *b) { return a->samples > b->samples; });
  return v;
}

std::map<std::string, uint64_t> PcProfile::by_launch(const Kernel &k) const {
  std::map<std::string, uint64_t> m;
  for (const auto &[what, n] : k.by_launch) m[what] = n;
  return m;
}

PcProfile::StackShare PcProfile::stack_share(const Kernel &k) const {
  StackShare s;
  s.with_stack = k.with_stack;
  s.gpu_only = k.gpu_only;
  s.unannounced = k.unannounced;
  for (const auto &kv : k.by_correlation) s.launches += kv.first != 0;
  return s;
}

PcProfile::StackShare PcProfile::stack_share() const {
  StackShare all;
  for (const auto &[key, k] : kernels_) {
    const StackShare s = stack_share(k);
    all.with_stack += s.with_stack;
    all.gpu_only += s.gpu_only;
    all.unannounced += s.unannounced;
    all.launches += s.launches;
  }
  return all;
}

void PcProfile::print(FILE *out, size_t nkernels, size_t npcs) const {
  const StackShare all = stack_share();
  std::fprintf(out,
               "\nPC samples: %" PRIu64 " samples in %" PRIu64 " records (%" PRIu64
               " PC/stall-reason pairs), %zu kernels; %" PRIu64 " with a CPU stack, %" PRIu64
               " GPU-only",
               samples_, records_, pairs_, kernels_.size(), all.with_stack, all.gpu_only);
  if (all.unannounced) std::fprintf(out, ", %" PRIu64 " unannounced", all.unannounced);
  std::fprintf(out, "\n");
  for (const auto &[key, c] : configs_) {
    const double ns = c.clock_khz ? (double)(1ull << c.factor) * 1e6 / c.clock_khz : 0;
    std::fprintf(
        out,
        "  pid %u device %u: sampling factor %u (every 2^%u cycles, %.0f ns at %u kHz), %u SMs\n",
        key.first, c.device, c.factor, c.factor, ns, c.clock_khz, c.sm_count);
  }
  if (records_ == 0) return print_not_sampled(out, nkernels);
  const auto v = ranked();
  for (size_t i = 0; i < v.size() && i < nkernels; ++i) {
    const Kernel &k = *v[i];
    const StackShare share = stack_share(k);
    std::fprintf(out,
                 "\n%3zu. %s%s  (pid %u)\n     %" PRIu64 " samples, %s of all: %" PRIu64
                 " with a CPU stack (%" PRIu64 " launch%s), %" PRIu64 " GPU-only",
                 i + 1, demangle(k.function).c_str(),
                 k.name_cut ? " [name cut: its cubin was not read]" : "", k.pid, k.samples,
                 pct(k.samples, samples_).c_str(), share.with_stack, share.launches,
                 share.launches == 1 ? "" : "es", share.gpu_only);
    if (share.unannounced) std::fprintf(out, ", %" PRIu64 " unannounced", share.unannounced);
    std::fprintf(out, "\n     by launch:");
    for (const auto &[what, n] : by_launch(k)) {
      const char *label = what == "gpu_only"      ? "GPU-only"
                          : what == "unannounced" ? "unannounced"
                                                  : launch_api_name(std::stoi(what));
      std::fprintf(out, " %s %s", label, pct(n, k.samples).c_str());
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
                   pct(n, k.samples).c_str(),
                   t.empty() ? "" : stall_name(k.pid, t[0].first).c_str(), where.c_str());
    }
  }
  print_not_sampled(out, nkernels);
}

void PcProfile::add_pprof(std::vector<PprofPcSample> *out) const {
  for (const auto &[key, k] : kernels_) {
    // The device and time scale: the process's one gpu_config (with several, neither is known:
    // a PC record does not say its device).
    const Config *config = nullptr;
    size_t configs = 0;
    for (auto it = configs_.lower_bound({k.pid, 0}); it != configs_.end() && it->first.first == k.pid;
         ++it, ++configs)
      config = &it->second;
    if (configs != 1) config = nullptr;
    const double ns = config && config->clock_khz
                          ? static_cast<double>(1ull << config->factor) * 1e6 / config->clock_khz
                          : 0;
    const Cubin *c = cubin(k.pid, k.cubin_crc);
    char module[40];
    std::snprintf(module, sizeof module, "cubin 0x%" PRIx64, k.cubin_crc);
    const std::string kernel = demangle(k.function);
    for (const auto &[pc, st] : k.pcs) {
      CubinLines::Line line;
      const bool have = c && c->read && c->lines.lookup(k.function, pc, &line);
      for (const auto &[index, n] : st.stalls) {
        PprofPcSample x;
        x.pid = k.pid;
        x.device = config ? static_cast<int64_t>(config->device) : -1;
        x.kernel = kernel;
        x.module = module;
        if (have) x.file = line.file, x.line = line.line;
        x.pc_offset = pc;
        x.stall = stall_name(k.pid, index);
        x.samples = n;
        x.gpu_ns = static_cast<uint64_t>(static_cast<double>(n) * ns + 0.5);
        out->push_back(std::move(x));
      }
    }
  }
}

// The counters of the whole run, in the JSON's order.
void PcProfile::add_totals_json(Json &j) const {
  j["records"] = records_;
  j["samples"] = samples_;
  j["pairs"] = pairs_;
  j["records_without_stall_samples"] = records_no_stalls_;
  // Records whose function name the probe's copy cut and the cubin gave whole, and those left cut.
  j["names_completed_from_cubin"] = names_completed_;
  j["names_left_cut"] = names_left_cut_;
  const StackShare all = stack_share();
  j["samples_with_stack"] = all.with_stack;
  j["samples_gpu_only"] = all.gpu_only;
  j["samples_unannounced"] = all.unannounced;
  j["stall_reason_maps"] = stall_maps_;
  j["gpu_config_firings"] = gpu_config_firings_;
  j["cubins_unloaded"] = cubins_unloaded_;
  j["bpf"] = {{"batches", bpf_.batches},
              {"records", bpf_.records},
              {"over_cap", bpf_.over_cap},
              {"read_errors", bpf_.read_errors},
              {"ringbuf_drops", bpf_.ringbuf_drops}};
}

// What each process said: its stall reasons' names, its devices' configurations, its cubins.
void PcProfile::add_process_tables_json(Json &j) const {
  Json named = Json::array();
  for (const auto &[pid, names] : stall_names_)
    for (size_t i = 0; i < names.size(); ++i)
      if (!names[i].empty()) named.push_back({{"pid", pid}, {"index", i}, {"name", names[i]}});
  j["stall_reasons_named"] = std::move(named);
  Json configs = Json::array();
  for (const auto &[key, c] : configs_)
    configs.push_back({{"pid", key.first},
                       {"device", c.device},
                       {"sampling_factor", c.factor},
                       {"clock_khz", c.clock_khz},
                       {"sm_count", c.sm_count}});
  j["gpu_configs"] = std::move(configs);
  Json cubins = Json::array();
  for (const auto &[key, c] : cubins_)
    cubins.push_back({{"pid", key.first},
                      {"crc", key.second},
                      {"size", c->size},
                      {"read", c->read},
                      {"bytes_crc32", c->bytes_crc32},
                      {"functions", c->lines.functions()},
                      {"has_lines", c->lines.has_lines()},
                      {"unloaded", c->unloaded}});
  j["cubins"] = std::move(cubins);
}

// A kernel's samples by how they tie to launches: stacks, launch kinds, correlation IDs, stalls.
void PcProfile::add_attribution_json(const Kernel &k, Json &jk) const {
  const StackShare share = stack_share(k);
  jk["samples_with_stack"] = share.with_stack;
  jk["samples_gpu_only"] = share.gpu_only;
  jk["samples_unannounced"] = share.unannounced;
  jk["launches"] = share.launches;
  Json launches = Json::object();
  for (const auto &[what, n] : by_launch(k)) launches[what] = n;
  jk["by_launch"] = std::move(launches);
  Json ids = Json::array();
  for (const auto &[corr, n] : k.by_correlation) {
    if (ids.size() == 64) break;
    if (corr != 0) ids.push_back(corr);  // 0 is no launch: the GPU-only samples
  }
  jk["correlation_ids"] = std::move(ids);
  Json stalls = Json::array();
  for (const auto &[index, n] : top(k.stalls, 8))
    stalls.push_back({{"index", index}, {"name", stall_name(k.pid, index)}, {"samples", n}});
  jk["stall_reasons"] = std::move(stalls);
}

// A kernel's hottest PCs and hottest source lines (where its cubin was read and has lines).
void PcProfile::add_hot_spots_json(const Kernel &k, size_t npcs, Json &jk) const {
  std::map<uint64_t, uint64_t> pcs;
  for (const auto &[pc, st] : k.pcs) pcs[pc] = st.samples;
  const Cubin *c = cubin(k.pid, k.cubin_crc);
  std::map<std::string, uint64_t> by_line;
  for (const auto &[pc, st] : k.pcs) {
    CubinLines::Line line;
    if (c && c->read && c->lines.lookup(k.function, pc, &line))
      by_line[line.file + ":" + std::to_string(line.line)] += st.samples;
  }
  Json hot = Json::array();
  for (const auto &[pc, n] : top(pcs, npcs)) {
    CubinLines::Line line;
    const bool have = c && c->read && c->lines.lookup(k.function, pc, &line);
    const auto t = top(k.pcs.at(pc).stalls, 1);
    Json h = {{"pc_offset", pc},
              {"samples", n},
              {"stall", t.empty() ? "" : stall_name(k.pid, t[0].first)}};
    if (have) {
      h["file"] = line.file;
      h["line"] = line.line;
    }
    hot.push_back(std::move(h));
  }
  jk["hot_pcs"] = std::move(hot);
  Json lines = Json::array();
  for (const auto &[where, n] : top(by_line, npcs))
    lines.push_back({{"where", where}, {"samples", n}});
  jk["source_lines"] = std::move(lines);
}

Json PcProfile::kernel_json(const Kernel &k, size_t npcs) const {
  Json jk;
  jk["pid"] = k.pid;
  jk["function"] = k.function;
  if (std::string d = demangle(k.function); d != k.function) jk["demangled"] = std::move(d);
  if (k.name_cut) jk["name_cut"] = true;
  if (!k.received_name.empty()) jk["received_name"] = k.received_name;
  jk["cubin_crc"] = k.cubin_crc;
  jk["function_index"] = k.function_index;
  jk["samples"] = k.samples;
  jk["records"] = k.records;
  jk["pairs"] = k.pairs;
  add_attribution_json(k, jk);
  add_hot_spots_json(k, npcs, jk);
  return jk;
}

Json PcProfile::json(size_t nkernels, size_t npcs) const {
  Json j;
  add_totals_json(j);
  add_process_tables_json(j);
  Json kernels = Json::array();
  const auto v = ranked();
  for (size_t i = 0; i < v.size() && i < nkernels; ++i) kernels.push_back(kernel_json(*v[i], npcs));
  j["kernels"] = std::move(kernels);
  Json missed = Json::array();
  for (const NotSampled &n : not_sampled()) {
    Json m = {{"pid", n.pid}, {"function", n.function}, {"gpu_ns", n.gpu_ns},
              {"kernels", n.kernels}, {"reason", n.reason}, {"why", n.why}};
    if (std::string d = demangle(n.function); d != n.function) m["demangled"] = std::move(d);
    if (missed.size() < nkernels) missed.push_back(std::move(m));
  }
  j["kernels_with_gpu_time"] = ran_.size();
  j["kernels_not_sampled"] = std::move(missed);
  return j;
}

// ---- PcSampling ----

namespace {

// A cubin as the production consumer gets it: from the process's memory, at the address the
// library published, for as long as the module is loaded.
std::vector<uint8_t> read_process(uint32_t pid, uint64_t addr, uint64_t size) {
  std::vector<uint8_t> bytes;
  if (size == 0 || size > (uint64_t{1} << 30)) return bytes;
  const std::string path = "/proc/" + std::to_string(pid) + "/mem";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bytes;
  bytes.resize(size);
  size_t got = 0;
  while (got < size) {
    const ssize_t n = pread(fd, bytes.data() + got, size - got, static_cast<off_t>(addr + got));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (got != size) bytes.clear();
  return bytes;
}

}  // namespace

bool PcSampling::wants(uint32_t type) const {
  switch (type) {
    case PV_EV_PC_RECORD:
    case PV_EV_STALL_REASON_MAP:
    case PT_EV_CORRELATION:
    case PT_EV_CUBIN_LOADED:
    case PT_EV_CUBIN_UNLOADED:
    case PT_EV_GPU_CONFIG:
    case PT_EV_KERNEL:
    case PT_EV_ERROR:
      return true;
  }
  return false;
}

namespace {

// A PC record as the probe copied it: CUpti_PCSamplingPCData's fields at their offsets.
PcSample pc_sample(uint32_t pid, const pv_pc_record_event &e) {
  PcSample s;
  s.pid = pid;
  s.cubin_crc = record_field<uint64_t>(e.record, 8);
  s.pc_offset = record_field<uint64_t>(e.record, 16);
  s.function_index = record_field<uint32_t>(e.record, 24);
  s.correlation_id = record_field<uint32_t>(e.record, 56);
  s.function.assign(e.function_name, strnlen(e.function_name, sizeof e.function_name));
  uint64_t count = record_field<uint64_t>(e.record, 40);
  if (count > PARCAGPU_STALL_REASON_MAX) count = PARCAGPU_STALL_REASON_MAX;
  for (uint64_t i = 0; i < count; ++i) s.stalls.push_back({e.stall[2 * i], e.stall[2 * i + 1]});
  return s;
}

}  // namespace

// A loaded cubin, read from the process's memory while it is loaded.
void PcSampling::on_cubin_loaded(uint32_t pid, const pt_meta_event &e) {
  const auto bytes = read_process(pid, e.ptr, e.size);
  if (verbose_)
    std::fprintf(stderr, "[%u] pc sampling: cubin crc=0x%" PRIx64 " size=%" PRIu64 " read=%s\n",
                 pid, static_cast<uint64_t>(e.crc), static_cast<uint64_t>(e.size),
                 bytes.empty() ? "no" : "yes");
  profile_.on_cubin(pid, e.crc, e.size, bytes);
}

void PcSampling::on_event(const pt_header &h, const void *data, size_t size) {
  switch (h.type) {
    case PV_EV_PC_RECORD:
      if (size < sizeof(pv_pc_record_event)) break;
      profile_.on_sample(pc_sample(h.pid, *static_cast<const pv_pc_record_event *>(data)));
      return;
    case PV_EV_STALL_REASON_MAP:
      if (size < sizeof(pv_stall_map_event)) break;
      profile_.on_stall_map(h.pid, static_cast<const pv_stall_map_event *>(data)->names,
                            sizeof(pv_stall_map_event::names));
      return;
    case PT_EV_CUBIN_LOADED:
    case PT_EV_CUBIN_UNLOADED: {
      if (size < sizeof(pt_meta_event)) break;
      const auto *e = static_cast<const pt_meta_event *>(data);
      if (h.type == PT_EV_CUBIN_UNLOADED)
        profile_.on_cubin_unloaded(h.pid, e->crc);
      else
        on_cubin_loaded(h.pid, *e);
      return;
    }
    case PT_EV_GPU_CONFIG: {
      if (size < sizeof(pt_gpu_config_event)) break;
      const auto *e = static_cast<const pt_gpu_config_event *>(data);
      profile_.on_gpu_config(h.pid, e->device_id, e->sampling_factor, e->clock_khz, e->sm_count);
      return;
    }
    case PT_EV_KERNEL: {
      if (size < sizeof(pt_kernel_event)) break;
      const auto *e = static_cast<const pt_kernel_event *>(data);
      profile_.on_kernel(h.pid, e->name, strnlen(e->name, sizeof e->name), e->device_id,
                         e->end > e->start ? e->end - e->start : 0);
      return;
    }
    case PT_EV_ERROR: {
      if (size < sizeof(pt_error_event)) break;
      const auto *e = static_cast<const pt_error_event *>(data);
      profile_.on_library_error(h.pid,
                                std::string(e->component, strnlen(e->component, sizeof e->component)),
                                std::string(e->message, strnlen(e->message, sizeof e->message)));
      return;
    }
    case PT_EV_CORRELATION: {
      if (size < sizeof(pt_correlation_event)) break;
      const auto *e = static_cast<const pt_correlation_event *>(data);
      profile_.on_correlation(h.pid, e->correlation_id, e->signed_cbid);
      return;
    }
  }
  ++malformed_;
}

const std::string *PcSampling::whole_name(std::string_view name) const {
  return profile_.whole_name(name);
}

void PcSampling::add_json(Json &summary) const {
  Json pc = profile_.json();
  pc["malformed_events"] = malformed_;
  summary["pc"] = std::move(pc);
}

void PcSampling::print(FILE *out) const {
  profile_.print(out);
  if (malformed_) std::fprintf(out, "  %" PRIu64 " malformed PC events\n", malformed_);
}

}  // namespace parcagpu::trace
