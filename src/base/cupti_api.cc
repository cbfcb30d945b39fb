#include "base/cupti_api.h"

#include <dlfcn.h>

#include <cstring>

#include "base/cupti_locator.h"
#include "base/log.h"
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
// since_cuda: the runtime cbids of CUDA 13 APIs start at 487 (cupti_runtime_cbid.h, the first
// _v13000 id); CUPTI 12 refuses to enable them.
constexpr bool since_cuda_consistent() {
  for (const auto &cb : kSubscribedCallbacks)
    if (cb.domain == CbDomain::Runtime && (cb.cbid >= 487) != (cb.since_cuda == 13)) return false;
  return true;
}
static_assert(since_cuda_consistent());
// The headers' enums are not macros: #ifdef cannot tell them apart, the API version can.
#if CUPTI_API_VERSION >= 130000
static_assert(CUPTI_RUNTIME_TRACE_CBID_cudaMemPrefetchBatchAsync_v13000 == 487);
static_assert(is_subscribed(CbDomain::Runtime, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000));
#endif

bool resolve_cupti(const std::function<void *(const char *name)> &lookup, CuptiApi *api,
                   std::string *error) {
  CuptiApi t;
  std::string lacking;
#define PARCAGPU_RESOLVE_REQUIRED(fn)                   \
  t.fn = reinterpret_cast<decltype(t.fn)>(lookup(#fn)); \
  if (!t.fn) lacking += std::string(lacking.empty() ? "" : ", ") + #fn;
#define PARCAGPU_RESOLVE_OPTIONAL(fn, feature)          \
  t.fn = reinterpret_cast<decltype(t.fn)>(lookup(#fn)); \
  if (!t.fn) {                                          \
    t.fn = &MissingEntryPoint<decltype(t.fn)>::call;    \
    t.missing.push_back(#fn);                           \
  }
  PARCAGPU_CUPTI_REQUIRED(PARCAGPU_RESOLVE_REQUIRED)
  PARCAGPU_CUPTI_OPTIONAL(PARCAGPU_RESOLVE_OPTIONAL)
#undef PARCAGPU_RESOLVE_REQUIRED
#undef PARCAGPU_RESOLVE_OPTIONAL
  if (!lacking.empty()) {
    *error = "lacks " + lacking + " (too old, or not CUPTI)";
    return false;
  }
  *api = std::move(t);
  return true;
}

namespace {

const char *missing_feature(const char *name) {
#define PARCAGPU_FEATURE(fn, feature) \
  if (std::strcmp(name, #fn) == 0) return feature;
  PARCAGPU_CUPTI_OPTIONAL(PARCAGPU_FEATURE)
#undef PARCAGPU_FEATURE
  return "";
}

}  // namespace

bool load_cupti(const std::string &explicit_path, CuptiApi *api, std::string *error) {
  CuptiApi t;
  LocatedCupti found;
  // Usable: every required entry point resolves (the table is kept for the chosen one).
  auto usable = [&t](void *handle, std::string *why_not) {
    return resolve_cupti([handle](const char *name) { return dlsym(handle, name); }, &t, why_not);
  };
  if (!locate_cupti(explicit_path, usable, &found, error)) return false;
  t.handle = found.handle;
  t.path = found.path;
  t.found_in = found.why;
  t.api_version = found.api_version;
  t.major = found.major;
  if (found.mismatched)
    report_error(kErrLibraryMissing, "cupti",
                 "using %s, CUPTI %d: no CUPTI of the CUDA the application runs was found, so "
                 "its runtime launches may go unseen; set PARCAGPU_CUPTI_PATH to the matching "
                 "libcupti (PARCAGPU_DEBUG=1 lists each path tried)",
                 t.path.c_str(), t.major);
  if (!t.missing.empty()) {
    std::string what;
    for (const char *name : t.missing)
      what += std::string(what.empty() ? "" : ", ") + name + " (" + missing_feature(name) + ")";
    report_error(kErrLibraryMissing, "cupti",
                 "%s lacks %s: those are off, launches are still "
                 "profiled",
                 t.path.c_str(), what.c_str());
  }
  *api = std::move(t);
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
#define PARCAGPU_RESOLVE(fn)                                     \
  t.fn = reinterpret_cast<decltype(t.fn)>(dlsym(t.handle, #fn)); \
  if (!t.fn) {                                                   \
    *error = "libcuda.so.1 lacks " #fn;                          \
    return false;                                                \
  }
  PARCAGPU_CUDA_FUNCTIONS(PARCAGPU_RESOLVE)
#undef PARCAGPU_RESOLVE
#define PARCAGPU_RESOLVE_OPTIONAL(fn) t.fn = reinterpret_cast<decltype(t.fn)>(dlsym(t.handle, #fn));
  PARCAGPU_CUDA_GRAPH_FUNCTIONS(PARCAGPU_RESOLVE_OPTIONAL)
#undef PARCAGPU_RESOLVE_OPTIONAL
  *api = t;
  return true;
}

const char *cupti_result_string(const CuptiApi &api, CUptiResult r) {
  const char *s = nullptr;
  if (api.cuptiGetResultString && api.cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s) return s;
  return "CUPTI error";
}

}  // namespace parcagpu
