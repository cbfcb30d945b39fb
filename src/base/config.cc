#include "base/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

extern char **environ;

namespace parcagpu {
namespace {

constexpr const char *kDebug = "PARCAGPU_DEBUG";
constexpr const char *kRate = "PARCAGPU_RATE_LIMIT";
constexpr const char *kGraphRate = "PARCAGPU_GRAPH_RATE_LIMIT";
constexpr const char *kCuptiPath = "PARCAGPU_CUPTI_PATH";
constexpr const char *kMaxOutstanding = "PARCAGPU_MAX_OUTSTANDING";
constexpr const char *kMaxAge = "PARCAGPU_MAX_AGE_MS";
constexpr const char *kMaxBlockedCopies = "PARCAGPU_MAX_BLOCKED_COPIES";
constexpr const char *kFlushThreshold = "PARCAGPU_FLUSH_THRESHOLD";
constexpr const char *kFlushInterval = "PARCAGPU_FLUSH_INTERVAL_MS";
constexpr const char *kBufferKib = "PARCAGPU_BUFFER_KIB";
constexpr const char *kMaxBuffers = "PARCAGPU_MAX_BUFFERS";
constexpr const char *kDisableCbids = "PARCAGPU_DISABLE_CBIDS";
constexpr const char *kActivityMode = "PARCAGPU_ACTIVITY_MODE";
constexpr const char *kActivityHostMemory = "PARCAGPU_ACTIVITY_HOST_MEMORY";
constexpr const char *kWatchInterval = "PARCAGPU_WATCH_INTERVAL_MS";
// The upstream library's (parca-dev/parcagpu) names, with upstream's meaning, so that its
// deployments can switch libraries without touching their settings. PARCAGPU_DEBUG,
// PARCAGPU_RATE_LIMIT and PARCAGPU_GRAPH_RATE_LIMIT are shared above; the PC sampling ones
// belong with PC sampling. PARCAGPU_LIMITER_DISABLE is from upstream releases before its
// April 2026 rewrite: set, no launch is rate limited. A boolean like every other switch here:
// set empty (upstream's "set") or true, limits off; 0/false/no/off, limits on.
constexpr const char *kLimiterDisable = "PARCAGPU_LIMITER_DISABLE";

// The highest rate limit: no thread launches a billion times a second, so nothing is limited.
constexpr double kUnlimitedRate = 1e9;
// PC sampling's: the three numbers are upstream's (names and meanings); PARCAGPU_PC_SAMPLING is
// ours, an operator's off switch.
constexpr const char *kPcSampling = "PARCAGPU_PC_SAMPLING";
constexpr const char *kPcRate = "PARCAGPU_PC_SAMPLING_RATE";
constexpr const char *kSamplingFactor = "PARCAGPU_SAMPLING_FACTOR";
constexpr const char *kPcHwBufferMb = "PARCAGPU_PC_HW_BUFFER_MB";
constexpr const char *kPcGraphs = "PARCAGPU_PC_GRAPHS";
constexpr const char *kPcGraphShadows = "PARCAGPU_PC_GRAPH_SHADOWS";
constexpr const char *kPcLockDir = "PARCAGPU_PC_LOCK_DIR";
constexpr const char *kPcStartQuietMs = "PARCAGPU_PC_START_QUIET_MS";

struct Parser {
  const EnvLookup &getenv;
  std::vector<ConfigWarning> *warnings;

  void warn(const char *name, const char *value, std::string reason) {
    if (warnings) warnings->push_back({name, value ? value : "", std::move(reason)});
  }

  // A finite decimal number in [lo, hi] (an integer if `integral`); else keeps *out and warns.
  void number(const char *name, double lo, double hi, double *out, bool integral = false) {
    const char *v = getenv(name);
    if (!v) return;
    errno = 0;
    char *end = nullptr;
    double d = std::strtod(v, &end);
    if (end == v || *end != '\0' || errno == ERANGE || !std::isfinite(d) || std::strchr(v, 'x') ||
        std::strchr(v, 'X')) {
      warn(name, v, "not a number");
      return;
    }
    if (integral && d != std::floor(d)) {
      warn(name, v, "not an integer");
      return;
    }
    if (d < lo || d > hi) {
      warn(name, v, "out of range [" + fmt(lo) + ", " + fmt(hi) + "]");
      return;
    }
    *out = d;
  }

  void integer(const char *name, uint32_t lo, uint32_t hi, uint32_t *out) {
    double d = *out;
    number(name, lo, hi, &d, true);
    *out = static_cast<uint32_t>(d);
  }

  // empty_value: what an empty value means (upstream's PARCAGPU_DEBUG is on whenever set).
  void boolean(const char *name, bool *out, bool empty_value = false) {
    const char *v = getenv(name);
    if (!v) return;
    if (*v == '\0') return void(*out = empty_value);
    static const char *const kTrue[] = {"1", "true", "yes", "on"};
    static const char *const kFalse[] = {"0", "false", "no", "off"};
    for (const char *t : kTrue)
      if (strcasecmp(v, t) == 0) return void(*out = true);
    for (const char *f : kFalse)
      if (strcasecmp(v, f) == 0) return void(*out = false);
    warn(name, v, "not a boolean (use 1/0, true/false, yes/no, on/off)");
  }

  // "DRIVER:514,RUNTIME:311": launch cbids of the subscription table to leave out.
  void cbid_list(const char *name, std::vector<CbidRef> *out) {
    const char *v = getenv(name);
    if (!v) return;
    std::string s(v);
    size_t pos = 0;
    while (pos <= s.size()) {
      size_t comma = s.find(',', pos);
      std::string item =
          s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      pos = comma == std::string::npos ? s.size() + 1 : comma + 1;
      if (item.empty()) continue;
      size_t colon = item.find(':');
      std::string dom = item.substr(0, colon);
      CbDomain d;
      if (colon == std::string::npos) {
        warn(name, item.c_str(), "expected DOMAIN:CBID");
        continue;
      } else if (strcasecmp(dom.c_str(), "DRIVER") == 0) {
        d = CbDomain::Driver;
      } else if (strcasecmp(dom.c_str(), "RUNTIME") == 0) {
        d = CbDomain::Runtime;
      } else {
        warn(name, item.c_str(), "domain must be DRIVER or RUNTIME");
        continue;
      }
      const std::string num = item.substr(colon + 1);
      char *end = nullptr;
      unsigned long cbid = std::strtoul(num.c_str(), &end, 10);
      if (num.empty() || *end != '\0' || !find_subscribed(d, static_cast<uint32_t>(cbid))) {
        warn(name, item.c_str(), "not a subscribed launch cbid");
        continue;
      }
      out->push_back({d, static_cast<uint32_t>(cbid)});
    }
  }

  static std::string fmt(double d) {
    char b[32];
    snprintf(b, sizeof b, "%.15g", d);
    return b;
  }
};

}  // namespace

const std::vector<const char *> &known_config_names() {
  static const std::vector<const char *> names = {kDebug,          kRate,
                                                  kGraphRate,      kCuptiPath,
                                                  kMaxOutstanding, kMaxAge,
                                                  kFlushThreshold, kFlushInterval,
                                                  kBufferKib,      kMaxBuffers,
                                                  kDisableCbids,   kActivityMode,
                                                  kLimiterDisable, kPcSampling,
                                                  kPcRate,         kSamplingFactor,
                                                  kPcHwBufferMb,   kPcGraphs,
                                                  kWatchInterval,  kPcLockDir,
                                                  kPcGraphShadows, kActivityHostMemory,
                                                  kPcStartQuietMs, kMaxBlockedCopies};
  return names;
}

namespace {

// PC sampling's settings (parse_config).
void parse_pc_config(Parser &p, const EnvLookup &getenv, Config *config) {
  Config &c = *config;
  p.boolean(kPcSampling, &c.pc_sampling);
  p.boolean(kPcGraphs, &c.pc_graphs);
  p.boolean(kPcGraphShadows, &c.pc_graph_shadows);
  p.number(kPcRate, 0, 1e6, &c.pc_sampling_rate);
  // CUPTI accepts sampling periods of 2^5 .. 2^31 cycles; 0 (as upstream) means its default.
  if (const char *v = getenv(kSamplingFactor)) {
    uint32_t f = c.sampling_factor;
    p.integer(kSamplingFactor, 0, 31, &f);
    if (f != 0 && f < 5)
      p.warn(kSamplingFactor, v, "out of range: 5..31, or 0 for CUPTI's default");
    else
      c.sampling_factor = f;
  }
  p.integer(kPcHwBufferMb, 0, 65536, &c.pc_hw_buffer_mb);
  p.integer(kPcStartQuietMs, 0, 600000, &c.pc_start_quiet_ms);
  if (const char *v = getenv(kPcLockDir)) {
    if (*v == '/')
      c.pc_lock_dir = v;
    else
      p.warn(kPcLockDir, v, "not an absolute path");
  }
}

// A PARCAGPU_* variable that is none of ours: said, with its value.
void warn_unknown(Parser &p, const EnvLookup &getenv, const std::vector<std::string> &all_names) {
  for (const std::string &n : all_names) {
    bool known = false;
    for (const char *k : known_config_names()) known |= (n == k);
    if (!known) {
      const char *v = getenv(n.c_str());
      p.warn(n.c_str(), v, "unknown variable");
    }
  }
}

}  // namespace

Config parse_config(const EnvLookup &getenv, const std::vector<std::string> &all_names,
                    std::vector<ConfigWarning> *warnings) {
  Config c;
  Parser p{getenv, warnings};
  p.boolean(kDebug, &c.debug, /*empty_value=*/true);
  p.number(kRate, 0, kUnlimitedRate, &c.eager_rate_limit);
  p.number(kGraphRate, 0, kUnlimitedRate, &c.graph_rate_limit);
  bool limiter_disabled = false;
  p.boolean(kLimiterDisable, &limiter_disabled, /*empty_value=*/true);
  if (limiter_disabled) c.eager_rate_limit = c.graph_rate_limit = kUnlimitedRate;
  if (const char *v = getenv(kCuptiPath)) {
    if (*v)
      c.cupti_path = v;
    else
      p.warn(kCuptiPath, v, "empty path");
  }
  p.integer(kMaxOutstanding, 64, 1u << 22, &c.max_outstanding);
  p.integer(kMaxAge, 100, 3600000, &c.max_age_ms);
  p.integer(kMaxBlockedCopies, 1, 1u << 16, &c.max_blocked_copies);
  p.integer(kFlushThreshold, 1, 1u << 20, &c.flush_threshold);
  p.integer(kFlushInterval, 10, 600000, &c.flush_interval_ms);
  p.integer(kBufferKib, 16, 65536, &c.buffer_kib);
  p.integer(kMaxBuffers, 2, 4096, &c.max_buffers);
  p.cbid_list(kDisableCbids, &c.disabled_cbids);
  p.integer(kWatchInterval, 1, 10000, &c.watch_interval_ms);
  p.boolean(kActivityHostMemory, &c.activity_host_memory);
  if (const char *v = getenv(kActivityMode)) {
    if (strcasecmp(v, "consumer") == 0)
      c.activity_mode = ActivityMode::WhileConsumer;
    else if (strcasecmp(v, "launch") == 0)
      c.activity_mode = ActivityMode::AroundLaunch;
    else
      p.warn(kActivityMode, v, "must be 'consumer' or 'launch'");
  }

  parse_pc_config(p, getenv, &c);
  warn_unknown(p, getenv, all_names);
  return c;
}

std::vector<std::string> parcagpu_env_names() {
  std::vector<std::string> names;
  for (char **e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "PARCAGPU_", 9) != 0) continue;
    const char *eq = std::strchr(*e, '=');
    names.emplace_back(*e, eq ? static_cast<size_t>(eq - *e) : std::strlen(*e));
  }
  return names;
}

}  // namespace parcagpu
