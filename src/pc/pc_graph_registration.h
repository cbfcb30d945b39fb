// PC sampling and the application's CUDA graphs. A graph step taken while PC sampling is enabled
// registers the graph with it, and its launches pay for that ever after (P21, P26): unless
// PARCAGPU_PC_GRAPHS, the episode under way ends first (keep_out). A graph's kernels give PC
// records only if first used while PC sampling was enabled (P19, P20): before the application
// instantiates a graph, an exec of the library's own registers them (register_graph, P32). Under
// PcEpisodes' mutex.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "base/rate_gate.h"
#include "pc/pc_forward.h"

namespace parcagpu {

class PcGraphRegistration {
 public:
  enum class GraphStep : uint8_t { kFirstLaunch, kInstantiation };

  PcGraphRegistration(const CudaApi *cuda, const Config &config, KernelActivityControl *activity,
                      PcLaunchState &state, PcContexts &contexts, PcContextSwitch &context_switch,
                      PcEpisodeSteps &steps, PcStats &stats, uint64_t (*clock)());

  // Ends every episode before a graph step that would register the graph with PC sampling
  // (PARCAGPU_PC_GRAPHS=0); where it cannot (inside a launch call, or other threads' launches
  // did not leave in time), the graph goes in with PC sampling on. Counted either way.
  void keep_out(GraphStep step, bool inside_launch);
  // Before the application instantiates `graph` on ctx (after keep_out): registers the graph's
  // kernels with PC sampling without registering the application's exec. An exec uploaded or
  // instantiated while PC sampling is enabled pays about a microsecond per kernel on every later
  // launch (P21, P30). So PC sampling is enabled briefly, an exec of the library's own is
  // instantiated from the same graph, uploaded and destroyed, and PC sampling disabled again:
  // the application's exec, instantiated and uploaded after that, pays nothing per launch, and
  // gives records where the graph was captured before PC sampling was first enabled (P32;
  // PARCAGPU_PC_GRAPH_SHADOWS, off by default). Budgeted (kGraphRegistrationsPerSecond); put off
  // while another process samples the GPU or launches do not leave in time (counted).
  void register_graph(CUgraph graph, CUcontext ctx);

 private:
  const CudaApi *const cuda_;
  const Config &config_;
  KernelActivityControl *const activity_;
  PcLaunchState &state_;
  PcContexts &contexts_;
  PcContextSwitch &switch_;
  PcEpisodeSteps &steps_;
  PcStats &stats_;
  uint64_t (*const clock_)();
  // Graph registrations: kGraphRegistrationsPerSecond after a burst of kGraphRegistrationBurst.
  RateGate registrations_;
};

}  // namespace parcagpu
