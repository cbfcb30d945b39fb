#include "nvtx/nvtx_injection.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "base/config.h"
#include "base/cupti_api.h"
#include "base/cupti_locator.h"
#include "base/log.h"

namespace parcagpu {
namespace {

constexpr const char *kEntryName = "InitializeInjectionNvtx2";

RepeatedError g_no_entry("nvtx", "NVTX injection calls left as no-ops (no libcupti entry point)");

}  // namespace

NvtxInjection::Entry NvtxInjection::find_entry() {
  static std::once_flag once;
  static Entry entry = nullptr;
  static std::string problem;
  std::call_once(once, [] {
    std::vector<ConfigWarning> ignored;  // said by the profiler's own parse at its start
    const Config config =
        parse_config([](const char *n) { return static_cast<const char *>(std::getenv(n)); },
                     parcagpu_env_names(), &ignored);
    set_debug(config.debug);
    LocatedCupti found;
    // Usable as the profiler judges it (load_cupti), so the search ends at the libcupti the
    // profiler then subscribes with: it finds this one again, already in the process.
    auto usable = [](void *handle, std::string *why_not) {
      CuptiApi api;
      return resolve_cupti([handle](const char *name) { return dlsym(handle, name); }, &api,
                           why_not);
    };
    if (!locate_cupti(config.cupti_path, usable, &found, &problem)) return;
    entry = reinterpret_cast<Entry>(dlsym(found.handle, kEntryName));
    if (!entry) {
      problem = found.path + " lacks " + kEntryName;
      return;
    }
    debug_log("nvtx: forwarding NVTX's injection to %s (%s)", found.path.c_str(),
              found.why.c_str());
  });
  if (!entry)
    g_no_entry.report(kErrLibraryMissing,
                      "NVTX_INJECTION64_PATH names parcagpu, but %s; NVTX calls stay no-ops "
                      "(ranges are not collected), the application runs on",
                      problem.c_str());
  return entry;
}

int NvtxInjection::forward(NvtxGetExportTable get_export_table) noexcept {
  try {
    const Entry entry = find_entry();
    if (!entry) return 0;
    const int ok = entry(get_export_table);
    if (!ok)
      g_no_entry.report(kErrLibraryMissing,
                        "libcupti's %s refused NVTX's injection; NVTX calls stay no-ops",
                        kEntryName);
    return ok;
  } catch (...) {
    report_error(kErrInternal, "nvtx", "NVTX injection failed; NVTX calls stay no-ops");
    return 0;
  }
}

}  // namespace parcagpu
