// A graph's kernels registered with PC sampling without registering the application's exec
// (docs/pc-sampling.md P32): an exec of the library's own, instantiated from the same graph,
// uploaded on a stream of the library's, waited for and destroyed. PcEpisodes::register_graph
// calls it with PC sampling enabled on the context and kernel activity held off (P33).
#pragma once

#include <cuda.h>

#include "pc/pc_forward.h"

namespace parcagpu {

// True if uploaded. `stream`: the context's stream for these uploads (non-blocking), made at
// first use. The calls are the library's own (OwnCudaCalls), with this thread's stream-capture
// mode relaxed meanwhile.
bool upload_shadow_exec(const CudaApi &cuda, CUgraph graph, CUstream &stream);

}  // namespace parcagpu
