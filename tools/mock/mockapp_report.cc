// What parcagpu-mockapp reports: MOCKAPP_STATUS lines while it runs and the MOCKAPP_SUMMARY line
// at the end, from the mock driver's counters and the mock CUPTI's view of what the library did.
#include <dlfcn.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mock_cupti_control.h"
#include "mockapp.h"
#include "parcagpu/cbid_table.h"

namespace mockapp {
namespace {

// The mock CUPTI's control API, resolved from the libcupti the library loaded, if it did. The
// application does not link libcupti: whether one is in the process is the library's doing.
struct CuptiView {
  bool loaded = false;
  decltype(&mock_cupti_enabled_callbacks) enabled_callbacks = nullptr;
  decltype(&mock_cupti_ever_enabled_callbacks) ever_enabled_callbacks = nullptr;
  decltype(&mock_cupti_whole_domain_enables) whole_domain_enables = nullptr;
  decltype(&mock_cupti_subscribed) subscribed = nullptr;
  decltype(&mock_cupti_kernel_activity_enabled) kernel_activity_enabled = nullptr;
  decltype(&mock_cupti_kernel_activity_ever_enabled) kernel_activity_ever_enabled = nullptr;
  decltype(&mock_cupti_get_stats) get_stats = nullptr;
  decltype(&mock_cupti_domain_name) domain_name = nullptr;
  uint32_t api_version = 0;  // cuptiGetVersion, 0 if it has none
  int cuda_major = 0;        // of that version: 13 from 130001, 12 from 19..28
};

const CuptiView &cupti() {
  static std::mutex mutex;
  static CuptiView view;
  std::lock_guard<std::mutex> lock(mutex);
  if (view.loaded) return view;
  // By SONAME: matches the mock however the library named it or wherever it found it (the mock
  // is built as libcupti.so.13 and as libcupti.so.12).
  void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (!h) h = dlopen("libcupti.so.12", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return view;
  CuptiView v;
#define MOCKAPP_RESOLVE(field, symbol) \
  v.field = reinterpret_cast<decltype(v.field)>(dlsym(h, #symbol));
  MOCKAPP_RESOLVE(enabled_callbacks, mock_cupti_enabled_callbacks)
  MOCKAPP_RESOLVE(ever_enabled_callbacks, mock_cupti_ever_enabled_callbacks)
  MOCKAPP_RESOLVE(whole_domain_enables, mock_cupti_whole_domain_enables)
  MOCKAPP_RESOLVE(subscribed, mock_cupti_subscribed)
  MOCKAPP_RESOLVE(kernel_activity_enabled, mock_cupti_kernel_activity_enabled)
  MOCKAPP_RESOLVE(kernel_activity_ever_enabled, mock_cupti_kernel_activity_ever_enabled)
  MOCKAPP_RESOLVE(get_stats, mock_cupti_get_stats)
  MOCKAPP_RESOLVE(domain_name, mock_cupti_domain_name)
#undef MOCKAPP_RESOLVE
  using GetVersion = int (*)(uint32_t *);
  if (auto get_version = reinterpret_cast<GetVersion>(dlsym(h, "cuptiGetVersion")))
    if (get_version(&v.api_version) != 0) v.api_version = 0;
  v.cuda_major = v.api_version >= 10000 ? static_cast<int>(v.api_version / 10000)
                                        : (v.api_version >= 19 ? 12 : 0);
  v.loaded = v.enabled_callbacks && v.ever_enabled_callbacks && v.whole_domain_enables &&
             v.subscribed && v.kernel_activity_enabled && v.kernel_activity_ever_enabled &&
             v.get_stats && v.domain_name;
  if (v.loaded) view = v;  // else a libcupti that is not the mock: report nothing from it
  return view;
}

using Json = nlohmann::ordered_json;  // keys in the order written

// One line of JSON; bytes that are not UTF-8 (a path) are replaced, not thrown at.
std::string json_line(const Json &j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Seconds and rates as the report always printed them: to the microsecond.
double micro(double v) { return std::round(v * 1e6) / 1e6; }

const char *domain_label(uint32_t domain) {
  switch (domain) {
    case 1:
      return "DRIVER";
    case 2:
      return "RUNTIME";
    case 3:
      return "RESOURCE";
    default:
      return "OTHER";
  }
}

std::string pair_label(uint32_t domain, uint32_t cbid) {
  return std::string(domain_label(domain)) + ":" + std::to_string(cbid);
}

std::string cbid_label(int32_t signed_cbid) {
  const uint32_t domain = signed_cbid < 0 ? MOCK_CUDA_DOMAIN_DRIVER : MOCK_CUDA_DOMAIN_RUNTIME;
  const char *name = mock_cuda_api_name(domain, static_cast<uint32_t>(std::abs(signed_cbid)));
  return std::to_string(signed_cbid) + " " + (name ? name : "?");
}

// The (domain, cbid) pairs a mock CUPTI list call gives: enabled now, or ever.
std::vector<MockCuptiPair> callback_pairs(size_t (*list)(MockCuptiPair *, size_t)) {
  std::vector<MockCuptiPair> pairs(list(nullptr, 0));
  pairs.resize(std::min(pairs.size(), list(pairs.data(), pairs.size())));
  return pairs;
}

// The callbacks enabled against the table: what is enabled now, what was ever, and the two halves
// of the table (entries enabled from process start; launch entries, enabled only while a consumer
// listens).
struct TableCheck {
  std::vector<std::string> enabled_labels, table_missing, table_extra, table_never_enabled,
      from_start_missing, launch_enabled_now;
};

TableCheck check_table(int cuda_major, const std::vector<MockCuptiPair> &enabled,
                       const std::vector<MockCuptiPair> &ever) {
  TableCheck t;
  for (const MockCuptiPair &p : enabled) {
    t.enabled_labels.push_back(pair_label(p.domain, p.cbid));
    if ((p.domain == MOCK_CUDA_DOMAIN_DRIVER || p.domain == MOCK_CUDA_DOMAIN_RUNTIME) &&
        !parcagpu::find_subscribed(static_cast<parcagpu::CbDomain>(p.domain), p.cbid))
      t.table_extra.push_back(pair_label(p.domain, p.cbid));
  }
  for (const parcagpu::SubscribedCallback &cb : parcagpu::kSubscribedCallbacks) {
    const auto domain = static_cast<uint32_t>(cb.domain);
    if (!parcagpu::callback_known_to(cb, cuda_major)) continue;  // an older CUPTI lacks it
    bool on = false;
    for (const MockCuptiPair &p : enabled) on |= (p.domain == domain && p.cbid == cb.cbid);
    bool ever_on = false;
    for (const MockCuptiPair &p : ever) ever_on |= (p.domain == domain && p.cbid == cb.cbid);
    if (!on) t.table_missing.push_back(pair_label(domain, cb.cbid));
    if (!ever_on) t.table_never_enabled.push_back(pair_label(domain, cb.cbid));
    if (!on && parcagpu::enabled_from_start(cb.role))
      t.from_start_missing.push_back(pair_label(domain, cb.cbid));
    if (on && parcagpu::is_launch_role(cb.role))
      t.launch_enabled_now.push_back(pair_label(domain, cb.cbid));
  }
  return t;
}

// The summary's keys about the library's callbacks and activity, as the mock CUPTI saw them.
void add_cupti_keys(const CuptiView &c, const std::vector<MockCuptiPair> &enabled,
                    const std::vector<MockCuptiPair> &ever, Json *summary) {
  TableCheck t = check_table(c.cuda_major, enabled, ever);
  Json &j = *summary;
  j["cupti_loaded"] = c.loaded;
  j["cupti_api_version"] = c.api_version;
  j["runtime_version"] = g_runtime_version;
  j["subscribed"] = c.loaded && c.subscribed();
  j["enabled_callbacks"] = std::move(t.enabled_labels);
  j["activity_enabled_now"] = c.loaded && c.kernel_activity_enabled();
  j["activity_ever_enabled"] = c.loaded && c.kernel_activity_ever_enabled();
  j["table_missing"] = std::move(t.table_missing);
  j["table_extra"] = std::move(t.table_extra);
  j["table_never_enabled"] = std::move(t.table_never_enabled);
  j["from_start_missing"] = std::move(t.from_start_missing);
  j["launch_enabled_now"] = std::move(t.launch_enabled_now);
}

// The summary in words, on stderr: launches and kernels by cbid, the mock CUPTI's records.
void print_human_summary(const std::vector<MockCbidCount> &counts, const MockCudaStats &d,
                         const CuptiView &c, const MockCuptiStats &st, size_t enabled,
                         double elapsed_s) {
  const uint64_t total = d.eager_launches + d.graph_launches;
  std::string human = "parcagpu-mockapp[" + std::to_string(getpid()) +
                      "]: " + std::to_string(total) + " launches in " + std::to_string(elapsed_s) +
                      " s, " + std::to_string(d.kernels_run) + " kernels run\n";
  for (const MockCbidCount &n : counts) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "  %-44s %8" PRIu64 " launches %9" PRIu64 " kernels %6" PRIu64 " captured\n",
                  cbid_label(n.signed_cbid).c_str(), n.launches, n.kernels, n.captured);
    human += line;
  }
  if (c.loaded) {
    human += "  kernel records: " + std::to_string(st.records_written) + " written, " +
             std::to_string(st.records_dropped) + " dropped, " +
             std::to_string(st.records_not_collected) + " not collected; " +
             std::to_string(enabled) + " callbacks enabled, kernel activity " +
             (c.kernel_activity_enabled() ? "on" : "off") + "\n";
  } else {
    human += "  no mock libcupti in the process: no callbacks, no kernel records\n";
  }
  std::fputs(human.c_str(), stderr);
}

}  // namespace

bool kernel_activity_enabled_now(uint64_t *records_written) {
  const CuptiView &c = cupti();
  *records_written = 0;
  if (!c.loaded) return false;
  MockCuptiStats st;
  c.get_stats(&st);
  *records_written = st.records_written;
  return c.kernel_activity_enabled();
}

namespace {
pthread_mutex_t *g_line_lock = nullptr;  // in memory shared with the processes forked after
}  // namespace

void share_line_lock() {
  void *m = mmap(nullptr, sizeof(pthread_mutex_t), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    std::perror("parcagpu-mockapp: mmap of the stdout lock (lines may interleave)");
    return;
  }
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  // A process that dies holding it (killed mid-write) does not stop the others.
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(static_cast<pthread_mutex_t *>(m), &attr);
  pthread_mutexattr_destroy(&attr);
  g_line_lock = static_cast<pthread_mutex_t *>(m);
}

void print_line(const char *kind, const std::string &json) {
  const std::string line = std::string(kind) + " " + json + "\n";
  std::fflush(stdout);  // whatever stdio still holds goes first
  bool locked = false;
  if (g_line_lock) {
    const int rc = pthread_mutex_lock(g_line_lock);
    if (rc == EOWNERDEAD) pthread_mutex_consistent(g_line_lock);
    locked = rc == 0 || rc == EOWNERDEAD;
  }
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = write(STDOUT_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // stdout gone: nobody reads it
    done += static_cast<size_t>(n);
  }
  if (locked) pthread_mutex_unlock(g_line_lock);
}

void print_status(double t_ms) {
  uint64_t written = 0;
  const bool activity = kernel_activity_enabled_now(&written);
  MockCudaStats d;
  mock_cuda_get_stats(&d);
  // Launch callbacks the library has enabled now (it enables them only while a consumer listens).
  size_t launch_cbids = 0;
  if (const CuptiView &c = cupti(); c.loaded) {
    for (const MockCuptiPair &p : callback_pairs(c.enabled_callbacks))
      launch_cbids += parcagpu::is_launch_cbid(static_cast<parcagpu::CbDomain>(p.domain), p.cbid);
  }
  const Json status = {{"pid", getpid()},
                       {"t_ms", std::llround(t_ms)},
                       {"activity_enabled", activity},
                       {"records_written", written},
                       {"launches", d.eager_launches + d.graph_launches},
                       {"launch_cbids_enabled", launch_cbids}};
  print_line("MOCKAPP_STATUS", json_line(status));
}

void print_summary(const Options &o, double elapsed_s) {
  MockCudaStats d;
  mock_cuda_get_stats(&d);
  std::vector<MockCbidCount> counts(64);
  counts.resize(std::min<size_t>(mock_cuda_counts_by_cbid(counts.data(), counts.size()), 64));
  const CuptiView &c = cupti();
  MockCuptiStats st{};
  std::vector<MockCuptiPair> enabled, ever;
  if (c.loaded) {
    c.get_stats(&st);
    enabled = callback_pairs(c.enabled_callbacks);
    ever = callback_pairs(c.ever_enabled_callbacks);
  }
  Json launches = Json::object(), kernels = Json::object(), captured = Json::object();
  for (const MockCbidCount &n : counts) {
    const std::string key = std::to_string(n.signed_cbid);
    if (n.launches) launches[key] = n.launches;
    if (n.kernels) kernels[key] = n.kernels;
    if (n.captured) captured[key] = n.captured;
  }
  // Kernels run per device, device 0 first: the truth a consumer's per-device view is held to.
  uint64_t by_device[MOCK_CUDA_MAX_DEVICES] = {};
  const size_t devices = std::min<size_t>(
      mock_cuda_kernels_by_device(by_device, MOCK_CUDA_MAX_DEVICES), MOCK_CUDA_MAX_DEVICES);
  const uint64_t total = d.eager_launches + d.graph_launches;
  Json summary = {
      {"pid", getpid()},
      {"mode", o.scenarios.empty() ? "timed" : "scenario"},
      {"scenarios", o.scenarios},
      {"library", o.library},
      {"elapsed_s", micro(elapsed_s)},
      {"threads", o.threads},
      {"num_gpus", o.num_gpus},
      {"launches_by_cbid", launches},
      {"kernels_by_cbid", kernels},
      {"captured_by_cbid", captured},
      {"launches", total},
      {"kernels_by_device", std::vector<uint64_t>(by_device, by_device + devices)},
      {"launches_per_s", micro(elapsed_s > 0 ? total / elapsed_s : 0)},
  };
  add_cupti_keys(c, enabled, ever, &summary);
  summary["mock_errors"] = g_mock_errors.load();
  summary["fork_children"] = g_fork_report.forked;
  summary["fork_children_hung"] = g_fork_report.hung;
  summary["fork_children_failed"] = g_fork_report.failed;
  // Every counter of the mock driver and the mock CUPTI, under its field's name.
#define MOCK_CUDA_STAT_KEY(name) summary[#name] = d.name;
  MOCK_CUDA_STATS(MOCK_CUDA_STAT_KEY)
#undef MOCK_CUDA_STAT_KEY
#define MOCK_CUPTI_STAT_KEY(name) summary[#name] = st.name;
  MOCK_CUPTI_STATS(MOCK_CUPTI_STAT_KEY)
#undef MOCK_CUPTI_STAT_KEY
  print_line("MOCKAPP_SUMMARY", json_line(summary));
  print_human_summary(counts, d, c, st, enabled.size(), elapsed_s);
}

}  // namespace mockapp
