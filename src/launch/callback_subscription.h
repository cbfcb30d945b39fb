// The library's one CUPTI subscription: cuptiSubscribe, the callbacks enabled from process start
// (kSubscribedCallbacks' non-launch entries, less the operator's PARCAGPU_DISABLE_CBIDS and those
// newer than the CUPTI in use), the launch cbids to toggle, and enabling or disabling a list of
// cbids, with CUPTI's refusals said. No policy: LaunchSwitch decides when (subscription_plan.h)
// and holds the lock that keeps enabling and disabling from interleaving.
#pragma once

#include <cupti.h>

#include <vector>

#include "parcagpu/cbid_table.h"

namespace parcagpu {

struct Config;    // config.h
struct CuptiApi;  // cupti_api.h

class CallbackSubscription {
 public:
  CallbackSubscription(const CuptiApi &cupti, const Config &config)
      : cupti_(cupti), config_(config) {}

  // Subscribes `callback` (userdata as given). False, said, if CUPTI refused.
  bool subscribe(CUpti_CallbackFunc callback, void *userdata);
  // Disables the callbacks enabled from start, then unsubscribes (the launch cbids are the
  // caller's to disable first).
  void unsubscribe();
  bool subscribed() const { return subscriber_ != nullptr; }

  // Every launch cbid that may be toggled: driver ones first, then runtime ones (every runtime
  // ENTER seen then nests a driver call that is seen too), less the disabled and the unknown.
  std::vector<SubscribedCallback> launch_cbids() const;
  // cuptiEnableCallback(on) for each; a failure is said (once, then counted).
  void set_enabled(const std::vector<SubscribedCallback> &cbids, bool on) const;

  const std::vector<SubscribedCallback> &from_start() const { return from_start_; }

  // cuptiEnableCallback(on) for every NVTX cbid of kNvtxCallbacks (on only while an NVTX probe
  // has a consumer); a failure is said (once, then counted). unsubscribe turns them off.
  void set_nvtx_enabled(bool on);
  bool nvtx_enabled() const { return nvtx_on_; }

  // The callbacks needed from process start, after subscribe. False, said, if CUPTI refused every
  // one of them: then unsubscribed again (CUPTI's one subscription is left to someone who can use
  // it).
  bool enable_from_start();

 private:
  bool usable(const SubscribedCallback &cb) const;  // not disabled, known to this CUPTI
  bool disabled(const SubscribedCallback &cb) const;

  const CuptiApi &cupti_;
  const Config &config_;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<SubscribedCallback> from_start_;
  bool nvtx_on_ = false;
};

}  // namespace parcagpu
