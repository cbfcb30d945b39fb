// The launch path's own data: which kind of launch each cbid is (a table indexed directly: the
// launch path must not search kSubscribedCallbacks), and one application thread's launch as
// LaunchCallbacks sees it (the gate's view, launch_gate.h, and what was decided for the
// outermost launch call in flight). LaunchCallbacks keeps a ThreadLaunch per thread in
// initial-exec TLS (launch_callbacks.cc) and hands it to the announced launches' work
// (AnnouncedLaunches) and to the resource callbacks (ResourceCallbacks: stream capture).
#pragma once

#include <cstdint>

#include "base/usdt.h"
#include "launch/launch_gate.h"
#include "parcagpu/cbid_table.h"

namespace parcagpu {

// Role of each launch cbid, indexed directly: the launch path must not search the table.
// 0 = not a launch callback, 1 + its kind (kEagerRole, kGraphRole) otherwise, with
// kMemoryLaunchBit for a copy or fill (an eager launch to the gate, followed only while
// memory_batch has a consumer: cbid_table.h; an announced one's call is timed,
// AnnouncedLaunches).
constexpr uint32_t kMaxCbid = 1024;
constexpr uint8_t kMemoryLaunchBit = 0x80;
struct RoleIndex {
  uint8_t driver[kMaxCbid] = {};
  uint8_t runtime[kMaxCbid] = {};
};
constexpr RoleIndex make_role_index() {
  RoleIndex idx;
  for (const auto &cb : kSubscribedCallbacks) {
    if (!is_launch_role(cb.role)) continue;
    const uint8_t v = (1 + (cb.role == CbRole::GraphLaunch ? kGraphRole : kEagerRole)) |
                      (cb.role == CbRole::MemoryLaunch ? kMemoryLaunchBit : 0);
    if (cb.domain == CbDomain::Driver) idx.driver[cb.cbid] = v;
    if (cb.domain == CbDomain::Runtime) idx.runtime[cb.cbid] = v;
  }
  return idx;
}
constexpr RoleIndex kRoles = make_role_index();
static_assert(kRoles.driver[514] == 1 + kGraphRole && kRoles.runtime[211] == 1 + kEagerRole);
static_assert(kRoles.runtime[31] == ((1 + kEagerRole) | kMemoryLaunchBit));

inline uint8_t role_of(CbDomain domain, uint32_t cbid) {
  if (cbid >= kMaxCbid) return 0;
  return domain == CbDomain::Driver ? kRoles.driver[cbid] : kRoles.runtime[cbid];
}

// role_of for the launch path's ENTER: a copy or fill is a launch (an eager one) only while
// memory_batch has a consumer (cbid_table.h, CbRole::MemoryLaunch); else kNotFollowed.
constexpr uint8_t kNotFollowed = 0xff;
inline uint8_t followed_role(CbDomain domain, uint32_t cbid) {
  const uint8_t v = role_of(domain, cbid);
  if (__builtin_expect(!(v & kMemoryLaunchBit), 1)) return v;
  return usdt::memory_batch_consumers() != 0 ? v & ~kMemoryLaunchBit : kNotFollowed;
}

// What this thread is doing, as far as the callbacks it received tell. Trivially constructible
// and initial-exec TLS: no guard, no __tls_get_addr on the launch path.
struct ThreadLaunch {
  // The outermost launch call in flight (announced or not), this thread's nesting knowledge and
  // its coin (launch_gate.h).
  GateThread g;
  bool announce;
  bool captured;        // a graph node was created inside it: recorded by stream capture, not run
  bool holds_activity;  // announced and counted in by ActivityCollector::launch_begin: owes its
                        // launch_end
  // A suspect driver call (see clean_epoch) counted at PC sampling's gate, released at its EXIT.
  bool gated;
  uint32_t gated_corr;
  uint32_t capture_graph_id;
  uint64_t capture_node_id;
  // An unannounced launch of a graph while conditional execs live: kernel activity's recording
  // word at its ENTER, and whether it was noted then (announced_launches.cc).
  bool conditional_watched;
  bool conditional_noted;
  uint64_t recording_at_enter;
  uint64_t conditional_ts;  // CUPTI's clock at its ENTER
  // An announced copy or fill: CLOCK_MONOTONIC at its ENTER, for the time its call holds the
  // thread; 0 for any other launch.
  uint64_t entered_ns;
};

}  // namespace parcagpu
