// The names of the launch callbacks' parts and of the parts they are built on, declared once for
// the headers that only refer to them, as pc_forward.h does for PC sampling (and <iosfwd> for
// streams): announced_launches.h, callback_subscription.h, launch_callbacks.h, launch_switch.h,
// resource_callbacks.h and profiler.h include this; their .cc files include what they use.
#pragma once

namespace parcagpu {

// The parts the profiler builds and hands to the launch callbacks (activity/, trackers/, pc/).
class ActivityCollector;
class CorrelationTracker;
class GraphCompletion;
class GraphTracker;
class PcSampler;
// The launch callbacks' own (launch_callbacks.h, launch_switch.h, launch_role.h, launch_path.h).
class LaunchCallbacks;
class LaunchSwitch;
struct LaunchRole;
struct LaunchStats;
struct ThreadLaunch;
// What every part is given (config.h, cupti_api.h).
struct Config;
struct CuptiApi;

}  // namespace parcagpu
