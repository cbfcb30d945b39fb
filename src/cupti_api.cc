#include "cupti_api.h"

#include <dlfcn.h>

#include "parcagpu/cbid_table.h"

namespace parcagpu {

// The subscription table uses literal cbids (CUDA 12 headers lack some); pin them here against
// the headers we build with.
static_assert(static_cast<uint32_t>(CbDomain::Driver) == CUPTI_CB_DOMAIN_DRIVER_API);
static_assert(static_cast<uint32_t>(CbDomain::Runtime) == CUPTI_CB_DOMAIN_RUNTIME_API);
static_assert(static_cast<uint32_t>(CbDomain::Resource) == CUPTI_CB_DOMAIN_RESOURCE);
static_assert(is_subscribed(CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
static_assert(is_subscribed(CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz));
static_assert(is_subscribed(CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx));
static_assert(is_subscribed(CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz));
static_assert(is_subscribed(CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch));
static_assert(is_subscribed(CbDomain::Driver, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz));
static_assert(is_subscribed(CbDomain::Driver,
                              CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice));
static_assert(is_subscribed(CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
static_assert(is_subscribed(CbDomain::Runtime,
                              CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060));
static_assert(is_subscribed(CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000));
static_assert(is_subscribed(CbDomain::Runtime,
                              CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000));
#ifdef CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000
static_assert(is_subscribed(CbDomain::Runtime,
                              CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000));
#endif

namespace {

void *open_cupti(const std::string &explicit_path, std::string *loaded, std::string *error) {
  static const char *const kNames[] = {"libcupti.so", "libcupti.so.13", "libcupti.so.12"};
  // A profiler in the application (Kineto, say) may have loaded it already: share that copy.
  for (const char *n : kNames) {
    if (void *h = dlopen(n, RTLD_NOW | RTLD_NOLOAD)) {
      *loaded = std::string(n) + " (already loaded)";
      return h;
    }
  }
  if (!explicit_path.empty()) {
    if (void *h = dlopen(explicit_path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *loaded = explicit_path;
      return h;
    }
    const char *e = dlerror();
    *error = "cannot load PARCAGPU_CUPTI_PATH=" + explicit_path + ": " + (e ? e : "unknown");
    return nullptr;
  }
  std::string last;
  for (const char *n : kNames) {
    if (void *h = dlopen(n, RTLD_NOW | RTLD_LOCAL)) {
      *loaded = n;
      return h;
    }
    const char *e = dlerror();
    last = e ? e : n;
  }
  *error = "cannot load libcupti (tried libcupti.so, libcupti.so.13, libcupti.so.12; last: " +
           last + "); set PARCAGPU_CUPTI_PATH or LD_LIBRARY_PATH";
  return nullptr;
}

}  // namespace

bool load_cupti(const std::string &explicit_path, CuptiApi *api, std::string *error) {
  CuptiApi t;
  t.handle = open_cupti(explicit_path, &t.path, error);
  if (!t.handle) return false;
  const std::string where = t.path;
#define PARCAGPU_RESOLVE(fn)                                                       \
  t.fn = reinterpret_cast<decltype(t.fn)>(dlsym(t.handle, #fn));                   \
  if (!t.fn) {                                                                     \
    *error = where + " lacks " #fn " (too old, or not the expected library)";     \
    return false;                                                                  \
  }
  PARCAGPU_CUPTI_FUNCTIONS(PARCAGPU_RESOLVE)
#define PARCAGPU_RESOLVE_OPTIONAL(fn) t.fn = reinterpret_cast<decltype(t.fn)>(dlsym(t.handle, #fn));
  PARCAGPU_CUPTI_PC_FUNCTIONS(PARCAGPU_RESOLVE_OPTIONAL)
#undef PARCAGPU_RESOLVE_OPTIONAL
  *api = t;
  return true;
}

bool load_cuda(CudaApi *api, std::string *error) {
  CudaApi t;
  t.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!t.handle) t.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!t.handle) {
    const char *e = dlerror();
    *error = std::string("cannot load libcuda.so.1: ") + (e ? e : "unknown");
    return false;
  }
  const std::string where = "libcuda.so.1";
  PARCAGPU_CUDA_FUNCTIONS(PARCAGPU_RESOLVE)
#undef PARCAGPU_RESOLVE
  *api = t;
  return true;
}

const char *cupti_result_string(const CuptiApi &api, CUptiResult r) {
  const char *s = nullptr;
  if (api.cuptiGetResultString && api.cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s) return s;
  return "CUPTI error";
}

}  // namespace parcagpu
