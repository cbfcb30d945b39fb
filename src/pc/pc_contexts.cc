// The contexts PC sampling has met. See pc_contexts.h.
#include "pc/pc_contexts.h"

#include <algorithm>

#include "parcagpu/abi.h"
#include "pc/pc_step.h"

namespace parcagpu {
namespace {

// Records per Get Data: one pc_sample_batch firing each.
constexpr size_t kBatch = PARCAGPU_PC_SAMPLE_BATCH_MAX;

}  // namespace

PcContext::PcContext(const CuptiApi &cupti, CUcontext c) : ctx(c), session(cupti, c, kBatch) {}

PcContexts::PcContexts(const CuptiApi &cupti, const CudaApi *cuda, const Config &config)
    : cupti_(cupti), gpu_locks_(cupti, cuda, config) {}

PcContext *PcContexts::find(CUcontext ctx) {
  for (auto &c : contexts_)
    if (c->ctx == ctx) return c.get();
  return nullptr;
}

PcContext &PcContexts::find_or_add(CUcontext ctx) {
  if (PcContext *c = find(ctx)) return *c;
  contexts_.push_back(std::make_unique<PcContext>(cupti_, ctx));
  return *contexts_.back();
}

void PcContexts::remove(PcContext *c) {
  if (episode_ == c) episode_ = nullptr;
  contexts_.erase(std::remove_if(contexts_.begin(), contexts_.end(),
                                 [c](const std::unique_ptr<PcContext> &p) { return p.get() == c; }),
                  contexts_.end());
}

bool PcContexts::any_enabled() const {
  for (const auto &c : contexts_)
    if (c->enabled) return true;
  return false;
}

void PcContexts::oldest_other_windows(const PcContext *here, uint64_t &oldest,
                                      uint64_t &oldest_enabled) const {
  oldest = oldest_enabled = kNoOtherContext;
  for (const auto &o : contexts_) {
    if (o.get() == here) continue;
    oldest = std::min(oldest, o->last_window);
    if (o->enabled) oldest_enabled = std::min(oldest_enabled, o->last_window);
  }
}

}  // namespace parcagpu
