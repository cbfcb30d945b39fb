// PC sampling's totals (PcSampler::stats, logged at exit by the profiler). Written by PcEpisodes
// under its mutex; a plain value type.
#pragma once

#include <cstdint>

namespace parcagpu {

struct PcStats {
  uint64_t enables = 0, disables = 0;       // cuptiPCSamplingEnable/Disable calls that succeeded
  uint64_t episodes = 0, episodes_cut = 0;  // episodes; ... ended early at their launch budget
  uint64_t windows = 0, window_launches = 0;
  uint64_t window_ns = 0;                       // wall time inside windows
  uint64_t enabled_ns = 0;                      // wall time with PC sampling enabled (episodes)
  uint64_t disable_ns = 0, max_disable_ns = 0;  // inside cuptiPCSamplingDisable
  uint64_t drains = 0, batches = 0;             // drains, pc_sample_batch firings (paced)
  uint64_t records = 0, pairs = 0, samples = 0;
  uint64_t uncorrelated = 0;                    // records with correlationId 0
  uint64_t gpu_only = 0, gpu_only_samples = 0;  // of launches not announced: ID 0 (GPU-only)
  uint64_t unpublished = 0;                     // records drained with no consumer attached
  uint64_t unfired = 0;                         // records not queued: the queue was full
  uint64_t nonuser_samples = 0;                 // CUPTI's nonUsrKernelsTotalSamples
  uint64_t dropped_samples = 0;                 // CUPTI's droppedSamples
  uint64_t gate_timeouts = 0;                // work put off: other launches did not leave in time
  uint64_t ended_for_graphs = 0;             // episodes ended before a graph's first launch
  uint64_t ended_for_instantiations = 0;     // ... before a graph's instantiation
  uint64_t graphs_uploaded_enabled = 0;      // graphs first launched while PC sampling was on
  uint64_t graphs_instantiated_enabled = 0;  // graphs instantiated while PC sampling was on
  uint64_t learning_resumes = 0;             // episodes begun again after such an end
  uint64_t module_resumes = 0;               // ... by a module loaded between episodes
  uint64_t graphs_registered = 0;            // graphs whose kernels a shadow exec registered
  uint64_t graphs_not_registered = 0;        // ... put off (budget, GPU lock, gate) or failed
  uint64_t put_off_for_other_process = 0;    // enables put off: another process samples the GPU
  uint64_t contexts_without_lock = 0;        // kept off: their GPU's lock cannot be had
  uint32_t sampling_factor = 0;              // in force (read back), 0 = not configured yet
  bool failed = false;
};

}  // namespace parcagpu
