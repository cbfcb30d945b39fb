// Copies and fills of the mock driver: cudaMemcpy*/cuMemcpy* and cudaMemset*/cuMemset* as real
// CUDA makes them (a runtime call over the driver call beneath it, or a driver call alone), each
// run on its stream's timeline for a time set by its bytes, a synchronous one blocking its caller
// until it has run; the mock CUPTI writes its memcpy / memset record if that kind was enabled
// inside the call (mockbridge::MemoryRun).
#include <cupti_activity.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <thread>

#include "cuda_mock_internal.h"
#include "mock_cuda.h"

namespace mockcuda {
namespace {

enum MemoryFlags : unsigned { kCopy = 0, kFill = 1, kAsync = 2, kPeer = 4 };

// The copy and fill APIs the mock offers: a runtime one names the driver call beneath it.
struct MemoryApi {
  uint32_t domain;
  uint32_t cbid;
  const char *name;
  uint32_t nested_driver_cbid;  // runtime APIs: the driver call beneath (0: none)
  const char *nested_driver_name;
  unsigned flags;                              // MemoryFlags
  bool fill() const { return flags & kFill; }  // a memset, else a memcpy
  bool async() const { return flags & kAsync; }
  bool peer() const { return flags & kPeer; }
};

// A runtime API (its CBID is its name and `version`) over the driver call `nested`; a driver API.
#define RUNTIME_MEMORY(api, version, nested, flags)                                                \
  MemoryApi {                                                                                      \
    kRt, CUPTI_RUNTIME_TRACE_CBID_##api##version, #api, CUPTI_DRIVER_TRACE_CBID_##nested, #nested, \
        flags                                                                                      \
  }
#define DRIVER_MEMORY(api, flags) \
  MemoryApi { kDrv, CUPTI_DRIVER_TRACE_CBID_##api, #api, 0, nullptr, flags }

constexpr MemoryApi kMemoryApis[] = {
    RUNTIME_MEMORY(cudaMemcpy, _v3020, cuMemcpy, kCopy),
    RUNTIME_MEMORY(cudaMemcpyAsync, _v3020, cuMemcpyAsync, kAsync),
    RUNTIME_MEMORY(cudaMemcpy2DAsync, _v3020, cuMemcpy2DAsync_v2, kAsync),
    RUNTIME_MEMORY(cudaMemcpy3D, _v3020, cuMemcpy3D_v2, kCopy),
    RUNTIME_MEMORY(cudaMemcpyPeer, _v4000, cuMemcpyPeer, kPeer),
    RUNTIME_MEMORY(cudaMemset, _v3020, cuMemsetD8_v2, kFill),
    RUNTIME_MEMORY(cudaMemsetAsync, _v3020, cuMemsetD8Async, kFill | kAsync),
    DRIVER_MEMORY(cuMemcpyHtoD_v2, kCopy),
    DRIVER_MEMORY(cuMemcpyDtoHAsync_v2, kAsync),
    DRIVER_MEMORY(cuMemcpyPeerAsync, kAsync | kPeer),
    DRIVER_MEMORY(cuMemsetD32Async, kFill | kAsync),
};
#undef RUNTIME_MEMORY
#undef DRIVER_MEMORY

const MemoryApi *find_memory_api(uint32_t domain, uint32_t cbid) {
  for (const MemoryApi &a : kMemoryApis)
    if (a.domain == domain && a.cbid == cbid) return &a;
  return nullptr;
}

// MOCK_CUDA_SYNC_COPY_NS: a synchronous copy or fill holds its caller at least this long (as a
// large copy or a busy stream would), so that a test can compare the blocked time a consumer
// shows with what the mock blocked (mock_cuda_memory_last_blocked_ns). 0: until it has run.
uint64_t sync_copy_hold_ns() {
  static const uint64_t ns = [] {
    const char *v = std::getenv("MOCK_CUDA_SYNC_COPY_NS");
    return v ? std::strtoull(v, nullptr, 10) : 0ull;
  }();
  return ns;
}

// How long this thread's last copy or fill blocked it (0 for an asynchronous one).
thread_local uint64_t t_last_blocked_ns = 0;

// A synchronous copy or fill returns once it has run (and MOCK_CUDA_SYNC_COPY_NS has passed):
// the caller is blocked meanwhile. Returns how long, as the mock's clock saw it.
uint64_t block_caller(const mockbridge::MemoryRun &run) {
  const uint64_t from = mockbridge::now_ns();
  const uint64_t until = std::max(run.end, from + sync_copy_hold_ns());
  uint64_t now = from;
  while (now < until) {
    std::this_thread::yield();
    now = mockbridge::now_ns();
  }
  return now - from;
}

// A plausible copy time: a microsecond of latency and 10 GB/s (0.1 ns a byte).
uint64_t memory_duration_ns(uint64_t bytes) { return 1000 + bytes / 10; }

// The copy's place on its stream's timeline, after what is queued there.
void plan(CUstream_st *st, mockbridge::MemoryRun *run) {
  const uint64_t duration = memory_duration_ns(run->bytes);
  const uint64_t ready = mockbridge::now_ns() + 1000;
  uint64_t busy = st->busy_until.load(std::memory_order_relaxed);
  do {
    run->start = std::max(ready, busy);
  } while (!st->busy_until.compare_exchange_weak(busy, run->start + duration,
                                                 std::memory_order_relaxed));
  run->end = run->start + duration;
}

void fill_run(const MemoryApi &api, uint64_t bytes, uint32_t copy_kind, bool pageable,
              CUctx_st *ctx, CUstream_st *st, mockbridge::MemoryRun *run) {
  *run = {};
  run->bytes = bytes;
  run->kind = api.fill()   ? CUPTI_ACTIVITY_KIND_MEMSET
              : api.peer() ? CUPTI_ACTIVITY_KIND_MEMCPY2
                           : CUPTI_ACTIVITY_KIND_MEMCPY;
  const uint32_t peer_kind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  run->copy_kind = static_cast<uint8_t>(api.fill() ? 0u : api.peer() ? peer_kind : copy_kind);
  run->src_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  run->dst_kind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  const uint8_t host = pageable ? CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE
                                : CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  if (run->copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD) run->src_kind = host;
  if (run->copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH) run->dst_kind = host;
  run->flags = api.async() ? 1 : 0;
  run->device_id = static_cast<uint32_t>(ctx->device);
  run->peer_device_id = api.peer() ? run->device_id + 1 : run->device_id;
  run->context_id = ctx->id;
  run->stream_id = st->id;
}

}  // namespace
}  // namespace mockcuda

using namespace mockcuda;

extern "C" {

CUresult mock_cuda_memory(uint32_t domain, uint32_t cbid, uint64_t bytes, uint32_t copy_kind,
                          CUstream stream) {
  return mock_cuda_memory_host(domain, cbid, bytes, copy_kind, 0, stream);
}

CUresult mock_cuda_memory_host(uint32_t domain, uint32_t cbid, uint64_t bytes, uint32_t copy_kind,
                               int pageable, CUstream stream) {
  const MemoryApi *api = find_memory_api(domain, cbid);
  if (!api) return CUDA_ERROR_INVALID_VALUE;
  ensure_initialized();
  CUstream_st *st = resolve_stream(current_context(), stream);
  if (!st) return CUDA_ERROR_INVALID_HANDLE;
  CUctx_st *ctx = st->context;
  mockbridge::MemoryRun run;
  fill_run(*api, bytes, copy_kind, pageable != 0, ctx, st, &run);
  {
    int outer_rc = 0, inner_rc = 0;
    ApiScope outer(static_cast<CUpti_CallbackDomain>(api->domain), api->cbid, api->name, nullptr, nullptr, ctx, &outer_rc);
    std::optional<ApiScope> inner;
    if (api->nested_driver_cbid)
      inner.emplace(kDrv, api->nested_driver_cbid, api->nested_driver_name, nullptr, nullptr, ctx,
                    &inner_rc);
    const mockbridge::CuptiHooks *h = hooks();
    run.collect = h && h->activity_kind_enabled(ctx->id, run.kind);
    run.correlation_id = outer.correlation_id();
    plan(st, &run);
    // An "Async" copy to or from pageable host memory waits as a synchronous one does (CUDA's API
    // synchronization behavior: a DtoH one returns once the copy has completed).
    const bool waits = !api->async() || (pageable && !api->fill());
    t_last_blocked_ns = waits ? block_caller(run) : 0;
  }
  if (const mockbridge::CuptiHooks *h = hooks()) h->memory_ran(&run);
  return CUDA_SUCCESS;
}

const char *mock_cuda_memory_api_name(uint32_t domain, uint32_t cbid) {
  const MemoryApi *api = find_memory_api(domain, cbid);
  return api ? api->name : nullptr;
}

uint64_t mock_cuda_memory_duration_ns(uint64_t bytes) { return memory_duration_ns(bytes); }

uint64_t mock_cuda_memory_last_blocked_ns(void) { return t_last_blocked_ns; }

}  // extern "C"
