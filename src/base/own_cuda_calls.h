// The library's own CUDA calls (PcEpisodes::register_graph instantiates, uploads and destroys a
// graph exec of its own) come back to it as CUPTI callbacks on the same thread. Those are not the
// application's: the launch callbacks let them pass untouched (a graph tracked, PC sampling's
// graph hooks taken again on their own mutex) while this is set.
#pragma once

namespace parcagpu {

inline thread_local bool t_in_own_cuda_calls = false;

// Sets t_in_own_cuda_calls for a scope.
class OwnCudaCalls {
 public:
  OwnCudaCalls() { t_in_own_cuda_calls = true; }
  ~OwnCudaCalls() { t_in_own_cuda_calls = false; }
  OwnCudaCalls(const OwnCudaCalls &) = delete;
  OwnCudaCalls &operator=(const OwnCudaCalls &) = delete;
};

}  // namespace parcagpu
