// --scenario=copies: copies and fills (cudaMemcpy*, cuMemcpy*, cudaMemset*, cuMemset*), each
// from a call site of its own, between two kernel launches; prints what the mock GPU did, by call
// site, as one MOCKAPP_MEMORY line (count, bytes, GPU time, synchronous or not), for the tests to
// compare with what a consumer read (tests/integration/test_copies.py).
#include <cupti.h>

#include <cstdio>
#include <map>
#include <string>

#include "mock_cuda.h"
#include "mockapp.h"

namespace mockapp {
namespace {

constexpr auto kRt = CUPTI_CB_DOMAIN_RUNTIME_API;
constexpr auto kDrv = CUPTI_CB_DOMAIN_DRIVER_API;
constexpr uint32_t kHtoD = 1, kDtoH = 2, kDtoD = 8;

struct Done {
  uint64_t count = 0, bytes = 0, gpu_ns = 0;
  uint64_t blocked_ns = 0;  // how long the mock held the calling thread (synchronous ones)
  bool sync = false;
};
std::map<std::string, Done> g_done;  // by call site

// sync: the call waits for its copy (a synchronous API, or pageable host memory).
void copy(const char *site, uint32_t domain, uint32_t cbid, uint64_t bytes, uint32_t copy_kind,
          bool sync, bool pageable = false) {
  check(mock_cuda_memory_host(domain, cbid, bytes, copy_kind, pageable ? 1 : 0, nullptr),
        mock_cuda_memory_api_name(domain, cbid));
  Done &d = g_done[site];
  ++d.count;
  d.bytes += bytes;
  d.gpu_ns += mock_cuda_memory_duration_ns(bytes);
  d.blocked_ns += mock_cuda_memory_last_blocked_ns();
  d.sync = sync;
}

// Keeps a call site's frame: no tail call into copy() after it.
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

// The call sites, in the order the scenario calls them: X(site, calls, domain, cbid, bytes,
// copy kind (0: a fill), synchronous?).
#define COPY_SITES(X)                                                                              \
  X(upload_weights, 3, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 1 << 20, kHtoD, true)       \
  X(read_back_async, 4, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 256 << 10, kDtoH,     \
    false)                                                                                         \
  X(copy_tile_2d, 1, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020, 96 << 10, kDtoD,       \
    false)                                                                                         \
  X(copy_volume_3d, 1, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020, 200 << 10, kDtoD, true)   \
  X(copy_to_peer, 1, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000, 128 << 10, kDtoD, true)   \
  X(zero_grads, 2, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, 512 << 10, 0, true)             \
  X(clear_async, 2, kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, 64 << 10, 0, false)       \
  X(driver_upload, 2, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, 32 << 10, kHtoD, true)        \
  X(driver_read_back, 1, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2, 48 << 10, kDtoH,      \
    false)                                                                                         \
  X(driver_peer_async, 1, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, 16 << 10, kDtoD, false) \
  X(driver_fill, 1, kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, 4 << 10, 0, false)

// One function per call site, named as it (noinline: each is a frame of its own).
#define DEFINE_SITE(site, calls, domain, cbid, bytes, copy_kind, sync)                   \
  __attribute__((noinline)) void site() {                                                \
    for (int i = 0; i < (calls); ++i) copy(#site, domain, cbid, bytes, copy_kind, sync); \
    KEEP_FRAME();                                                                        \
  }
COPY_SITES(DEFINE_SITE)
#undef DEFINE_SITE
// As PyTorch's .item(): a 4-byte DtoH cudaMemcpyAsync to pageable memory, which waits.
__attribute__((noinline)) void read_scalar() {
  copy("read_scalar", kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 4, kDtoH, true, true);
  KEEP_FRAME();
}

void print_done() {
  std::string line = "{";
  bool first = true;
  for (const auto &[site, d] : g_done) {
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "%s\"%s\": {\"count\": %llu, \"bytes\": %llu, \"gpu_ns\": %llu, "
                  "\"blocked_ns\": %llu, \"sync\": %s}",
                  first ? "" : ", ", site.c_str(), static_cast<unsigned long long>(d.count),
                  static_cast<unsigned long long>(d.bytes),
                  static_cast<unsigned long long>(d.gpu_ns),
                  static_cast<unsigned long long>(d.blocked_ns), d.sync ? "true" : "false");
    line += buf;
    first = false;
  }
  print_line("MOCKAPP_MEMORY", line + "}");
}

}  // namespace

void scenario_copies(Kernels &k) {
  check(mock_cuda_launch(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                         k.next("_Z5k_addPfi"), nullptr),
        "cudaLaunchKernel");
#define CALL_SITE(site, ...) site();
  COPY_SITES(CALL_SITE)
#undef CALL_SITE
  read_scalar();
  check(mock_cuda_launch(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                         k.next("_Z5k_mulPfi"), nullptr),
        "cudaLaunchKernel");
  print_done();
  g_done.clear();
}

}  // namespace mockapp
