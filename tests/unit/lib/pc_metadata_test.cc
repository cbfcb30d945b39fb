// PcMetadata with recorders for its probes, a fake PC Sampling API table (fake_pc_cupti.h) and
// fake device queries: gpu_config once per device and the stall map once when PC sampling is
// configured; everything fired again when a consumer attaches (only to probes with consumers)
// and every 30 s on a fake clock; the stall reasons read once, a failed read keeping nothing; a
// failing device query and devices of another clock rate said once and counted, nothing thrown.
#include "pc/pc_metadata.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "fake_pc_cupti.h"
#include "pc/pc_records.h"
#include "pc/pc_session.h"
#include "repeated_errors.h"
#include "trackers/cubin_registry.h"

namespace parcagpu::fake_pc {
namespace {

constexpr uint64_t kSec = 1'000'000'000;
constexpr int kClockKhz = 1'980'000, kSms = 132;

// What the probes were handed, and how many consumers each has.
struct Fired {
  unsigned short stall_consumers = 0, config_consumers = 0, cubin_consumers = 0;
  std::vector<std::string> stall_maps;  // the name in slot 3 of each map fired
  std::vector<std::array<uint32_t, 4>> configs;  // device, factor, clock (kHz), SMs
  std::vector<uint64_t> cubins;                  // CRCs
  size_t total() const { return stall_maps.size() + configs.size() + cubins.size(); }
};
Fired *g_fired = nullptr;

unsigned short stall_consumers() { return g_fired->stall_consumers; }
unsigned short config_consumers() { return g_fired->config_consumers; }
unsigned short cubin_consumers() { return g_fired->cubin_consumers; }
void fire_stall_map(const char *names, uint32_t count) {
  EXPECT_EQ(count, uint32_t{PARCAGPU_STALL_REASON_MAX});
  g_fired->stall_maps.push_back(names + 3 * PARCAGPU_STALL_REASON_NAME_LEN);
}
void fire_config(uint32_t device, uint32_t factor, uint32_t clock_khz, uint32_t sms) {
  g_fired->configs.push_back({device, factor, clock_khz, sms});
}
void fire_cubin(uint64_t crc, const char *, uint64_t) { g_fired->cubins.push_back(crc); }

// Device facts: every device at kClockKhz (device 1 at half, with `other_clock`), kSms SMs.
struct Devices {
  bool fail = false;
  bool other_clock = false;
};
Devices *g_devices = nullptr;

CUresult CUDAAPI device_get(CUdevice *dev, int ordinal) {
  *dev = ordinal;
  return CUDA_SUCCESS;
}
CUresult CUDAAPI device_attribute(int *value, CUdevice_attribute attribute, CUdevice dev) {
  if (g_devices->fail) return CUDA_ERROR_INVALID_VALUE;
  const bool halved = g_devices->other_clock && dev == 1;
  *value = attribute == CU_DEVICE_ATTRIBUTE_CLOCK_RATE ? kClockKhz / (halved ? 2 : 1) : kSms;
  return CUDA_SUCCESS;
}
CUptiResult CUPTIAPI crc_from_size(CUpti_GetCubinCrcParams *p) {
  p->cubinCrc = 0xc0de0000ull + p->cubinSize;
  return CUPTI_SUCCESS;
}

class PcMetadataTest : public ::testing::Test {
 protected:
  // The stall reasons (FakePc's) read through a session, cubin CRCs, the devices' facts.
  PcMetadataTest() {
    api_.cuptiPCSamplingGetNumStallReasons = &fake_num;
    api_.cuptiPCSamplingGetStallReasons = &fake_reasons;
    api_.cuptiGetCubinCrc = &crc_from_size;
    cuda_.cuDeviceGet = &device_get;
    cuda_.cuDeviceGetAttribute = &device_attribute;
  }
  void SetUp() override {
    g_fired = &fired_;
    g_devices = &devices_;
    g_fake = &fake_;
  }
  void TearDown() override { g_fake = nullptr; }

  void consumers(unsigned short stall, unsigned short config, unsigned short cubin) {
    fired_.stall_consumers = stall;
    fired_.config_consumers = config;
    fired_.cubin_consumers = cubin;
  }
  // PC sampling configured on devices 0 and 1, factor 5, one cubin loaded; then nothing fired.
  void configured_with_a_cubin(PcMetadata &meta) {
    meta.cubins().on_module_loaded(cubin_.data(), cubin_.size());
    ASSERT_TRUE(meta.read_stall_reasons(session_).ok());
    meta.on_configured(0, 5);
    meta.on_configured(1, 5);
    fired_ = Fired{};
  }

  Fired fired_;
  Devices devices_;
  FakePc fake_;
  CuptiApi api_;
  CudaApi cuda_;
  PcSession session_{api_, reinterpret_cast<CUcontext>(0x99), 16};
  std::vector<char> cubin_ = std::vector<char>(100, 'c');
  const PcMetadataProbes probes_{{&stall_consumers, &fire_stall_map},
                                 {&config_consumers, &fire_config},
                                 {&cubin_consumers, &fire_cubin}};
};

const char kLongScoreboard[] = "smsp__pcsamp_warps_issue_stalled_long_scoreboard";

TEST_F(PcMetadataTest, EachDeviceConfiguredFiresItsGpuConfigOnceAndTheStallMapOnceInAll) {
  PcMetadata meta(api_, &cuda_, probes_);
  EXPECT_FALSE(meta.has_fired());
  ASSERT_TRUE(meta.read_stall_reasons(session_).ok());
  EXPECT_TRUE(meta.has_fired());
  meta.on_configured(0, 5);
  meta.on_configured(0, 5);  // a later episode on the same device
  meta.on_configured(1, 5);
  EXPECT_EQ(fired_.configs, (std::vector<std::array<uint32_t, 4>>{{0, 5, kClockKhz, kSms},
                                                                  {1, 5, kClockKhz, kSms}}));
  EXPECT_EQ(fired_.stall_maps, (std::vector<std::string>{kLongScoreboard}));
  EXPECT_TRUE(fired_.cubins.empty());
}

TEST_F(PcMetadataTest, AConsumerAttachingGetsEveryPieceFiredAgain) {
  PcMetadata meta(api_, &cuda_, probes_);
  meta.cubins().on_module_loaded(cubin_.data(), cubin_.size());
  EXPECT_EQ(fired_.cubins, (std::vector<uint64_t>{0xc0de0000ull + 100})) << "fired live";
  EXPECT_TRUE(meta.has_fired());
  configured_with_a_cubin(meta);
  consumers(1, 1, 1);
  meta.fire();
  EXPECT_EQ(fired_.cubins, (std::vector<uint64_t>{0xc0de0000ull + 100}));
  EXPECT_EQ(fired_.stall_maps, (std::vector<std::string>{kLongScoreboard}));
  EXPECT_EQ(fired_.configs, (std::vector<std::array<uint32_t, 4>>{{0, 5, kClockKhz, kSms},
                                                                  {1, 5, kClockKhz, kSms}}));
}

TEST_F(PcMetadataTest, OnlyProbesWithConsumersAreFiredAgain) {
  PcMetadata meta(api_, &cuda_, probes_);
  configured_with_a_cubin(meta);
  consumers(0, 0, 0);
  meta.fire();
  EXPECT_EQ(fired_.total(), 0u);
  consumers(0, 1, 0);
  meta.fire();
  EXPECT_EQ(fired_.configs.size(), 2u);
  EXPECT_EQ(fired_.total(), 2u);
}

TEST_F(PcMetadataTest, RefreshFiresAgainEveryThirtySecondsTheFirstCallOnlySetsTheClock) {
  PcMetadata meta(api_, &cuda_, probes_);
  configured_with_a_cubin(meta);
  consumers(1, 1, 1);
  const uint64_t t0 = 5 * kSec;
  meta.refresh(t0);
  EXPECT_EQ(fired_.total(), 0u) << "everything was just fired";
  meta.refresh(t0 + 30 * kSec - 1);
  EXPECT_EQ(fired_.total(), 0u);
  meta.refresh(t0 + 30 * kSec);
  EXPECT_EQ(fired_.total(), 4u) << "a cubin, the stall map, two gpu_configs";
  meta.refresh(t0 + 30 * kSec + 1);
  EXPECT_EQ(fired_.total(), 4u);
  meta.refresh(t0 + 60 * kSec);
  EXPECT_EQ(fired_.total(), 8u);
}

TEST_F(PcMetadataTest, TheStallReasonsAreReadOnceAFailedReadKeepsNothing) {
  PcMetadata meta(api_, &cuda_, probes_);
  fake_.failing = "GetNumStallReasons";
  PcResult r;
  EXPECT_NO_THROW(r = meta.read_stall_reasons(session_));
  EXPECT_EQ(r.result, CUPTI_ERROR_NOT_SUPPORTED);
  EXPECT_STREQ(r.call, "cuptiPCSamplingGetNumStallReasons");
  EXPECT_TRUE(meta.stall().empty());
  EXPECT_FALSE(meta.has_fired());
  consumers(1, 1, 1);
  meta.fire();
  EXPECT_TRUE(fired_.stall_maps.empty()) << "no table: no stall map";
  fake_.failing.clear();
  ASSERT_TRUE(meta.read_stall_reasons(session_).ok());
  EXPECT_EQ(meta.stall().collected(), (std::vector<uint32_t>{3, 7}));
  const size_t calls = fake_.calls.size();
  ASSERT_TRUE(meta.read_stall_reasons(session_).ok());
  EXPECT_EQ(fake_.calls.size(), calls) << "read once, kept";
}

TEST_F(PcMetadataTest, AFailingDeviceQueryIsSaidOnceCountedAndItsGpuConfigNotFired) {
  devices_.fail = true;
  PcMetadata meta(api_, &cuda_, probes_);
  ASSERT_TRUE(meta.read_stall_reasons(session_).ok());
  const uint64_t before = repeated_error_count("device queries failed");
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(meta.on_configured(0, 5));
  EXPECT_NO_THROW(meta.on_configured(1, 5));
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(fired_.configs.empty());
  EXPECT_EQ(fired_.stall_maps.size(), 1u) << "the stall map does not need the device's facts";
  EXPECT_EQ(repeated_error_count("device queries failed"), before + 2);
  EXPECT_EQ(lines_saying(said, "cuDeviceGet/cuDeviceGetAttribute failed"), before == 0 ? 1 : 0)
      << said;
}

TEST_F(PcMetadataTest, WithoutLibcudaNoGpuConfigIsFired) {
  PcMetadata meta(api_, nullptr, probes_);
  ASSERT_TRUE(meta.read_stall_reasons(session_).ok());
  meta.on_configured(0, 5);
  EXPECT_TRUE(fired_.configs.empty());
  EXPECT_EQ(fired_.stall_maps.size(), 1u);
}

TEST_F(PcMetadataTest, ADeviceOfAnotherClockRateIsSaidOnceAndBothConfigsFired) {
  devices_.other_clock = true;
  PcMetadata meta(api_, &cuda_, probes_);
  const uint64_t before = repeated_error_count("devices of another clock rate");
  testing::internal::CaptureStderr();
  meta.on_configured(0, 5);
  meta.on_configured(1, 5);
  meta.on_configured(2, 5);  // the first device's rate: nothing to say
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(fired_.configs, (std::vector<std::array<uint32_t, 4>>{{0, 5, kClockKhz, kSms},
                                                                  {1, 5, kClockKhz / 2, kSms},
                                                                  {2, 5, kClockKhz, kSms}}));
  EXPECT_EQ(repeated_error_count("devices of another clock rate"), before + 1);
  EXPECT_EQ(lines_saying(said, "the agent keeps one gpu_config per process"), before == 0 ? 1 : 0)
      << said;
}

}  // namespace
}  // namespace parcagpu::fake_pc
