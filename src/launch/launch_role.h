// What the application threads' launch path (LaunchCallbacks, AnnouncedLaunches) and the
// watcher's side (LaunchSwitch) share: the launch callbacks' one role (every launch cbid, eager and
// graph: one epoch, one phase, one coin, launch_gate.h) and their totals. LaunchCallbacks holds
// both by value, so the launch path reaches them at a fixed offset from its `this`, no pointer
// between; the others hold references.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/rate_gate.h"
#include "launch/launch_gate.h"
#include "launch/role_state.h"
#include "launch/subscription_plan.h"

namespace parcagpu {

struct LaunchStats {
  std::atomic<uint64_t> announced_eager{0};
  std::atomic<uint64_t> announced_graph{0};
  std::atomic<uint64_t> rate_limited{0};      // picked, over the safety cap
  std::atomic<uint64_t> learning{0};          // picked while the launch rate was learned
  std::atomic<uint64_t> captured{0};          // launches recorded into a graph: not executions
  std::atomic<uint64_t> left_unannounced{0};  // admitted, but the consumer left before EXIT
  std::atomic<uint64_t> abandoned{0};         // admitted, EXIT not as expected: not announced
  std::atomic<uint64_t> callback_errors{0};
};

// Written by the watcher (the phase, the coin's mean, rate_learned, pc_needs_launches) and by
// admitted launches (inflight); read by every launch.
struct LaunchRole {
  // Epoch and phase in one atomic word (role_state.h says why). The epoch grows each time the
  // cbids are all enabled.
  alignas(64) AtomicRoleState state;
  std::atomic<int32_t> inflight{0};  // announced launches inside their API call
  // The epoch begun while starting (LaunchSwitch::set_starting): clean, in launch_gate.h's terms.
  std::atomic<uint64_t> clean_epoch{0};
  LaunchCoin coin;  // which launches are picked (launch_gate.h)
  // The coin's mean meets the limits (false while the launch rate is learned, kLearnNs).
  std::atomic<bool> rate_learned{false};
  // PC sampling wants or needs every launch (the watcher sets it, the launch path reads it).
  std::atomic<bool> pc_needs_launches{false};
  // A cap on every pick, whatever its kind (safety_cap_rate).
  RateGate safety_cap;
  const double limit[kGateRoles];  // each kind's rate limit (announced launches per second)

  LaunchRole(double eager_limit, double graph_limit, uint64_t tolerance_ns)
      : safety_cap{safety_cap_rate(eager_limit, graph_limit), tolerance_ns},
        limit{eager_limit, graph_limit} {
    coin.set_mean(1);  // learned first where the limits are low (subscription_plan.h)
  }
};

}  // namespace parcagpu
