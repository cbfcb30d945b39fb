#include "agent_summary.h"

#include <libelf.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "agent_notes.h"
#include "parcagpu/cbid_table.h"

namespace parcagpu::agent {
namespace {

template <typename T>
T field(const uint8_t *p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

std::string cstr(const char *s, size_t cap) { return std::string(s, strnlen(s, cap)); }

using Json = nlohmann::ordered_json;  // keys in the order written

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%016" PRIx64, v);
  return b;
}

const char *const kReadFailureNames[] = {
    "arg",       "record_ptrs",      "record",           "kernel_name",      "pc_ptrs",
    "pc_record", "pc_function_name", "pc_stall_reasons", "stall_reason_map", "error_string"};
static_assert(sizeof(kReadFailureNames) / sizeof(kReadFailureNames[0]) ==
              AC_STAT_READ_FAIL_LAST - AC_STAT_READ_FAIL_ARG + 1);

// What the agent would have lost of each probe's data, and why (records for the batch probes,
// events for the others): its ring full, a batch over its cap, a failed read.
Json losses_json(const uint64_t *st) {
  auto full = [&](ac_probe p) { return st[static_cast<int>(AC_STAT_RING_FULL) + p]; };
  auto entry = [](uint64_t ring_full, uint64_t over_cap, uint64_t read_failed) {
    return Json{{"ring_full", ring_full}, {"over_cap", over_cap}, {"read_failed", read_failed}};
  };
  return {{"activity_batch",
           entry(full(AC_PROBE_ACTIVITY_BATCH), st[AC_STAT_BATCH_OVER_CAP],
                 st[AC_STAT_BATCH_ABANDONED] + st[AC_STAT_READ_FAIL_RECORD])},
          {"kernel_executed", entry(full(AC_PROBE_KERNEL_EXECUTED), 0, 0)},
          {"pc_sample_batch", entry(st[AC_STAT_PC_RING_FULL], st[AC_STAT_PC_OVER_CAP],
                                    st[AC_STAT_PC_ABANDONED] - st[AC_STAT_PC_RING_FULL])},
          {"cubin_loaded", entry(full(AC_PROBE_CUBIN_LOADED), 0, 0)},
          {"stall_reason_map",
           entry(full(AC_PROBE_STALL_REASON_MAP), 0, st[AC_STAT_READ_FAIL_STALL_MAP])},
          {"error", entry(full(AC_PROBE_ERROR), 0, 0)},
          {"gpu_config", entry(full(AC_PROBE_GPU_CONFIG), 0, 0)}};
}

uint64_t ring_full_total(const uint64_t *st) {
  uint64_t n = 0;
  for (int p = 0; p < AC_PROBE_MAX; p++) n += st[static_cast<int>(AC_STAT_RING_FULL) + p];
  return n;
}

Json config_json(const ProcessView::GpuConfig &c) {
  return {{"device", c.device_id},
          {"sampling_factor", c.sampling_factor},
          {"clock_khz", c.clock_khz},
          {"sm_count", c.sm_count}};
}

// How the agent would match the process's kernel records to its announced launches.
struct LaunchMatching {
  uint64_t matched = 0, graph_matched = 0, graph_launches_with_kernels = 0;
  uint64_t orphan_eager = 0, orphan_graph = 0, eager_unmatched = 0;
};

LaunchMatching match_launches(const ProcessView &v) {
  LaunchMatching m;
  for (const auto &[corr, cbid] : v.announced) {
    auto it = v.kernels_by_correlation.find(corr);
    const uint64_t k = it == v.kernels_by_correlation.end() ? 0 : it->second;
    if (is_graph_launch(cbid)) {
      m.matched += k;
      m.graph_matched += k;
      m.graph_launches_with_kernels += k > 0;
      m.orphan_graph += k == 0;
    } else {
      // The agent matches an eager launch's first kernel and forgets the launch
      // (interpreter/gpu/cuda.go, addTime): a second kernel of its ID is an orphan.
      m.matched += k > 0;
      m.eager_unmatched += k > 1 ? k - 1 : 0;
      m.orphan_eager += k == 0;
    }
  }
  return m;
}

Json pc_samples_json(const ProcessView &v) {
  const uint64_t *st = v.stats;
  Json by_reason = Json::object();
  for (const auto &[index, n] : v.pc_samples_by_stall_index) {
    const bool named = index < v.stall_names.size() && !v.stall_names[index].empty();
    by_reason[named ? v.stall_names[index] : "#" + std::to_string(index)] = n;
  }
  Json by_crc = Json::object();
  uint64_t without_cubin = 0;
  for (const auto &[crc, n] : v.pc_records_by_crc) {
    by_crc[hex(crc)] = n;
    if (!v.cubins.count(crc)) without_cubin += n;
  }
  uint64_t corr_announced = 0, corr_unannounced = 0;
  for (uint32_t c : v.pc_correlation_ids)
    (v.announced.count(c) ? corr_announced : corr_unannounced)++;
  return {{"records", v.pc_records},
          {"records_fired", st[AC_STAT_PC_RECORDS]},
          {"over_cap", st[AC_STAT_PC_OVER_CAP]},
          {"abandoned", st[AC_STAT_PC_ABANDONED]},
          {"stall_samples", v.pc_stall_samples},
          {"by_stall_reason", by_reason},
          {"correlation_ids",
           {{"announced", corr_announced},
            {"unannounced", corr_unannounced},
            {"zero", v.pc_correlation_zero}}},
          {"records_by_crc", by_crc},
          {"records_without_cubin", without_cubin},
          {"function_names", v.pc_function_names.size()},
          {"function_names_cut", v.pc_function_names_cut}};
}

// The process's launches, kernel records and activity batches: what matched and what could not.
Json launches_json(const ProcessView &v) {
  const uint64_t *st = v.stats;
  const LaunchMatching m = match_launches(v);
  Json by_cbid = Json::object();
  for (const auto &[cbid, n] : v.correlations_by_cbid) by_cbid[std::to_string(cbid)] = n;
  Json failures = Json::object();
  for (uint32_t s = AC_STAT_READ_FAIL_ARG; s <= AC_STAT_READ_FAIL_LAST; s++)
    failures[kReadFailureNames[s - AC_STAT_READ_FAIL_ARG]] = st[s];
  Json firings = Json::object();
  for (int p = 0; p < AC_PROBE_MAX; p++)
    firings[probe_name(static_cast<ac_probe>(p))] = st[static_cast<int>(AC_STAT_FIRINGS) + p];
  Json impossible = Json::object();
  for (size_t r = 1; r < v.impossible.size(); ++r)
    impossible[trace::impossible_name(static_cast<trace::Impossible>(r))] = v.impossible[r];
  return {{"correlations", v.correlations},
          {"correlation_repeats", v.correlation_repeats},
          {"correlations_by_cbid", by_cbid},
          {"kernel_records", v.kernel_records},
          {"invalid_timestamps", v.invalid_timestamps},
          {"matched", m.matched},
          {"orphan_kernels", v.kernel_records - m.matched},
          {"orphan_correlations_eager", m.orphan_eager},
          {"orphan_correlations_graph", m.orphan_graph},
          {"graph_kernels_matched", m.graph_matched},
          {"graph_launches_with_kernels", m.graph_launches_with_kernels},
          {"eager_kernels_unmatched", m.eager_unmatched},
          {"impossible_kernel_records", v.impossible_total()},
          {"impossible_by_reason", impossible},
          {"read_failures", v.read_failures()},
          {"read_failures_by_kind", failures},
          {"firings", firings},
          {"batches", st[static_cast<int>(AC_STAT_FIRINGS) + AC_PROBE_ACTIVITY_BATCH]},
          {"batch_records", st[AC_STAT_BATCH_RECORDS]},
          {"batch_over_cap", st[AC_STAT_BATCH_OVER_CAP]},
          {"batch_abandoned", st[AC_STAT_BATCH_ABANDONED]},
          {"batch_other_kinds", st[AC_STAT_BATCH_OTHER_KIND]}};
}

// The process's metadata (GPU configurations, stall reasons, cubins), PC samples, errors, losses.
Json metadata_json(const ProcessView &v) {
  const uint64_t *st = v.stats;
  Json configs = Json::array();
  for (const auto &c : v.gpu_configs) configs.push_back(config_json(c));
  Json cubins = Json::array();
  for (const auto &[crc, c] : v.cubins)
    cubins.push_back(
        {{"crc", hex(crc)}, {"size", c.size}, {"readable", c.readable}, {"elf", c.elf}});
  Json errors = Json::array();
  for (const auto &e : v.errors)
    errors.push_back({{"code", e.code}, {"component", e.component}, {"message", e.message}});
  return {{"gpu_configs", configs},
          {"gpu_config", v.gpu_configs.empty() ? Json() : config_json(v.gpu_configs.back())},
          {"gpu_config_overwrites", v.gpu_config_overwrites},
          {"gpu_config_repeats", st[AC_STAT_GPU_CONFIG_REPEATS]},
          {"stall_reason_map",
           {{"seen", v.stall_maps > 0},
            {"firings_read", v.stall_maps},
            {"count", v.stall_count},
            {"names", v.stall_names}}},
          {"cubins", cubins},
          {"cubin_repeats", st[AC_STAT_CUBIN_REPEATS]},
          {"pc_samples", pc_samples_json(v)},
          {"errors", v.error_count},
          {"error_list", errors},
          {"ringbuf_drops", ring_full_total(st)},
          {"lost", losses_json(st)},
          {"own_ring_drops", st[AC_STAT_OWN_RING_DROPS]},
          {"kernel_names_cut", v.kernel_names_cut}};
}

Json process_json(const ProcessView &v) {
  Json j = launches_json(v);
  j.update(metadata_json(v));
  return j;
}

// The events, each into its process's view.
void add_correlation(ProcessView &v, const ac_correlation_event &e) {
  v.correlations++;
  v.correlations_by_cbid[e.signed_cbid]++;
  if (!v.announced.emplace(e.correlation_id, e.signed_cbid).second) v.correlation_repeats++;
  v.announced_ns[e.correlation_id] = e.ts;
}

void add_kernel(ProcessView &v, uint32_t pid, const ac_kernel_event &e,
                trace::TimestampCheck &times) {
  v.kernel_records++;
  if (strnlen(e.name, sizeof e.name) == sizeof e.name - 1) v.kernel_names_cut++;
  if (e.start == 0 || e.end < e.start || e.end - e.start > 60'000'000'000ull)
    v.invalid_timestamps++;
  v.kernels_by_correlation[e.correlation_id]++;
  trace::KernelTimes t = trace::kernel_times(e, pid, e.ts, v.process_start_ns);
  if (auto a = v.announced_ns.find(e.correlation_id); a != v.announced_ns.end())
    t.announced_ns = a->second;  // announced before it came
  v.impossible[static_cast<size_t>(times.check(t))]++;
}

void add_pc_sample(ProcessView &v, const ac_pc_sample_event &e) {
  const PcRecord r = decode_pc_record(e.record);
  v.pc_records++;
  v.pc_records_by_crc[r.cubin_crc]++;
  const std::string name = cstr(e.function_name, sizeof e.function_name);
  if (name.size() == sizeof e.function_name - 1) v.pc_function_names_cut++;
  v.pc_function_names.insert(name);
  if (r.correlation_id == 0)
    v.pc_correlation_zero++;
  else
    v.pc_correlation_ids.push_back(r.correlation_id);
  // The agent uses the first stallReasonCount of the 64 entries it copied.
  const uint64_t n =
      r.stall_reason_count < AC_STALL_REASONS ? r.stall_reason_count : AC_STALL_REASONS;
  for (uint64_t i = 0; i < n; i++) {
    v.pc_samples_by_stall_index[e.stall[i].index] += e.stall[i].samples;
    v.pc_stall_samples += e.stall[i].samples;
  }
}

void add_stall_map(ProcessView &v, const ac_stall_map_event &e) {
  v.stall_maps++;
  v.stall_count = e.count;
  v.stall_names.clear();
  for (uint32_t i = 0; i < AC_STALL_REASONS; i++)
    v.stall_names.push_back(cstr(e.names[i], AC_STALL_NAME_LEN));
  while (!v.stall_names.empty() && v.stall_names.back().empty()) v.stall_names.pop_back();
}

void add_error(ProcessView &v, const ac_error_event &e) {
  v.error_count++;
  if (v.errors.size() < 100)
    v.errors.push_back(
        {e.code, cstr(e.component, sizeof e.component), cstr(e.message, sizeof e.message)});
}

void add_gpu_config(ProcessView &v, const ac_gpu_config_event &e) {
  // The agent keeps one per process, the last (interpreter/gpu/config.go), and warns when
  // it replaces one of another factor or clock.
  if (!v.gpu_configs.empty() && (v.gpu_configs.back().sampling_factor != e.sampling_factor ||
                                 v.gpu_configs.back().clock_khz != e.clock_khz))
    v.gpu_config_overwrites++;
  v.gpu_configs.push_back({e.device_id, e.sampling_factor, e.clock_khz, e.sm_count});
}

}  // namespace

bool is_elf_image(const std::vector<uint8_t> &bytes) {
  if (bytes.empty() || elf_version(EV_CURRENT) == EV_NONE) return false;
  Elf *elf =
      elf_memory(reinterpret_cast<char *>(const_cast<uint8_t *>(bytes.data())), bytes.size());
  size_t shnum = 0;
  const bool ok = elf && elf_kind(elf) == ELF_K_ELF && elf_getshdrnum(elf, &shnum) == 0 &&
                  shnum > 0 && elf_nextscn(elf, nullptr) != nullptr;
  if (elf) elf_end(elf);
  return ok;
}

PcRecord decode_pc_record(const uint8_t r[AC_PC_RECORD_SIZE]) {
  PcRecord p;
  p.size = field<uint64_t>(r, AC_PC_OFF_SIZE);
  p.cubin_crc = field<uint64_t>(r, AC_PC_OFF_CUBIN_CRC);
  p.pc_offset = field<uint64_t>(r, AC_PC_OFF_PC_OFFSET);
  p.function_index = field<uint32_t>(r, AC_PC_OFF_FUNCTION_INDEX);
  p.function_name = field<uint64_t>(r, AC_PC_OFF_FUNCTION_NAME);
  p.stall_reason_count = field<uint64_t>(r, AC_PC_OFF_STALL_REASON_COUNT);
  p.stall_reason = field<uint64_t>(r, AC_PC_OFF_STALL_REASON);
  p.correlation_id = field<uint32_t>(r, AC_PC_OFF_CORRELATION_ID);
  return p;
}

uint64_t ProcessView::impossible_total() const {
  uint64_t n = 0;
  for (size_t r = 1; r < impossible.size(); ++r) n += impossible[r];
  return n;
}

ProcessView &Summary::process(uint32_t pid) {
  auto [it, fresh] = pids_.try_emplace(pid);
  if (fresh && process_start_) it->second.process_start_ns = process_start_(pid);
  return it->second;
}

uint64_t ProcessView::read_failures() const {
  uint64_t n = 0;
  for (uint32_t s = AC_STAT_READ_FAIL_ARG; s <= AC_STAT_READ_FAIL_LAST; s++) n += stats[s];
  return n;
}

void Summary::add_cubin(ProcessView &v, uint32_t pid, const ac_cubin_event &e) const {
  ProcessView::Cubin &c = v.cubins[e.crc];
  c.size = e.size;
  std::vector<uint8_t> bytes;
  c.readable = read_memory_ && read_memory_(pid, e.ptr, e.size, &bytes);
  c.elf = c.readable && is_elf_image(bytes);
}

bool Summary::on_event(const void *data, size_t size) {
  uint32_t type, pid;
  if (size < 8) return ++bad_events_, false;
  std::memcpy(&type, data, 4);
  std::memcpy(&pid, static_cast<const char *>(data) + 4, 4);
  ProcessView &v = process(pid);
  switch (type) {
    case AC_EV_CORRELATION:
      return take<ac_correlation_event>(data, size, [&](const auto &e) { add_correlation(v, e); });
    case AC_EV_KERNEL:
      return take<ac_kernel_event>(data, size,
                                   [&](const auto &e) { add_kernel(v, pid, e, times_); });
    case AC_EV_CUBIN:
      return take<ac_cubin_event>(data, size, [&](const auto &e) { add_cubin(v, pid, e); });
    case AC_EV_PC_SAMPLE:
      return take<ac_pc_sample_event>(data, size, [&](const auto &e) { add_pc_sample(v, e); });
    case AC_EV_STALL_MAP:
      return take<ac_stall_map_event>(data, size, [&](const auto &e) { add_stall_map(v, e); });
    case AC_EV_ERROR:
      return take<ac_error_event>(data, size, [&](const auto &e) { add_error(v, e); });
    case AC_EV_KERNEL_SLOT:  // the agent ring's room for a kernel event: its content is ours
      return true;
    case AC_EV_GPU_CONFIG:
      return take<ac_gpu_config_event>(data, size, [&](const auto &e) { add_gpu_config(v, e); });
  }
  ++bad_events_;
  return false;
}

void Summary::add_stat(uint32_t pid, uint32_t stat, uint64_t value) {
  if (stat < AC_STAT_MAX) pids_[pid].stats[stat] += value;
}

std::string Summary::impossible_line() const {
  std::array<uint64_t, static_cast<size_t>(trace::Impossible::kCount)> by{};
  uint64_t total = 0, kernels = 0;
  for (const auto &[pid, v] : pids_) {
    for (size_t r = 1; r < by.size(); ++r) by[r] += v.impossible[r];
    total += v.impossible_total();
    kernels += v.kernel_records;
  }
  if (total == 0) return "";
  std::string why;
  for (size_t r = 1; r < by.size(); ++r)
    if (by[r])
      why += (why.empty() ? "" : ", ") +
             std::string(trace::impossible_name(static_cast<trace::Impossible>(r))) + " " +
             std::to_string(by[r]);
  return std::to_string(total) + " impossible kernel records of " + std::to_string(kernels) +
         " (" + why + ")";
}

void Summary::set_attached(std::vector<std::string> attached, std::vector<std::string> ignored,
                           std::map<std::string, int> sites) {
  attached_ = std::move(attached);
  ignored_ = std::move(ignored);
  sites_ = std::move(sites);
}

std::string Summary::json() const {
  Json pids = Json::object();
  uint64_t kernels = 0, correlations = 0, failures = 0, impossible = 0;
  for (const auto &[pid, v] : pids_) {
    pids[std::to_string(pid)] = process_json(v);
    kernels += v.kernel_records;
    impossible += v.impossible_total();
    correlations += v.correlations;
    failures += v.read_failures();
  }
  const Json j = {{"ring_bytes", ring_bytes_},
                  {"attached", attached_},
                  {"ignored", ignored_},
                  {"sites", sites_},
                  {"processes", pids_.size()},
                  {"correlations", correlations},
                  {"kernel_records", kernels},
                  {"impossible_kernel_records", impossible},
                  {"read_failures", failures},
                  {"bad_events", bad_events_},
                  {"pids", pids}};
  // ASCII only, as the agent's strings are; bytes that are not UTF-8 are replaced.
  return j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

}  // namespace parcagpu::agent
