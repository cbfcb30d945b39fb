// The contexts PC sampling has met (a launch that wanted samples, or a graph registration), each
// with its PcSession and its GPU's lock, and which of them the episode under way runs on. The
// registry the episode steps (PcEpisodeSteps), the enabling and disabling (PcContextSwitch) and
// graph registration (PcGraphRegistration) share; all under PcEpisodes' mutex.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "pc/pc_forward.h"
#include "pc/pc_gpu_locks.h"
#include "pc/pc_session.h"

namespace parcagpu {

struct PcContext {
  PcContext(const CuptiApi &cupti, CUcontext c);
  CUcontext ctx;
  uint32_t device = 0;
  bool enabled = false;
  bool ever_enabled = false;  // its kernels first launched since then give records (P19, P20)
  uint64_t last_window = 0;   // the number of the last window that ran on it (0: none yet)
  PcGpuLock gpu_lock;         // its GPU's lock file (PcGpuLocks)
  CUstream shadow_stream = nullptr;  // register_graph's uploads (non-blocking, made at first use)
  PcSession session;                 // the PC Sampling API calls on it
};

class PcContexts {
 public:
  using List = std::vector<std::unique_ptr<PcContext>>;

  PcContexts(const CuptiApi &cupti, const CudaApi *cuda, const Config &config);

  PcContext *find(CUcontext ctx);
  PcContext &find_or_add(CUcontext ctx);
  // Forgets c (its context is destroyed); the episode's context no more if it was.
  void remove(PcContext *c);
  List::iterator begin() { return contexts_.begin(); }
  List::iterator end() { return contexts_.end(); }
  bool any_enabled() const;
  // The oldest last window among the contexts other than `here`, and among the other enabled
  // ones (kNoOtherContext: none), for decide_pc_step (PcStepEvent).
  void oldest_other_windows(const PcContext *here, uint64_t &oldest,
                            uint64_t &oldest_enabled) const;

  // Where PC sampling's windows run now (nullptr: no episode under way).
  PcContext *episode() const { return episode_; }
  void set_episode(PcContext *c) { episode_ = c; }

  // c's GPU lock, taken before its Enable (false: not now, counted in stats), given back after
  // its Disable (P27).
  bool lock_gpu(PcContext &c, uint64_t now_ns, PcStats &stats) {
    return gpu_locks_.acquire(c.gpu_lock, c.ctx, now_ns, stats);
  }
  void unlock_gpu(PcContext &c) { gpu_locks_.release(c.gpu_lock); }

 private:
  const CuptiApi &cupti_;
  List contexts_;
  PcContext *episode_ = nullptr;
  PcGpuLocks gpu_locks_;  // which GPUs this process may sample (P27)
};

}  // namespace parcagpu
