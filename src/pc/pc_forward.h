// The names of PC sampling's parts (and of what they are given), declared once for the headers
// that only refer to them, as <iosfwd> does for streams: pc_episodes.h, pc_metadata.h,
// pc_publish.h and pc_sampling.h include this; their .cc files include what they use.
#pragma once

#include <cstdint>

namespace parcagpu {

struct Config;                  // config.h
struct CudaApi;                 // cupti_api.h
struct CuptiApi;                // cupti_api.h
class CubinRegistry;            // cubin_registry.h
class FunctionNames;            // pc_records.h
class KernelActivityControl;    // subsystem_links.h
struct PcContext;               // pc_contexts.h
class PcContexts;               // pc_contexts.h
class PcContextSwitch;          // pc_context_switch.h
class PcCoverage;               // pc_coverage.h
class PcEpisodes;               // pc_episodes.h
class PcEpisodeSteps;           // pc_episode_steps.h
class PcLaunchGate;             // pc_launch_gate.h
struct PcLaunchState;           // pc_launch_state.h
class PcMetadata;               // pc_metadata.h
class PcPublisher;              // pc_publish.h
class PcRecordBuffer;           // pc_records.h
struct PcResult;                // pc_session.h
class PcScheduler;              // pc_scheduler.h
class PcSession;                // pc_session.h
struct PcStats;                 // pc_stats.h
struct PcStepEvent;             // pc_step.h
struct PcStepState;             // pc_step.h
enum class PcAction : uint8_t;  // pc_step.h
class StallReasonTable;         // pc_records.h

}  // namespace parcagpu
