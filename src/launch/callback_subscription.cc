#include "launch/callback_subscription.h"

#include <string>

#include "base/config.h"
#include "base/cupti_api.h"
#include "base/log.h"

namespace parcagpu {
namespace {

RepeatedError g_enable_error("callbacks", "enabling or disabling launch callbacks failed");
RepeatedError g_nvtx_enable_error("nvtx", "enabling or disabling NVTX callbacks failed");

// What a failed cuptiSubscribe means, beyond the result's name.
const char *subscribe_failure_meaning(CUptiResult r) {
  switch (r) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "another CUPTI client is subscribed in this process (Nsight Systems or Compute, a "
             "profiler inside the application such as PyTorch's, or another CUPTI-based tool)";
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
      return "this libcupti cannot work with the CUDA driver in use (versions?)";
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return "profiling is restricted to administrators on this machine "
             "(NVreg_RestrictProfilingToAdminUsers)";
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
      return "CUPTI does not support this device or configuration";
    case CUPTI_ERROR_OUT_OF_MEMORY:
      return "CUPTI is out of memory";
    default:
      return "CUPTI refused the subscription";
  }
}

}  // namespace

bool CallbackSubscription::subscribe(CUpti_CallbackFunc callback, void *userdata) {
  const CUptiResult r = cupti_.cuptiSubscribe(&subscriber_, callback, userdata);
  if (r == CUPTI_SUCCESS) return true;
  report_error(r, "callbacks", "cuptiSubscribe failed: %s: %s; parcagpu stays inert",
               cupti_result_string(cupti_, r), subscribe_failure_meaning(r));
  subscriber_ = nullptr;
  return false;
}

bool CallbackSubscription::disabled(const SubscribedCallback &cb) const {
  for (const auto &d : config_.disabled_cbids)
    if (d.domain == cb.domain && d.cbid == cb.cbid) return true;
  return false;
}

bool CallbackSubscription::usable(const SubscribedCallback &cb) const {
  if (disabled(cb)) return false;
  // An older CUPTI refuses cbids newer than itself; its runtime has no such API either.
  if (callback_known_to(cb, cupti_.major)) return true;
  debug_log("not subscribing %s: new in CUDA %u, CUPTI is CUDA %d's", cb.name, cb.since_cuda,
            cupti_.major);
  return false;
}

std::vector<SubscribedCallback> CallbackSubscription::launch_cbids() const {
  // Driver launch cbids first, then the runtime ones: every runtime ENTER seen then nests a
  // driver call that is seen too. On the H100 a prototype that enabled runtime cbids first and
  // matched a claimed launch's EXIT by thread, cbid and correlation ID had windows that stayed
  // claimed for good (a runtime ENTER seen while its driver cbid was still off, whose EXIT never
  // matched); the library also abandons such a claim (LaunchCallbacks::on_enter and on_exit).
  std::vector<SubscribedCallback> out;
  for (CbDomain d : {CbDomain::Driver, CbDomain::Runtime})
    for (const auto &cb : kSubscribedCallbacks) {
      if (cb.domain != d || !is_launch_role(cb.role)) continue;
      if (disabled(cb)) {
        debug_log("not subscribing %s (PARCAGPU_DISABLE_CBIDS)", cb.name);
        continue;
      }
      if (usable(cb)) out.push_back(cb);
    }
  return out;
}

bool CallbackSubscription::enable_from_start() {
  // A failing cuptiEnableCallback fails for most cbids alike: the first failure is reported,
  // the rest go into one summary line.
  size_t attempted = 0, failed = 0;
  CUptiResult last_failure = CUPTI_SUCCESS;
  std::string failed_names;
  for (const auto &cb : kSubscribedCallbacks) {
    if (!enabled_from_start(cb.role) || !usable(cb)) continue;
    ++attempted;
    const CUptiResult r = cupti_.cuptiEnableCallback(
        1, subscriber_, static_cast<CUpti_CallbackDomain>(cb.domain), cb.cbid);
    if (r == CUPTI_SUCCESS) {
      from_start_.push_back(cb);
      continue;
    }
    if (failed++ == 0)
      report_error(r, "callbacks", "cuptiEnableCallback(%s) failed: %s", cb.name,
                   cupti_result_string(cupti_, r));
    last_failure = r;
    failed_names += (failed_names.empty() ? "" : " ") + std::string(cb.name);
  }
  if (attempted > 0 && from_start_.empty()) {
    report_error(last_failure, "callbacks",
                 "none of the %zu callbacks could be enabled; parcagpu stays inert", attempted);
    unsubscribe();  // leave CUPTI's one subscription to someone who can use it
    return false;
  }
  if (failed > 0)
    report_error(last_failure, "callbacks",
                 "cuptiEnableCallback failed for %zu of %zu callbacks; not collected: %s", failed,
                 attempted, failed_names.c_str());
  return true;
}

void CallbackSubscription::set_enabled(const std::vector<SubscribedCallback> &cbids,
                                       bool on) const {
  for (const auto &cb : cbids) {
    const CUptiResult res = cupti_.cuptiEnableCallback(
        on ? 1 : 0, subscriber_, static_cast<CUpti_CallbackDomain>(cb.domain), cb.cbid);
    if (res != CUPTI_SUCCESS)
      g_enable_error.report(res,
                            "cuptiEnableCallback(%d, %s) failed: %s; launches of that path "
                            "may go unannounced",
                            on ? 1 : 0, cb.name, cupti_result_string(cupti_, res));
  }
}

void CallbackSubscription::set_nvtx_enabled(bool on) {
  if (!subscriber_ || on == nvtx_on_) return;
  nvtx_on_ = on;
  for (const NvtxCallback &cb : kNvtxCallbacks) {
    const CUptiResult res =
        cupti_.cuptiEnableCallback(on ? 1 : 0, subscriber_, CUPTI_CB_DOMAIN_NVTX, cb.cbid);
    if (res != CUPTI_SUCCESS)
      g_nvtx_enable_error.report(res,
                                 "cuptiEnableCallback(%d, NVTX %s) failed: %s; those NVTX "
                                 "calls are not collected",
                                 on ? 1 : 0, cb.name, cupti_result_string(cupti_, res));
  }
}

void CallbackSubscription::unsubscribe() {
  if (!subscriber_) return;
  set_nvtx_enabled(false);
  size_t failed = 0;
  CUptiResult first_failure = CUPTI_SUCCESS;
  const char *first_name = "";
  for (const auto &cb : from_start_) {
    const CUptiResult res = cupti_.cuptiEnableCallback(
        0, subscriber_, static_cast<CUpti_CallbackDomain>(cb.domain), cb.cbid);
    if (res != CUPTI_SUCCESS && failed++ == 0) {
      first_failure = res;
      first_name = cb.name;
    }
  }
  if (failed > 0)
    report_error(first_failure, "callbacks",
                 "disabling %zu of %zu callbacks failed (first: %s: %s)", failed,
                 from_start_.size(), first_name, cupti_result_string(cupti_, first_failure));
  from_start_.clear();
  const CUptiResult res = cupti_.cuptiUnsubscribe(subscriber_);
  if (res != CUPTI_SUCCESS)
    report_error(res, "callbacks", "cuptiUnsubscribe failed: %s", cupti_result_string(cupti_, res));
  subscriber_ = nullptr;
}

}  // namespace parcagpu
