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

// One call site per kind of copy or fill (noinline: each is a frame of its own).
__attribute__((noinline)) void upload_weights() {
  for (int i = 0; i < 3; ++i)
    copy("upload_weights", kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, 1 << 20, kHtoD, true);
  KEEP_FRAME();
}
__attribute__((noinline)) void read_back_async() {
  for (int i = 0; i < 4; ++i)
    copy("read_back_async", kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 256 << 10,
         kDtoH, false);
  KEEP_FRAME();
}
// As PyTorch's .item(): a 4-byte DtoH cudaMemcpyAsync to pageable memory, which waits.
__attribute__((noinline)) void read_scalar() {
  copy("read_scalar", kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 4, kDtoH, true, true);
  KEEP_FRAME();
}
__attribute__((noinline)) void copy_tile_2d() {
  copy("copy_tile_2d", kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020, 96 << 10, kDtoD,
       false);
  KEEP_FRAME();
}
__attribute__((noinline)) void copy_volume_3d() {
  copy("copy_volume_3d", kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020, 200 << 10, kDtoD,
       true);
  KEEP_FRAME();
}
__attribute__((noinline)) void copy_to_peer() {
  copy("copy_to_peer", kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000, 128 << 10, kDtoD,
       true);
  KEEP_FRAME();
}
__attribute__((noinline)) void zero_grads() {
  for (int i = 0; i < 2; ++i)
    copy("zero_grads", kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, 512 << 10, 0, true);
  KEEP_FRAME();
}
__attribute__((noinline)) void clear_async() {
  for (int i = 0; i < 2; ++i)
    copy("clear_async", kRt, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, 64 << 10, 0, false);
  KEEP_FRAME();
}
__attribute__((noinline)) void driver_upload() {
  for (int i = 0; i < 2; ++i)
    copy("driver_upload", kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, 32 << 10, kHtoD, true);
  KEEP_FRAME();
}
__attribute__((noinline)) void driver_read_back() {
  copy("driver_read_back", kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2, 48 << 10, kDtoH,
       false);
  KEEP_FRAME();
}
__attribute__((noinline)) void driver_peer_async() {
  copy("driver_peer_async", kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync, 16 << 10, kDtoD,
       false);
  KEEP_FRAME();
}
__attribute__((noinline)) void driver_fill() {
  copy("driver_fill", kDrv, CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, 4 << 10, 0, false);
  KEEP_FRAME();
}

void print_done() {
  std::string line = "MOCKAPP_MEMORY {";
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
  std::printf("%s}\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace

void scenario_copies(Kernels &k) {
  check(mock_cuda_launch(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, k.next("_Z5k_addPfi"),
                         nullptr),
        "cudaLaunchKernel");
  upload_weights();
  read_back_async();
  read_scalar();
  copy_tile_2d();
  copy_volume_3d();
  copy_to_peer();
  zero_grads();
  clear_async();
  driver_upload();
  driver_read_back();
  driver_peer_async();
  driver_fill();
  check(mock_cuda_launch(kRt, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, k.next("_Z5k_mulPfi"),
                         nullptr),
        "cudaLaunchKernel");
  print_done();
  g_done.clear();
}

}  // namespace mockapp
