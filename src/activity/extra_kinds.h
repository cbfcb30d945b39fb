// The activity kinds other than CONCURRENT_KERNEL (copies, fills: kActivityKinds), switched on and
// off with kernel activity while their consumers want them (ActivityToggle holds one).
#pragma once

#include "activity/activity_kinds.h"
#include "base/cupti_api.h"

namespace parcagpu {

// The kinds of kActivityKinds other than CONCURRENT_KERNEL (copies, fills): switched on and off
// with kernel activity, while their consumers want them. A failed toggle is said once, counted,
// and leaves that kind as CUPTI says it is.
class ExtraKinds {
 public:
  explicit ExtraKinds(const CuptiApi &cupti) : cupti_(cupti) {}
  // What the consumers want now (wanted_kinds), kernel activity being on (`on`) or not. Under
  // the switch's lock.
  void want(KindMask wanted, bool on);
  // Kernel activity went on or off: the wanted extra kinds follow it. Under the switch's lock.
  void follow(bool on) { apply(on ? wanted_ : 0); }

 private:
  void apply(KindMask target);
  const CuptiApi &cupti_;
  KindMask wanted_ = 0;
  KindMask on_ = 0;
};

}  // namespace parcagpu
