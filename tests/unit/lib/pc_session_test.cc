// PcSession on a fake CUPTI table: the PC Sampling API calls it makes on its context, what
// configure sets and reads back, the stall-reason table, and which call a failure names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_pc_cupti.h"
#include "pc/pc_session.h"

namespace parcagpu::fake_pc {
namespace {

const CUpti_PCSamplingConfigurationInfo *find(CUpti_PCSamplingConfigurationAttributeType type) {
  for (const auto &i : g_fake->configured)
    if (i.attributeType == type) return &i;
  return nullptr;
}

class PcSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    install(api_, fake_);
  }
  void TearDown() override { g_fake = nullptr; }

  CUcontext ctx_ = reinterpret_cast<CUcontext>(0x1234);
  FakePc fake_;
  CuptiApi api_;
};

TEST_F(PcSessionTest, AnEpisodeMakesItsCallsOnItsContextInOrder) {
  PcSession s(api_, ctx_, 16);
  StallReasonTable table;
  ASSERT_TRUE(s.read_stall_reasons(&table).ok());
  ASSERT_TRUE(s.enable().ok());
  uint32_t factor = 0;
  ASSERT_TRUE(s.configure(table.collected(), {}, &factor).ok());
  ASSERT_TRUE(s.start().ok());
  ASSERT_TRUE(s.stop().ok());
  ASSERT_TRUE(s.get_data().ok());
  ASSERT_TRUE(s.disable().ok());
  EXPECT_EQ(s.device_id(), 2u);
  EXPECT_EQ(fake_.calls,
            (std::vector<std::string>{"GetNumStallReasons", "GetStallReasons", "Enable",
                                      "SetConfigurationAttribute", "GetConfigurationAttribute",
                                      "Start", "Stop", "GetData", "Disable", "GetDeviceId"}));
  for (CUcontext c : fake_.contexts) EXPECT_EQ(c, ctx_);
}

TEST_F(PcSessionTest, TheStallReasonTableHoldsTheReasonsProperOnly) {
  PcSession s(api_, ctx_, 16);
  StallReasonTable table;
  ASSERT_TRUE(s.read_stall_reasons(&table).ok());
  EXPECT_EQ(table.offered(), 4u);
  EXPECT_EQ(table.collected(), (std::vector<uint32_t>{3, 7}));
}

TEST_F(PcSessionTest, NoUsableStallReasonIsAFailure) {
  fake_.reasons = {{1, "smsp__pcsamp_sample_count"}, {2, "x_not_issued"}};
  PcSession s(api_, ctx_, 16);
  StallReasonTable table;
  const PcResult r = s.read_stall_reasons(&table);
  EXPECT_EQ(r.result, CUPTI_ERROR_NOT_SUPPORTED);
  EXPECT_STREQ(r.call, "cuptiPCSamplingGetStallReasons (no usable stall reason)");
}

TEST_F(PcSessionTest, ConfigureSetsTheModeTheBufferAndTheSettingsAndReadsTheFactorBack) {
  PcSession s(api_, ctx_, 16);
  uint32_t factor = 0;
  ASSERT_TRUE(s.configure({3, 7}, {12, 64}, &factor).ok());
  EXPECT_EQ(factor, 5u) << "the factor in force, as CUPTI reads it back, not the one asked for";
  EXPECT_EQ(fake_.configured_reasons, (std::vector<uint32_t>{3, 7}));
  auto *mode = find(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE);
  ASSERT_NE(mode, nullptr);
  EXPECT_EQ(mode->attributeData.collectionModeData.collectionMode,
            CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED);
  auto *start_stop = find(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL);
  ASSERT_NE(start_stop, nullptr);
  EXPECT_EQ(start_stop->attributeData.enableStartStopControlData.enableStartStopControl, 1u);
  auto *buffer = find(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER);
  ASSERT_NE(buffer, nullptr);
  EXPECT_EQ(buffer->attributeData.samplingDataBufferData.samplingDataBuffer,
            s.disable_buffer().data());
  auto *period = find(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD);
  ASSERT_NE(period, nullptr);
  EXPECT_EQ(period->attributeData.samplingPeriodData.samplingPeriod, 12u);
  auto *hw = find(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE);
  ASSERT_NE(hw, nullptr);
  EXPECT_EQ(hw->attributeData.hardwareBufferSizeData.hardwareBufferSize, size_t{64} << 20);
}

TEST_F(PcSessionTest, ConfigureLeavesCuptisDefaultsAlone) {
  PcSession s(api_, ctx_, 16);
  uint32_t factor = 0;
  ASSERT_TRUE(s.configure({3}, {}, &factor).ok());
  EXPECT_EQ(find(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD), nullptr);
  EXPECT_EQ(find(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE), nullptr);
  EXPECT_EQ(fake_.configured.size(), 4u);
}

TEST_F(PcSessionTest, AFailedConfigurationNamesTheAttributeCuptiRefused) {
  PcSession s(api_, ctx_, 16);
  fake_.failing = "SetConfigurationAttribute";
  fake_.failing_attribute = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE;
  uint32_t factor = 0;
  PcResult r = s.configure({3}, {0, 4096}, &factor);
  EXPECT_EQ(r.result, CUPTI_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(std::string(r.call),
            "cuptiPCSamplingSetConfigurationAttribute (attribute " +
                std::to_string(CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE) +
                ")");
  fake_.failing_attribute = -1;
  r = s.configure({3}, {}, &factor);
  EXPECT_STREQ(r.call, "cuptiPCSamplingSetConfigurationAttribute");
  EXPECT_EQ(fake_.calls.back(), "SetConfigurationAttribute") << "no read-back after a failure";
}

TEST_F(PcSessionTest, AFactorThatCannotBeReadBackIsAFailure) {
  PcSession s(api_, ctx_, 16);
  fake_.period_status_fails = true;
  uint32_t factor = 99;
  const PcResult r = s.configure({3}, {}, &factor);
  EXPECT_EQ(r.result, CUPTI_ERROR_INVALID_PARAMETER);
  EXPECT_STREQ(r.call, "cuptiPCSamplingGetConfigurationAttribute (sampling period)");
  EXPECT_EQ(factor, 99u);
}

TEST_F(PcSessionTest, GetDataFillsTheDataBufferAfresh) {
  PcSession s(api_, ctx_, 16);
  uint32_t factor = 0;
  ASSERT_TRUE(s.configure({3}, {}, &factor).ok());
  fake_.pcs = 3;
  ASSERT_TRUE(s.get_data().ok());
  EXPECT_EQ(fake_.data_seen, s.data_buffer().data());
  EXPECT_EQ(s.data_buffer().data()->totalNumPcs, 3u);
  EXPECT_EQ(s.data_buffer().data()->collectNumPcs, 16u);
  EXPECT_NE(s.data_buffer().data(), s.disable_buffer().data());
  fake_.pcs = 1;
  ASSERT_TRUE(s.get_data().ok());
  EXPECT_EQ(fake_.total_seen, 0u) << "the buffer is reset before each Get Data";
}

TEST_F(PcSessionTest, EachFailingCallIsNamed) {
  PcSession s(api_, ctx_, 16);
  uint32_t factor = 0;
  ASSERT_TRUE(s.configure({3}, {}, &factor).ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
    {"Enable", "cuptiPCSamplingEnable"}, {"Start", "cuptiPCSamplingStart"},
    {"Stop", "cuptiPCSamplingStop"},     {"GetData", "cuptiPCSamplingGetData"},
    {"Disable", "cuptiPCSamplingDisable"}, {"GetNumStallReasons", "cuptiPCSamplingGetNumStallReasons"},
    {"GetStallReasons", "cuptiPCSamplingGetStallReasons"}};
  for (const auto &[fake_name, call] : cases) {
    fake_.failing = fake_name;
    StallReasonTable table;
    PcResult r;
    if (fake_name == "Enable") r = s.enable();
    if (fake_name == "Start") r = s.start();
    if (fake_name == "Stop") r = s.stop();
    if (fake_name == "GetData") r = s.get_data();
    if (fake_name == "Disable") r = s.disable();
    if (fake_name.find("Stall") != std::string::npos) r = s.read_stall_reasons(&table);
    EXPECT_FALSE(r.ok()) << fake_name;
    EXPECT_EQ(r.result, CUPTI_ERROR_NOT_SUPPORTED) << fake_name;
    EXPECT_EQ(std::string(r.call), call);
  }
  fake_.failing = "GetDeviceId";
  EXPECT_EQ(s.device_id(), 0u);
}

}  // namespace
}  // namespace parcagpu::fake_pc
