// CallbackSubscription (callback_subscription.h) on the fake CUPTI table (fake_launch_cupti.h):
// the subscription, the callbacks enabled from process start (less the operator's disabled ones
// and those newer than the CUPTI in use), the launch cbids in their order, and every refusal of
// CUPTI's said (once where it can repeat) with the library going on or staying inert as it must.
#include "launch/callback_subscription.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/log.h"
#include "error_sites.h"
#include "fake_launch_cupti.h"

namespace parcagpu::fake_launch {
namespace {

void CUPTIAPI no_callback(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *) {}

class CallbackSubscriptionTest : public LaunchFixture {
 public:
  bool on(CbDomain d, uint32_t cbid) const {
    return fake_.enabled.count({static_cast<int>(d), cbid}) != 0;
  }
  static size_t lines(const std::string &s) { return std::count(s.begin(), s.end(), '\n'); }
  // cuptiEnableCallback refuses the resource callback `cbid` (both ways) with `r`.
  void refuse_resource(uint32_t cbid, CUptiResult r) {
    fake_.enable_result = [cbid, r](CbDomain d, uint32_t c, uint32_t) {
      return d == CbDomain::Resource && c == cbid ? r : CUPTI_SUCCESS;
    };
  }
  // `sub` subscribed and its callbacks from start enabled: whether it could, and what it said.
  std::pair<bool, std::string> start(CallbackSubscription &sub) {
    EXPECT_TRUE(sub.subscribe(&no_callback, nullptr));
    testing::internal::CaptureStderr();
    const bool enabled = sub.enable_from_start();
    return {enabled, testing::internal::GetCapturedStderr()};
  }
};

using testing_sites::site_count;

// Another CUPTI client in the process: said, with what it means; the library stays inert.
TEST_F(CallbackSubscriptionTest, ARefusedSubscriptionIsSaidWithWhatItMeans) {
  fake_.subscribe_result = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  CallbackSubscription sub(api_, config_);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(sub.subscribe(&no_callback, nullptr));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_FALSE(sub.subscribed());
  EXPECT_NE(err.find("cuptiSubscribe failed"), std::string::npos) << err;
  EXPECT_NE(err.find("another CUPTI client is subscribed"), std::string::npos) << err;
  EXPECT_EQ(lines(err), 1u) << err;
}

// From start: the resource callbacks, graph uploads and instantiations, none of the launch cbids;
// not one the operator disabled, nor one newer than the CUPTI in use.
TEST_F(CallbackSubscriptionTest, FromStartTheNonLaunchCallbacksLessDisabledAndNewer) {
  config_.disabled_cbids = {{CbDomain::Resource, CUPTI_CBID_RESOURCE_MODULE_LOADED}};
  api_.major = 12;
  CallbackSubscription sub(api_, config_);
  ASSERT_TRUE(start(sub).first);
  EXPECT_TRUE(on(CbDomain::Resource, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED));
  EXPECT_TRUE(on(CbDomain::Driver, 580)) << "cuGraphUpload";
  EXPECT_TRUE(on(CbDomain::Driver, 643)) << "cuGraphInstantiateWithFlags";
  EXPECT_FALSE(on(CbDomain::Resource, CUPTI_CBID_RESOURCE_MODULE_LOADED)) << "disabled";
  EXPECT_FALSE(on(CbDomain::Driver, 307)) << "a launch cbid";
  EXPECT_FALSE(on(CbDomain::Runtime, 211)) << "a launch cbid";
  EXPECT_EQ(sub.from_start().size(), fake_.enabled.size());
  // The launch cbids: driver ones first, none new in CUDA 13 on CUDA 12's CUPTI.
  const std::vector<SubscribedCallback> launch = sub.launch_cbids();
  ASSERT_FALSE(launch.empty());
  const auto first_runtime =
      std::find_if(launch.begin(), launch.end(),
                   [](const SubscribedCallback &cb) { return cb.domain == CbDomain::Runtime; });
  EXPECT_NE(first_runtime, launch.begin());
  EXPECT_TRUE(std::all_of(first_runtime, launch.end(), [](const SubscribedCallback &cb) {
    return cb.domain == CbDomain::Runtime;
  })) << "driver ones first";
  for (const auto &cb : launch) {
    EXPECT_TRUE(is_launch_role(cb.role)) << cb.name;
    EXPECT_NE(cb.cbid, 505u) << "__cudaLaunchKernel is new in CUDA 13";
  }
  api_.major = 13;
  const std::vector<SubscribedCallback> on13 = sub.launch_cbids();
  EXPECT_TRUE(std::any_of(on13.begin(), on13.end(), [](const SubscribedCallback &cb) {
    return cb.domain == CbDomain::Runtime && cb.cbid == 505;
  }));
}

// A disabled launch cbid is never toggled.
TEST_F(CallbackSubscriptionTest, ADisabledLaunchCbidIsNotToggled) {
  config_.disabled_cbids = {{CbDomain::Driver, 307}};
  CallbackSubscription sub(api_, config_);
  for (const auto &cb : sub.launch_cbids())
    EXPECT_FALSE(cb.domain == CbDomain::Driver && cb.cbid == 307);
}

// Some callbacks refused: said once with their names, the rest collected.
TEST_F(CallbackSubscriptionTest, SomeCallbacksRefusedAreNamedAndTheRestEnabled) {
  refuse_resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED, CUPTI_ERROR_NOT_SUPPORTED);
  CallbackSubscription sub(api_, config_);
  const auto [enabled, err] = start(sub);
  EXPECT_TRUE(enabled);
  EXPECT_TRUE(sub.subscribed());
  EXPECT_TRUE(on(CbDomain::Resource, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED));
  EXPECT_NE(err.find("cuptiEnableCallback(GRAPHNODE_CLONED) failed"), std::string::npos) << err;
  EXPECT_NE(err.find("not collected: GRAPHNODE_CLONED"), std::string::npos) << err;
  EXPECT_EQ(lines(err), 2u) << "the failure and the summary: " << err;
}

// Every one refused: the subscription is given back (CUPTI's one subscriber is left to someone
// who can use it), said, and the library stays inert.
TEST_F(CallbackSubscriptionTest, EveryCallbackRefusedGivesTheSubscriptionBack) {
  fake_.enable_result = [](CbDomain, uint32_t, uint32_t) { return CUPTI_ERROR_UNKNOWN; };
  CallbackSubscription sub(api_, config_);
  const auto [enabled, err] = start(sub);
  EXPECT_FALSE(enabled);
  EXPECT_FALSE(sub.subscribed());
  EXPECT_FALSE(fake_.subscribed);
  EXPECT_NE(err.find("parcagpu stays inert"), std::string::npos) << err;
}

// Toggling the launch cbids, which the watcher does again and again: a refusal is said once and
// counted per cbid.
TEST_F(CallbackSubscriptionTest, ARefusedToggleIsSaidOnceAndCounted) {
  CallbackSubscription sub(api_, config_);
  ASSERT_TRUE(sub.subscribe(&no_callback, nullptr));
  const std::vector<SubscribedCallback> launch = sub.launch_cbids();
  sub.set_enabled(launch, true);
  EXPECT_EQ(fake_.enabled.size(), launch.size());
  fake_.enable_result = [](CbDomain, uint32_t, uint32_t on) {
    return on ? CUPTI_SUCCESS : CUPTI_ERROR_UNKNOWN;
  };
  const uint64_t before = site_count("enabling or disabling launch callbacks failed");
  testing::internal::CaptureStderr();
  sub.set_enabled(launch, false);
  sub.set_enabled(launch, false);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(site_count("enabling or disabling launch callbacks failed"),
            before + 2 * launch.size());
  EXPECT_LE(lines(err), 1u) << err;
  testing_sites::expect_said_once(err, "may go unannounced", before);
  EXPECT_EQ(fake_.enabled.size(), launch.size()) << "what CUPTI refused stays as it was";
}

// Unsubscribing disables what was enabled from start, then unsubscribes; a refused disable is
// said with the first one's name and the subscription still goes.
TEST_F(CallbackSubscriptionTest, UnsubscribeDisablesTheCallbacksFromStartThenUnsubscribes) {
  CallbackSubscription sub(api_, config_);
  ASSERT_TRUE(start(sub).first);
  const size_t from_start = sub.from_start().size();
  fake_.calls.clear();
  refuse_resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, CUPTI_ERROR_UNKNOWN);
  testing::internal::CaptureStderr();
  sub.unsubscribe();
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_EQ(fake_.calls.size(), from_start + 1);
  EXPECT_EQ(fake_.calls.back(), "unsubscribe");
  EXPECT_EQ(std::count(fake_.calls.begin(), fake_.calls.end(), "disable"),
            static_cast<long>(from_start));
  EXPECT_FALSE(fake_.subscribed);
  EXPECT_FALSE(sub.subscribed());
  EXPECT_TRUE(sub.from_start().empty());
  EXPECT_EQ(fake_.enabled.size(), 1u) << "the refused one";
  EXPECT_NE(err.find("disabling 1 of"), std::string::npos) << err;
  EXPECT_NE(err.find("GRAPHEXEC_CREATED"), std::string::npos) << err;
  sub.unsubscribe();  // again: nothing
  EXPECT_EQ(fake_.calls.size(), from_start + 1);
}

}  // namespace
}  // namespace parcagpu::fake_launch
