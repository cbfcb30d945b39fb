// PcGpuLocks past what pc_contexts_test.cc covers (a GPU another process samples): the lock file
// is named by the GPU's PCI address when the driver tells it, and a lock that cannot be had at all
// keeps that context's GPU off for good: said once, counted per context, never asked again.
#include "pc/pc_gpu_locks.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "base/config.h"
#include "base/cupti_api.h"
#include "fake_pc_cupti.h"
#include "pc/pc_device_lock.h"
#include "pc/pc_stats.h"
#include "repeated_errors.h"
#include "temp_dir.h"

namespace parcagpu::fake_pc {
namespace {

int g_ordinal_asked = -1;
bool g_bus_fails = false;
CUresult fake_device_get(CUdevice *dev, int ordinal) {
  g_ordinal_asked = ordinal;
  *dev = 100 + ordinal;
  return CUDA_SUCCESS;
}
CUresult fake_attribute(int *value, CUdevice_attribute attr, CUdevice dev) {
  EXPECT_EQ(dev, 102);  // the device of cuptiGetDeviceId's ordinal (fake_device: 2)
  if (attr == CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID) *value = 1;
  if (attr == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) {
    *value = 0x3b;
    if (g_bus_fails) return CUDA_ERROR_INVALID_VALUE;
  }
  if (attr == CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID) *value = 0x1;
  return CUDA_SUCCESS;
}

CUcontext ctx(int i) { return reinterpret_cast<CUcontext>(uintptr_t{0x5000} + 0x10 * i); }

class PcGpuLocksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    install(api_, fake_);
    cuda_.cuDeviceGet = &fake_device_get;
    cuda_.cuDeviceGetAttribute = &fake_attribute;
    g_bus_fails = false;
    config_.pc_lock_dir = dir_;
  }
  void TearDown() override { g_fake = nullptr; }
  FakePc fake_;
  CuptiApi api_;
  CudaApi cuda_{};
  Config config_;
  TempDir temp_{"gpu-locks"};
  const std::string dir_ = temp_.path();
};

TEST_F(PcGpuLocksTest, TheLockIsNamedByThePciAddressOfTheContextsGpu) {
  PcGpuLocks locks(api_, &cuda_, config_);
  PcGpuLock lock;
  PcStats stats;
  ASSERT_TRUE(locks.acquire(lock, ctx(0), 1, stats));
  EXPECT_EQ(g_ordinal_asked, 2);
  EXPECT_EQ(lock.gpu, "0001:3b:01");
  PcDeviceLocks other(dir_);  // another process, the same GPU
  EXPECT_EQ(other.try_acquire("0001:3b:01"), PcDeviceLocks::Result::kBusy);
  EXPECT_EQ(other.try_acquire("any"), PcDeviceLocks::Result::kAcquired) << "not every GPU's";
  other.release("any");
  locks.release(lock);
  EXPECT_FALSE(lock.locked);
  EXPECT_EQ(other.try_acquire("0001:3b:01"), PcDeviceLocks::Result::kAcquired);
}

TEST_F(PcGpuLocksTest, AnAddressTheDriverCannotTellLocksAnyGpu) {
  g_bus_fails = true;
  PcGpuLocks locks(api_, &cuda_, config_);
  PcGpuLock lock;
  PcStats stats;
  ASSERT_TRUE(locks.acquire(lock, ctx(0), 1, stats));
  EXPECT_EQ(lock.gpu, "any");
}

TEST_F(PcGpuLocksTest, ALockThatCannotBeHadKeepsTheGpuOffSaidOnce) {
  config_.pc_lock_dir = dir_ + "/missing";
  PcGpuLocks locks(api_, nullptr, config_);
  PcGpuLock a, b;
  PcStats stats;
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(locks.acquire(a, ctx(0), 1, stats));
  EXPECT_FALSE(locks.acquire(b, ctx(1), 2, stats));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(stats.contexts_without_lock, 2u);
  EXPECT_EQ(stats.put_off_for_other_process, 0u) << "unavailable, not busy";
  EXPECT_EQ(lines_saying(err, "cannot be had"), 1) << err;
  EXPECT_NE(err.find(config_.pc_lock_dir), std::string::npos) << err;
  // Never asked again, however late: the directory appearing changes nothing for these.
  std::filesystem::create_directory(config_.pc_lock_dir);
  EXPECT_FALSE(locks.acquire(a, ctx(0), 1000 * PcGpuLocks::kOtherProcessRetryNs, stats));
  EXPECT_EQ(stats.contexts_without_lock, 2u);
  EXPECT_FALSE(a.locked);
}

}  // namespace
}  // namespace parcagpu::fake_pc
