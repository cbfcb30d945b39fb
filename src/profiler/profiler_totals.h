// The debug lines of each part's totals (PARCAGPU_DEBUG): Profiler::log_stats calls them.
#pragma once

#include <cstdint>

#include "trackers/graph_completion.h"

namespace parcagpu {

struct LaunchStats;
struct ActivityStats;
struct PcStats;
struct CubinStats;
struct GraphStats;
struct TrackerStats;
struct BlockedCopiesStats;
struct NvtxStats;

void log_launch_totals(const LaunchStats &l, const ActivityStats &a);
void log_pc_totals(const PcStats &p, const CubinStats &cs);
void log_graph_totals(const GraphStats &g, const TrackerStats &t);
void log_blocked_copies_totals(const BlockedCopiesStats &b);
void log_nvtx_totals(const NvtxStats &n);
void log_completion_totals(const GraphCompletion::Stats &c, uint64_t grace_ns);

}  // namespace parcagpu
