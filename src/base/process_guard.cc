#include "base/process_guard.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/log.h"

// The marker every copy of the library exports (src/profiler/exports.map), by a name no other
// library uses. Its layout is frozen under this name: a copy with a different layout must use
// another name. `owner` is meaningful on the first copy loaded only: the copy that claimed the
// process.
extern "C" {
struct ParcagpuInstanceMarkerV1 {
  char tag[32];
  std::atomic<const ParcagpuInstanceMarkerV1 *> owner;
};
// This copy's own marker, by a hidden name: references to an exported symbol go through the GOT
// and may be bound to another copy's definition (an LD_PRELOADed copy interposes it).
__attribute__((visibility("hidden")))
ParcagpuInstanceMarkerV1 parcagpu_instance_marker_self = {"parcagpu instance marker v1", {nullptr}};
// ... exported under the name other copies look up.
extern ParcagpuInstanceMarkerV1 parcagpu_instance_marker_v1
    __attribute__((alias("parcagpu_instance_marker_self"), visibility("default")));
}

namespace parcagpu::process_guard {

namespace detail {
std::atomic<bool> g_forked_child{false};
}

namespace {

using Marker = ParcagpuInstanceMarkerV1;
constexpr const char kMarkerSymbol[] = "parcagpu_instance_marker_v1";

struct LoadedObject {
  std::string name;
  ElfW(Addr) base;
};

// The objects of the process in load order. dl_iterate_phdr holds the loader's lock while it
// walks, so nothing is unloaded under us; names are copied for use after it returns.
std::vector<LoadedObject> loaded_objects() {
  std::vector<LoadedObject> objects;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *arg) -> int {
        if (info->dlpi_name && *info->dlpi_name)
          static_cast<std::vector<LoadedObject> *>(arg)->push_back(
              {info->dlpi_name, info->dlpi_addr});
        return 0;
      },
      &objects);
  return objects;
}

// The marker defined by `object` itself (not by one of its dependencies), if any. Looking it up
// through a handle works for objects loaded RTLD_LOCAL too (the driver loads
// CUDA_INJECTION64_PATH that way), where a global lookup would not see them.
Marker *marker_of(const LoadedObject &object) {
  void *handle = dlopen(object.name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!handle) {
    dlerror();
    return nullptr;
  }
  Marker *found = nullptr;
  if (void *sym = dlsym(handle, kMarkerSymbol)) {
    Dl_info info{};
    link_map *defined_in = nullptr;
    if (dladdr1(sym, &info, reinterpret_cast<void **>(&defined_in), RTLD_DL_LINKMAP) &&
        defined_in && defined_in->l_addr == object.base)
      found = static_cast<Marker *>(sym);
  }
  dlclose(handle);
  dlerror();
  return found;
}

std::string path_of(const void *address) {
  Dl_info info{};
  if (dladdr(address, &info) && info.dli_fname) return info.dli_fname;
  return "an unknown path";
}

void (*g_at_exit_fn)() = nullptr;

void run_at_exit() {
  // In a forked child the state of the parent's threads is frozen mid-way: do nothing.
  if (forked_child() || !g_at_exit_fn) return;
  g_at_exit_fn();
  report_repeated_error_totals();  // after the last flush: its errors are counted too
}

void on_fork_child() { detail::g_forked_child.store(true, std::memory_order_relaxed); }

}  // namespace

Claim claim_process(std::string *other_path) noexcept {
  Marker *const self = &parcagpu_instance_marker_self;
  try {
    // Every copy agrees on which marker arbitrates: the one of the first copy loaded. Objects
    // are only ever appended to the load order, and the first copy stays loaded (-z nodelete),
    // so copies starting at different times, or at once on two threads, pick the same one.
    Marker *arbiter = nullptr;
    for (const LoadedObject &o : loaded_objects())
      if ((arbiter = marker_of(o))) break;
    if (!arbiter) arbiter = self;
    const Marker *expected = nullptr;
    if (arbiter->owner.compare_exchange_strong(expected, self) || expected == self)
      return Claim::Ours;
    if (other_path) *other_path = path_of(expected);
    return Claim::Another;
  } catch (...) {
    // Out of memory while listing objects: behave as a single copy would.
    const Marker *expected = nullptr;
    if (self->owner.compare_exchange_strong(expected, self) || expected == self) return Claim::Ours;
    if (other_path) other_path->clear();
    return Claim::Another;
  }
}

void install(void (*at_exit_fn)()) noexcept {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  g_at_exit_fn = at_exit_fn;
  pthread_atfork(nullptr, nullptr, &on_fork_child);
  std::atexit(&run_at_exit);
  std::at_quick_exit(&run_at_exit);
}

}  // namespace parcagpu::process_guard
