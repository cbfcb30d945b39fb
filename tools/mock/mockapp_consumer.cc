// Consumers without eBPF, at exact points: parcagpu-mockapp raises or lowers the library's USDT
// semaphores itself (tools/common/sdt_semaphores.h), as the kernel does when a consumer attaches or
// detaches. The library cannot tell the difference: it only reads the semaphores.
//
//  --fake-consumer=PROBES  after cuInit, "attach" to PROBES ("all" or a list), and wait until the
//                          library has turned launch callbacks on (PROBES with cuda_correlation);
//                          then run as usual. For measuring the attached path (callgrind) without
//                          eBPF.
//  --scenario=attach-detach  needs a real consumer attached to the library (the recorder; the
//                          tests use bpftrace): it takes the recorder's semaphore counts away
//                          ("detach") and gives them back ("attach") in the middle of launches of
//                          every launch API, at every point of the callback sequence, while the
//                          recorder keeps seeing whatever the library fires. Each launch is
//                          printed as MOCKAPP_LAUNCH {"corr","cbid","api","phase"} so the test
//                          can check what must, may and must not have been announced. After an
//                          attach it launches until the library announces one (seen as kernel
//                          activity switched on for it: the recorder wants kernels), so it knows
//                          the attach was served before the launches that must be announced.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "mock_cupti_control.h"
#include "mockapp.h"
#include "parcagpu/cbid_table.h"
#include "sdt_semaphores.h"

namespace mockapp {
namespace {

decltype(&mock_cupti_callback_enabled) callback_enabled() {
  static decltype(&mock_cupti_callback_enabled) fn = [] {
    void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcupti.so.12", RTLD_NOW | RTLD_NOLOAD);  // CUDA 12 personality
    return h ? reinterpret_cast<decltype(&mock_cupti_callback_enabled)>(
                   dlsym(h, "mock_cupti_callback_enabled"))
             : nullptr;
  }();
  return fn;
}

// cuptiActivityEnable calls so far: an announced launch switches kernel activity on for its API
// call (at the default PARCAGPU_ACTIVITY_MODE, while a consumer wants kernels).
uint64_t activity_enables() {
  static decltype(&mock_cupti_get_stats) get_stats = [] {
    void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (!h) h = dlopen("libcupti.so.12", RTLD_NOW | RTLD_NOLOAD);
    return h ? reinterpret_cast<decltype(&mock_cupti_get_stats)>(dlsym(h, "mock_cupti_get_stats"))
             : nullptr;
  }();
  MockCuptiStats st{};
  if (get_stats) get_stats(&st);
  return st.activity_enable_calls;
}

// Waits for a condition the library brings about on its own threads. Generous: the machine may
// be loaded; a condition that never comes is a failure, reported.
template <typename Cond>
bool wait_for(Cond cond, const char *what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) {
      g_mock_errors.fetch_add(1);
      std::fprintf(stderr, "parcagpu-mockapp: timed out waiting until %s\n", what);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

bool any_launch_cbid_enabled() {
  auto enabled = callback_enabled();
  if (!enabled) return false;
  for (const auto &cb : parcagpu::kSubscribedCallbacks)
    if (parcagpu::is_launch_role(cb.role) && enabled(static_cast<uint32_t>(cb.domain), cb.cbid))
      return true;
  return false;
}

std::vector<sdtsem::Semaphore> library_semaphores(const std::string &library) {
  std::string err;
  std::vector<sdtsem::Semaphore> sems = sdtsem::find(library.c_str(), "parcagpu", &err);
  if (sems.empty()) {
    g_mock_errors.fetch_add(1);
    std::fprintf(stderr, "parcagpu-mockapp: no semaphores in %s: %s\n", library.c_str(),
                 err.c_str());
  }
  return sems;
}

// ---- attach-detach scenario ----

struct AttachDetach {
  std::vector<sdtsem::Semaphore> sems;
  std::vector<unsigned short> recorder;  // the real consumer's counts
  // What to do inside the next launch.
  enum Action { kNone, kAttach, kDetach } action = kNone;
  MockLaunchPoint point = MOCK_LAUNCH_POINT_AFTER_OUTER_ENTER;
  uint32_t corr = 0;

  void set(bool attached) {
    for (size_t i = 0; i < sems.size(); ++i) *sems[i].counter = attached ? recorder[i] : 0;
  }
  // Outside launches: until the library has turned every launch callback off.
  void detach_and_settle() {
    set(false);
    wait_for([] { return !any_launch_cbid_enabled(); }, "the library disabled the launch cbids");
  }
  // Anywhere, also inside a launch: until the library has turned launch callbacks on. (Whether
  // it has also started judging callbacks by them is known only from a launch: see sync.)
  void attach_and_settle() {
    set(true);
    wait_for(any_launch_cbid_enabled, "the library enabled launch callbacks");
  }
};

void hook(MockLaunchPoint point, uint32_t, uint32_t, uint32_t correlation_id, void *arg) {
  auto *ad = static_cast<AttachDetach *>(arg);
  if (point == MOCK_LAUNCH_POINT_AFTER_OUTER_ENTER) ad->corr = correlation_id;
  if (point != ad->point || ad->action == AttachDetach::kNone) return;
  if (ad->action == AttachDetach::kAttach) {
    ad->attach_and_settle();
  } else {
    ad->set(false);  // nothing to wait for: the library must see it at this launch's EXIT
  }
  ad->action = AttachDetach::kNone;
}

CUgraphExec three_kernel_exec(Kernels &k) {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  check(mock_cuda_graph_create(&graph), "cudaGraphCreate");
  for (int i = 0; i < 3; ++i) {
    CUgraphNode node;
    check(mock_cuda_graph_add_kernel_node(graph, k.next("_Z5k_addPfi"), &node),
          "cudaGraphAddKernelNode");
  }
  check(mock_cuda_graph_instantiate(&exec, graph), "cudaGraphInstantiate");
  return exec;
}

const char *point_name(MockLaunchPoint p) {
  switch (p) {
    case MOCK_LAUNCH_POINT_AFTER_OUTER_ENTER:
      return "after-outer-enter";
    case MOCK_LAUNCH_POINT_AFTER_DRIVER_ENTER:
      return "after-driver-enter";
    case MOCK_LAUNCH_POINT_AFTER_DRIVER_EXIT:
      return "after-driver-exit";
  }
  return "?";
}

}  // namespace

bool fake_consumer_attach(const std::string &library, const std::string &probes) {
  const std::vector<sdtsem::Semaphore> sems = library_semaphores(library);
  if (sems.empty()) return false;
  if (sdtsem::raise(sems, probes, +1) == 0) {
    g_mock_errors.fetch_add(1);
    std::fprintf(stderr, "parcagpu-mockapp: --fake-consumer=%s: no such probe\n", probes.c_str());
    return false;
  }
  const bool launches =
      probes == "all" || ("," + probes + ",").find(",cuda_correlation,") != std::string::npos;
  return !launches || wait_for(any_launch_cbid_enabled, "the library enabled launch callbacks");
}

// The library's semaphores in ad, with the recorder's counts; false (an error said) when no
// consumer of launches and kernels is attached or the CUPTI is not the mock.
bool take_recorder(AttachDetach *ad) {
  const char *library = std::getenv("CUDA_INJECTION64_PATH");
  ad->sems = library_semaphores(library ? library : "");
  if (ad->sems.empty()) return false;
  bool recorder = false, kernels = false;
  for (const auto &s : ad->sems) {
    ad->recorder.push_back(static_cast<unsigned short>(*s.counter));
    recorder |= s.probe == "cuda_correlation" && ad->recorder.back() != 0;
    kernels |= s.probe == "activity_batch" && ad->recorder.back() != 0;
  }
  if (!recorder || !kernels || !callback_enabled()) {
    g_mock_errors.fetch_add(1);
    std::fprintf(stderr,
                 "parcagpu-mockapp: attach-detach needs the mock CUPTI and a consumer "
                 "of launches and kernels attached to the library (the recorder)\n");
    return false;
  }
  return true;
}

// Launches through one API with an attach or detach at one point of the launch.
struct AttachDetachLaunches {
  Kernels &k;
  AttachDetach &ad;
  CUgraphExec exec;
  CUstream stream;

  // One launch, said on a MOCKAPP_LAUNCH line. Returns whether the library announced it (kernel
  // activity switched on for it).
  bool launch(const parcagpu::SubscribedCallback &cb, const char *phase,
              AttachDetach::Action action, MockLaunchPoint point) {
    ad.action = action;
    ad.point = point;
    ad.corr = 0;
    const uint64_t enables = activity_enables();
    const auto domain = static_cast<uint32_t>(cb.domain);
    if (cb.role == parcagpu::CbRole::GraphLaunch)
      check(mock_cuda_graph_launch(domain, cb.cbid, exec, stream), cb.name);
    else
      check(mock_cuda_launch(domain, cb.cbid, k.next("_Z5k_mulPfi"), stream), cb.name);
    const nlohmann::ordered_json line = {{"corr", ad.corr},
                                         {"cbid", parcagpu::signed_cbid(cb.domain, cb.cbid)},
                                         {"api", cb.name},
                                         {"phase", phase},
                                         {"point", point_name(point)}};
    print_line("MOCKAPP_LAUNCH", line.dump());
    return activity_enables() > enables;
  }

  // Attach in a launch, launches until one is announced, then detach in a launch.
  void attach_then_detach(const parcagpu::SubscribedCallback &cb, MockLaunchPoint p) {
    launch(cb, "attach-mid", AttachDetach::kAttach, p);
    // Until one is announced: then the attach has been served, and this thread's nesting is
    // known to the library (which first learns the launch rate, then announces one launch in
    // as many as the rate limits allow: thousands here, so a time bound, not a count).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    bool announced = false;
    while (!(announced = launch(cb, "sync", AttachDetach::kNone, p)) &&
           std::chrono::steady_clock::now() < give_up) {
    }
    if (!announced) {
      g_mock_errors.fetch_add(1);
      std::fprintf(stderr, "parcagpu-mockapp: %s never announced after an attach\n", cb.name);
    }
    launch(cb, "attached-1", AttachDetach::kNone, p);
    launch(cb, "attached-2", AttachDetach::kNone, p);
    launch(cb, "detach-mid", AttachDetach::kDetach, p);
    wait_for([] { return !any_launch_cbid_enabled(); },
             "the library disabled the launch cbids after a detach in a launch");
    launch(cb, "detached", AttachDetach::kNone, p);
  }
};

void scenario_attach_detach(Kernels &k) {
  AttachDetach ad;
  if (!take_recorder(&ad)) return;
  CUstream stream = nullptr;
  check(mock_cuda_stream_create(&stream), "cudaStreamCreate");
  AttachDetachLaunches run{k, ad, three_kernel_exec(k), stream};
  mock_cuda_set_launch_hook(&hook, &ad);
  ad.detach_and_settle();
  for (const auto &cb : parcagpu::kSubscribedCallbacks) {
    if (!parcagpu::is_kernel_launch_role(cb.role)) continue;
    if (!parcagpu::callback_known_to(cb, g_runtime_version / 1000)) continue;  // not in this CUDA
    std::vector<MockLaunchPoint> points = {MOCK_LAUNCH_POINT_AFTER_OUTER_ENTER};
    if (cb.domain == parcagpu::CbDomain::Runtime) {
      points.push_back(MOCK_LAUNCH_POINT_AFTER_DRIVER_ENTER);
      points.push_back(MOCK_LAUNCH_POINT_AFTER_DRIVER_EXIT);
    }
    for (MockLaunchPoint p : points) run.attach_then_detach(cb, p);
  }
  mock_cuda_set_launch_hook(nullptr, nullptr);
  ad.attach_and_settle();  // the recorder's counts back, as they were
  check(mock_cuda_graph_exec_destroy(run.exec), "cudaGraphExecDestroy");
}

// Graph instantiations while nobody listens, then an attach: the library re-fires the stored
// graph_node_clone mappings for the newcomer. Like attach-detach it needs a recorder attached
// (its counts are taken away during the instantiations and given back after). Prints
// MOCKAPP_CLONES {"graphs","clones","app_tid"} so the test can tell re-fired mappings (fired
// after the attach, by the library's own thread) from the ones fired live at instantiation.
void scenario_clone_refire(Kernels &k) {
  const char *library = std::getenv("CUDA_INJECTION64_PATH");
  AttachDetach ad;
  ad.sems = library_semaphores(library ? library : "");
  for (const auto &s : ad.sems) ad.recorder.push_back(static_cast<unsigned short>(*s.counter));
  ad.detach_and_settle();  // the recorder listens to cuda_correlation too: this waits until the
                           // library has seen everybody leave
  constexpr int kGraphs = 2000;  // 6000 mappings stored
  std::vector<CUgraphExec> execs;
  for (int i = 0; i < kGraphs; ++i) execs.push_back(three_kernel_exec(k));
  const nlohmann::ordered_json clones = {
      {"graphs", kGraphs}, {"clones", kGraphs * 3}, {"app_tid", static_cast<int>(gettid())}};
  print_line("MOCKAPP_CLONES", clones.dump());
  // The attach, then the application goes on launching: none of it waits for the re-firing.
  ad.set(true);
  CUstream stream = nullptr;
  check(mock_cuda_stream_create(&stream), "cudaStreamCreate");
  for (int i = 0; i < 8; ++i)
    check(mock_cuda_launch(MOCK_CUDA_DOMAIN_RUNTIME, 211, k.next("_Z5k_addPfi"), stream),
          "cudaLaunchKernel");
  // Served before the process may end: the cycle that turns launch callbacks on (the recorder
  // listens to cuda_correlation) schedules the re-firing 1 s later (kAttachSettleNs: a real
  // consumer's programs may not be in place at the rise), and a cycle under way is finished
  // before the library's exit joins its thread. The application goes on launching meanwhile.
  wait_for(any_launch_cbid_enabled, "the library enabled launch callbacks");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (std::chrono::steady_clock::now() < until) {
    check(mock_cuda_launch(MOCK_CUDA_DOMAIN_RUNTIME, 211, k.next("_Z5k_addPfi"), stream),
          "cudaLaunchKernel");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (CUgraphExec e : execs) check(mock_cuda_graph_exec_destroy(e), "cudaGraphExecDestroy");
}

}  // namespace mockapp
