#include "base/config.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace parcagpu {
namespace {

struct Env {
  std::map<std::string, std::string> vars;
  Config parse(std::vector<ConfigWarning> *w) const {
    std::vector<std::string> names;
    for (const auto &kv : vars) names.push_back(kv.first);
    return parse_config(
        [this](const char *n) -> const char * {
          auto it = vars.find(n);
          return it == vars.end() ? nullptr : it->second.c_str();
        },
        names, w);
  }
};

TEST(Config, Defaults) {
  std::vector<ConfigWarning> w;
  Config c = Env{}.parse(&w);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(c.eager_rate_limit, 100.0);
  EXPECT_EQ(c.graph_rate_limit, 20.0);
  EXPECT_FALSE(c.debug);
  EXPECT_TRUE(c.cupti_path.empty());
  EXPECT_TRUE(c.disabled_cbids.empty());
}

TEST(Config, ValidValues) {
  std::vector<ConfigWarning> w;
  Config c = Env{{{"PARCAGPU_RATE_LIMIT", "5000"},
                  {"PARCAGPU_GRAPH_RATE_LIMIT", "0.5"},
                  {"PARCAGPU_DEBUG", "true"},
                  {"PARCAGPU_CUPTI_PATH", "/opt/libcupti.so"},
                  {"PARCAGPU_MAX_OUTSTANDING", "1024"},
                  {"PARCAGPU_DISABLE_CBIDS", "DRIVER:514,runtime:311"}}}
                 .parse(&w);
  EXPECT_TRUE(w.empty()) << w[0].variable << " " << w[0].reason;
  EXPECT_EQ(c.eager_rate_limit, 5000.0);
  EXPECT_EQ(c.graph_rate_limit, 0.5);
  EXPECT_TRUE(c.debug);
  EXPECT_EQ(c.cupti_path, "/opt/libcupti.so");
  EXPECT_EQ(c.max_outstanding, 1024u);
  ASSERT_EQ(c.disabled_cbids.size(), 2u);
  EXPECT_EQ(c.disabled_cbids[0].cbid, 514u);
  EXPECT_EQ(c.disabled_cbids[1].domain, CbDomain::Runtime);
}

struct BadCase {
  const char *var;
  const char *value;
  const char *reason_part;
};

class ConfigBadValue : public ::testing::TestWithParam<BadCase> {};

TEST_P(ConfigBadValue, WarnsNamesVariableAndValueAndKeepsDefault) {
  const BadCase &b = GetParam();
  std::vector<ConfigWarning> w;
  Config c = Env{{{b.var, b.value}}}.parse(&w);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].variable, b.var);
  EXPECT_EQ(w[0].value, b.value);
  EXPECT_NE(w[0].reason.find(b.reason_part), std::string::npos) << w[0].reason;
  const Config d;
  EXPECT_EQ(c.eager_rate_limit, d.eager_rate_limit);
  EXPECT_EQ(c.graph_rate_limit, d.graph_rate_limit);
  EXPECT_EQ(c.max_outstanding, d.max_outstanding);
  EXPECT_EQ(c.flush_interval_ms, d.flush_interval_ms);
  EXPECT_EQ(c.debug, d.debug);
  EXPECT_TRUE(c.disabled_cbids.empty());
  EXPECT_EQ(c.pc_sampling, d.pc_sampling);
  EXPECT_EQ(c.pc_sampling_rate, d.pc_sampling_rate);
  EXPECT_EQ(c.sampling_factor, d.sampling_factor);
  EXPECT_EQ(c.pc_hw_buffer_mb, d.pc_hw_buffer_mb);
}

INSTANTIATE_TEST_SUITE_P(
    BadValues, ConfigBadValue,
    ::testing::Values(BadCase{"PARCAGPU_RATE_LIMIT", "fast", "not a number"},
                      BadCase{"PARCAGPU_RATE_LIMIT", "-5", "out of range"},
                      BadCase{"PARCAGPU_RATE_LIMIT", "1e12", "out of range"},
                      BadCase{"PARCAGPU_RATE_LIMIT", "100abc", "not a number"},
                      BadCase{"PARCAGPU_RATE_LIMIT", "", "not a number"},
                      BadCase{"PARCAGPU_RATE_LIMIT", "nan", "not a number"},
                      BadCase{"PARCAGPU_GRAPH_RATE_LIMIT", "0x10", "not a number"},
                      BadCase{"PARCAGPU_GRAPH_RATE_LIMIT", "-1", "out of range"},
                      BadCase{"PARCAGPU_MAX_OUTSTANDING", "12.5", "not an integer"},
                      BadCase{"PARCAGPU_MAX_OUTSTANDING", "1", "out of range"},
                      BadCase{"PARCAGPU_FLUSH_INTERVAL_MS", "99999999", "out of range"},
                      BadCase{"PARCAGPU_DEBUG", "maybe", "not a boolean"},
                      BadCase{"PARCAGPU_DISABLE_CBIDS", "DRIVER:1", "not a subscribed"},
                      BadCase{"PARCAGPU_DISABLE_CBIDS", "GPU:514", "domain"},
                      BadCase{"PARCAGPU_DISABLE_CBIDS", "514", "DOMAIN:CBID"},
                      BadCase{"PARCAGPU_CUPTI_PATH", "", "empty"},
                      BadCase{"PARCAGPU_ACTIVITY_MODE", "sometimes", "must be"},
                      BadCase{"PARCAGPU_RATELIMIT", "100", "unknown variable"},
                      BadCase{"PARCAGPU_PC_SAMPLING_RATE", "-1", "out of range"},
                      BadCase{"PARCAGPU_PC_SAMPLING_RATE", "lots", "not a number"},
                      BadCase{"PARCAGPU_SAMPLING_FACTOR", "4", "out of range"},
                      BadCase{"PARCAGPU_SAMPLING_FACTOR", "32", "out of range"},
                      BadCase{"PARCAGPU_SAMPLING_FACTOR", "20.5", "not an integer"},
                      BadCase{"PARCAGPU_PC_HW_BUFFER_MB", "-5", "out of range"},
                      BadCase{"PARCAGPU_PC_HW_BUFFER_MB", "big", "not a number"},
                      BadCase{"PARCAGPU_PC_SAMPLING", "perhaps", "not a boolean"},
                      BadCase{"PARCAGPU_PC_LOCK_DIR", "locks", "not an absolute path"}));

// PC sampling's variables keep the upstream library's names and meanings (issue 10).
TEST(Config, PcSamplingDefaultsAndValues) {
  std::vector<ConfigWarning> w;
  const Config d = Env{}.parse(&w);
  EXPECT_TRUE(d.pc_sampling);
  EXPECT_EQ(d.pc_sampling_rate, 100.0);
  EXPECT_EQ(d.sampling_factor, 17u);  // breadth: many sparse windows, not one dense one
  EXPECT_EQ(d.pc_hw_buffer_mb, 8u);  // small: episodes wait on it (P13)
  EXPECT_EQ(d.pc_lock_dir, "/dev/shm");  // shared by the processes of a host (P27)
  Config c = Env{{{"PARCAGPU_PC_SAMPLING_RATE", "0"},
                  {"PARCAGPU_PC_LOCK_DIR", "/run/gpu-locks"},
                  {"PARCAGPU_SAMPLING_FACTOR", "20"},
                  {"PARCAGPU_PC_HW_BUFFER_MB", "256"},
                  {"PARCAGPU_PC_SAMPLING", "off"}}}
                 .parse(&w);
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(c.pc_sampling_rate, 0.0);
  EXPECT_EQ(c.sampling_factor, 20u);
  EXPECT_EQ(c.pc_hw_buffer_mb, 256u);
  EXPECT_EQ(c.pc_lock_dir, "/run/gpu-locks");
  EXPECT_FALSE(c.pc_sampling);
  c = Env{{{"PARCAGPU_SAMPLING_FACTOR", "0"}}}.parse(&w);  // upstream: 0 = the default
  EXPECT_TRUE(w.empty());
  EXPECT_EQ(c.sampling_factor, 0u);
}

// Deployments of the upstream library (parca-dev/parcagpu) keep their settings: its names are
// known, with its meaning. (The PC sampling ones come with PC sampling.)
TEST(Config, UpstreamLibraryVariables) {
  std::vector<ConfigWarning> w;
  Config c = Env{{{"PARCAGPU_DEBUG", ""},  // upstream: on whenever set
                  {"PARCAGPU_RATE_LIMIT", "250"},
                  {"PARCAGPU_GRAPH_RATE_LIMIT", "30"}}}
                 .parse(&w);
  EXPECT_TRUE(w.empty()) << w[0].variable << " " << w[0].reason;
  EXPECT_TRUE(c.debug);
  EXPECT_EQ(c.eager_rate_limit, 250.0);
  EXPECT_EQ(c.graph_rate_limit, 30.0);
  // Upstream before its April 2026 rewrite: set, the rate limiter is off.
  for (const char *v : {"1", "", "true", "YES", "on"}) {
    w.clear();
    c = Env{{{"PARCAGPU_LIMITER_DISABLE", v}, {"PARCAGPU_RATE_LIMIT", "5"}}}.parse(&w);
    EXPECT_TRUE(w.empty()) << v;
    EXPECT_GE(c.eager_rate_limit, 1e9) << v;
    EXPECT_GE(c.graph_rate_limit, 1e9) << v;
  }
}

// PARCAGPU_LIMITER_DISABLE=0 says "not disabled" (issue 44): every boolean variable reads its
// value alike, as PARCAGPU_DEBUG does; a value that is no boolean is said and changes nothing.
TEST(Config, LimiterDisableIsABoolean) {
  for (const char *v : {"0", "false", "no", "off", "OFF"}) {
    std::vector<ConfigWarning> w;
    const Config c = Env{{{"PARCAGPU_LIMITER_DISABLE", v}, {"PARCAGPU_RATE_LIMIT", "5"}}}.parse(&w);
    EXPECT_TRUE(w.empty()) << v;
    EXPECT_EQ(c.eager_rate_limit, 5.0) << v;
    EXPECT_EQ(c.graph_rate_limit, 20.0) << v;
  }
  std::vector<ConfigWarning> w;
  const Config c = Env{{{"PARCAGPU_LIMITER_DISABLE", "maybe"}}}.parse(&w);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].variable, "PARCAGPU_LIMITER_DISABLE");
  EXPECT_NE(w[0].reason.find("not a boolean"), std::string::npos) << w[0].reason;
  EXPECT_EQ(c.eager_rate_limit, 100.0);
}

// Every boolean variable goes through one parser: the same words mean on and off for each, and
// the same unclear value gets the same warning.
TEST(Config, EveryBooleanVariableReadsAlike) {
  struct Case {
    const char *var;
    bool Config::*field;  // nullptr: read through the rate limits (PARCAGPU_LIMITER_DISABLE)
  };
  const Case cases[] = {{"PARCAGPU_DEBUG", &Config::debug},
                        {"PARCAGPU_PC_SAMPLING", &Config::pc_sampling},
                        {"PARCAGPU_PC_GRAPHS", &Config::pc_graphs},
                        {"PARCAGPU_PC_GRAPH_SHADOWS", &Config::pc_graph_shadows},
                        {"PARCAGPU_ACTIVITY_HOST_MEMORY", &Config::activity_host_memory},
                        {"PARCAGPU_LIMITER_DISABLE", nullptr}};
  for (const Case &k : cases) {
    auto read = [&](const char *value, std::vector<ConfigWarning> *w) {
      const Config c = Env{{{k.var, value}}}.parse(w);
      return k.field ? c.*k.field : c.eager_rate_limit >= 1e9;
    };
    for (const char *on : {"1", "true", "Yes", "ON"}) {
      std::vector<ConfigWarning> w;
      EXPECT_TRUE(read(on, &w)) << k.var << "=" << on;
      EXPECT_TRUE(w.empty()) << k.var << "=" << on;
    }
    for (const char *off : {"0", "false", "No", "OFF"}) {
      std::vector<ConfigWarning> w;
      EXPECT_FALSE(read(off, &w)) << k.var << "=" << off;
      EXPECT_TRUE(w.empty()) << k.var << "=" << off;
    }
    std::vector<ConfigWarning> w;
    read("2", &w);
    ASSERT_EQ(w.size(), 1u) << k.var;
    EXPECT_EQ(w[0].reason, "not a boolean (use 1/0, true/false, yes/no, on/off)") << k.var;
  }
}

TEST(Config, DebugValues) {
  for (const auto &[value, on] : std::vector<std::pair<const char *, bool>>{
           {"1", true}, {"yes", true}, {"", true}, {"0", false}, {"off", false}}) {
    std::vector<ConfigWarning> w;
    const Config c = Env{{{"PARCAGPU_DEBUG", value}}}.parse(&w);
    EXPECT_EQ(c.debug, on) << value;
    EXPECT_TRUE(w.empty()) << value;
  }
}

TEST(Config, SeveralProblemsAllReported) {
  std::vector<ConfigWarning> w;
  Config c = Env{{{"PARCAGPU_RATE_LIMIT", "x"},
                  {"PARCAGPU_GRAPH_RATE_LIMIT", "7"},
                  {"PARCAGPU_BOGUS", "1"},
                  {"PARCAGPU_DEBUG", "2"}}}
                 .parse(&w);
  EXPECT_EQ(w.size(), 3u);
  EXPECT_EQ(c.graph_rate_limit, 7.0);  // the valid one still applies
}

}  // namespace
}  // namespace parcagpu
