#include "activity/extra_kinds.h"

#include "base/log.h"

namespace parcagpu {
namespace {

RepeatedError g_extra_failed("activity",
                             "cuptiActivityEnable/Disable of a copy or fill kind failed");

}  // namespace

void ExtraKinds::want(KindMask wanted, bool on) {
  wanted_ = wanted & ~family_kinds(RecordFamily::Kernel);
  follow(on);
}

void ExtraKinds::apply(KindMask target) {
  for (size_t i = 0; i < sizeof kActivityKinds / sizeof kActivityKinds[0]; ++i) {
    const KindMask bit = kind_bit(i);
    if ((target & bit) == (on_ & bit)) continue;
    const bool on = (target & bit) != 0;
    const CUpti_ActivityKind kind = kActivityKinds[i].kind;
    const CUptiResult r = on ? cupti_.cuptiActivityEnable(kind) : cupti_.cuptiActivityDisable(kind);
    if (r != CUPTI_SUCCESS) {
      g_extra_failed.report(r, "cuptiActivity%s(%s) failed: %s; copies and fills of that kind %s",
                            on ? "Enable" : "Disable", kActivityKinds[i].name,
                            cupti_result_string(cupti_, r),
                            on ? "are not collected" : "stay collected");
      continue;
    }
    on_ = on ? on_ | bit : on_ & ~bit;
  }
}

}  // namespace parcagpu
