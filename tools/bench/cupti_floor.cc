// What CUPTI itself costs per launch: a tiny CUDA injection library whose callback does nothing,
// so scripts/bench-gpu-overhead.sh carries the floor of every run in the same run.
//
//   CUPTI_FLOOR=subscribe subscribed, nothing enabled: what a subscriber alone costs
//   CUPTI_FLOOR=resource  the graph-resource cbids of the table (CbRole::GraphResource), which
//                         parcagpu enables from process start
//   CUPTI_FLOOR=from-start every cbid parcagpu enables from process start (enabled_from_start:
//                         graph resources, uploads, instantiations, modules and contexts)
//   CUPTI_FLOOR_DOMAIN=resource|api  with resource or from-start: only the cbids of the resource
//                         domain, or only those of the driver and runtime APIs (which of them
//                         costs a graph launch)
//   CUPTI_FLOOR=launch    every cbid of include/parcagpu/cbid_table.h, all the time: the floor of
//                         a library that is called on every launch
//   CUPTI_FLOOR=window    experiment behind parcagpu's sampling windows: the resource cbids from
//                         the start; a thread opens a window per role (eager, graph) at
//                         CUPTI_FLOOR_EAGER_RATE / CUPTI_FLOOR_GRAPH_RATE per second (default
//                         100 / 20) by enabling that role's launch cbids (CUPTI_FLOOR_SET=role: all
//                         of them, runtime first; =minimal: 211+307 / 311+514 only); the first
//                         launch ENTER claims it and its own EXIT closes it
//                         (CUPTI_FLOOR_CLOSE=inband: disables the cbids there; =thread: hands
//                         the disabling to the window thread)
//
// At exit it prints one line on stderr: CUPTI_FLOOR mode=... windows_eager=N windows_graph=N
// enable_ns=... disable_ns=... (mean ns per cuptiEnableCallback call, by what it did).
// Build (scripts/bench-gpu-overhead.sh does it):
//   c++ -std=c++17 -O2 -shared -fPIC -Iinclude -I$CUDA/include tools/bench/cupti_floor.cc -o
//   libcupti-floor.so -ldl -lpthread
#include <cupti.h>
#include <dlfcn.h>
#include <semaphore.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "parcagpu/cbid_table.h"

namespace {

using parcagpu::CbDomain;
using parcagpu::CbRole;
using parcagpu::kSubscribedCallbacks;

decltype(&cuptiSubscribe) p_subscribe;
decltype(&cuptiEnableCallback) p_enable;
CUpti_SubscriberHandle g_sub;

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

struct Pair {
  CbDomain domain;
  uint32_t cbid;
};

enum : int { kClosed = 0, kOpen = 1, kClaimed = 2, kClosing = 3 };

struct Window {
  std::vector<Pair> pairs;  // runtime first: a runtime launch is then seen from its ENTER
  double rate = 0;
  std::atomic<int> state{kClosed};
  std::atomic<uint64_t> opened{0};
  uint64_t next_ns = 0;
  std::mutex toggle;  // enabling and disabling never interleave
};

Window g_win[2];  // 0 eager, 1 graph
bool g_inband = true;
sem_t g_close_sem;
std::atomic<uint64_t> g_enable_ns{0}, g_enable_calls{0}, g_disable_ns{0}, g_disable_calls{0};
const char *g_mode = "";

struct ThreadClaim {
  int role;  // -1 none
  uint32_t corr, cbid;
  CUpti_CallbackDomain domain;
};
thread_local ThreadClaim t_claim = {-1, 0, 0, CUPTI_CB_DOMAIN_INVALID};

int role_of(CUpti_CallbackDomain d, CUpti_CallbackId cbid) {
  const auto *cb = parcagpu::find_subscribed(static_cast<CbDomain>(d), cbid);
  if (!cb || cb->role == CbRole::GraphResource) return -1;
  return cb->role == CbRole::GraphLaunch ? 1 : 0;
}

void set_pairs(Window &w, uint32_t on) {
  const uint64_t t0 = now_ns();
  for (const Pair &p : w.pairs)
    p_enable(on, g_sub, static_cast<CUpti_CallbackDomain>(p.domain), p.cbid);
  auto &ns = on ? g_enable_ns : g_disable_ns;
  auto &calls = on ? g_enable_calls : g_disable_calls;
  ns.fetch_add(now_ns() - t0);
  calls.fetch_add(w.pairs.size());
}

void CUPTIAPI empty_callback(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *) {}

void CUPTIAPI window_callback(void *, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                              const void *data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) return;
  const auto *cb = static_cast<const CUpti_CallbackData *>(data);
  ThreadClaim &t = t_claim;
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (t.role >= 0) return;  // nested in our claimed launch
    const int role = role_of(domain, cbid);
    if (role < 0) return;
    int expected = kOpen;
    if (!g_win[role].state.compare_exchange_strong(expected, kClaimed)) return;
    t = ThreadClaim{role, cb->correlationId, cbid, domain};
    return;
  }
  if (t.role < 0 || t.corr != cb->correlationId || t.cbid != cbid || t.domain != domain) return;
  Window &w = g_win[t.role];
  t.role = -1;
  if (g_inband && w.toggle.try_lock()) {
    set_pairs(w, 0);
    w.state.store(kClosed);
    w.toggle.unlock();
  } else {  // still being opened, or closing by the thread: the window thread closes it
    w.state.store(kClosing);
    sem_post(&g_close_sem);
  }
}

void window_thread() {
  for (;;) {
    uint64_t now = now_ns(), wake = now + 100000000ull;
    for (Window &w : g_win) {
      if (w.rate <= 0) continue;
      std::lock_guard<std::mutex> lock(w.toggle);
      if (w.state.load() == kClosing) {
        set_pairs(w, 0);
        w.state.store(kClosed);
      }
      if (w.state.load() == kClosed && now >= w.next_ns) {
        w.state.store(kOpen);
        w.opened.fetch_add(1);
        set_pairs(w, 1);
        if (w.state.load() == kClosing) {  // claimed and finished while we were enabling
          set_pairs(w, 0);
          w.state.store(kClosed);
        }
        const uint64_t interval = uint64_t(1e9 / w.rate);
        w.next_ns = (w.next_ns + interval < now) ? now + interval : w.next_ns + interval;
      }
      if (w.state.load() == kClosed && w.next_ns < wake) wake = w.next_ns;
      if (w.state.load() != kClosed && now + 1000000 < wake) wake = now + 1000000;
    }
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const uint64_t delta = wake > now_ns() ? wake - now_ns() : 0;
    uint64_t ns = uint64_t(ts.tv_nsec) + delta % 1000000000ull;
    ts.tv_sec += time_t(delta / 1000000000ull + ns / 1000000000ull);
    ts.tv_nsec = long(ns % 1000000000ull);
    if (g_inband) {
      clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
    } else {
      // sem_timedwait takes CLOCK_REALTIME; close requests wake it early.
      timespec rt;
      clock_gettime(CLOCK_REALTIME, &rt);
      uint64_t r = uint64_t(rt.tv_nsec) + delta % 1000000000ull;
      rt.tv_sec += time_t(delta / 1000000000ull + r / 1000000000ull);
      rt.tv_nsec = long(r % 1000000000ull);
      while (sem_timedwait(&g_close_sem, &rt) != 0 && errno == EINTR) {
      }
    }
  }
}

void report() {
  auto mean = [](uint64_t ns, uint64_t calls) { return calls ? double(ns) / double(calls) : 0.0; };
  std::fprintf(stderr,
               "CUPTI_FLOOR mode=%s windows_eager=%llu windows_graph=%llu enable_ns=%.0f "
               "disable_ns=%.0f\n",
               g_mode, (unsigned long long)g_win[0].opened.load(),
               (unsigned long long)g_win[1].opened.load(),
               mean(g_enable_ns.load(), g_enable_calls.load()),
               mean(g_disable_ns.load(), g_disable_calls.load()));
}

double env_rate(const char *name, double dflt) {
  const char *v = std::getenv(name);
  return v && *v ? std::atof(v) : dflt;
}

// CUPTI_FLOOR=window: the eager and graph windows' callbacks (CUPTI_FLOOR_SET=minimal: one
// runtime and one driver API each), how they close, and the thread that opens them.
void start_windows() {
  const char *set = std::getenv("CUPTI_FLOOR_SET");
  const bool minimal = set && !std::strcmp(set, "minimal");
  const char *close = std::getenv("CUPTI_FLOOR_CLOSE");
  g_inband = !(close && !std::strcmp(close, "thread"));
  sem_init(&g_close_sem, 0, 0);
  for (CbDomain d : {CbDomain::Runtime, CbDomain::Driver})
    for (const auto &cb : kSubscribedCallbacks) {
      if (cb.domain != d || cb.role == CbRole::GraphResource) continue;
      const int role = cb.role == CbRole::GraphLaunch ? 1 : 0;
      if (minimal && cb.cbid != (role ? (d == CbDomain::Driver ? 514u : 311u)
                                      : (d == CbDomain::Driver ? 307u : 211u)))
        continue;
      g_win[role].pairs.push_back({cb.domain, cb.cbid});
    }
  g_win[0].rate = env_rate("CUPTI_FLOOR_EAGER_RATE", 100);
  g_win[1].rate = env_rate("CUPTI_FLOOR_GRAPH_RATE", 20);
  std::thread(window_thread).detach();
}

// $PARCAGPU_CUPTI_PATH, else libcupti by its names; nullptr if none loads.
void *load_cupti() {
  void *h = nullptr;
  const char *path = std::getenv("PARCAGPU_CUPTI_PATH");
  for (const char *n : {path, "libcupti.so", "libcupti.so.13", "libcupti.so.12"})
    if (n && *n && (h = dlopen(n, RTLD_NOW | RTLD_LOCAL))) break;
  return h;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::atomic<bool> once{false};
  if (once.exchange(true)) return 1;
  const char *mode = std::getenv("CUPTI_FLOOR");
  g_mode = mode ? mode : "launch";
  const bool window = !std::strcmp(g_mode, "window");
  const bool launch = !std::strcmp(g_mode, "launch");
  const bool from_start = !std::strcmp(g_mode, "from-start");
  const bool subscribe_only = !std::strcmp(g_mode, "subscribe");
  if (!window && !launch && !from_start && !subscribe_only && std::strcmp(g_mode, "resource")) {
    std::fprintf(stderr,
                 "cupti-floor: CUPTI_FLOOR=%s: expected subscribe, resource, from-start, launch "
                 "or window\n",
                 g_mode);
    return 1;
  }
  const char *domain = std::getenv("CUPTI_FLOOR_DOMAIN");
  const bool only_resource = domain && !std::strcmp(domain, "resource");
  const bool only_api = domain && !std::strcmp(domain, "api");
  void *h = load_cupti();
  if (!h) {
    std::fprintf(stderr, "cupti-floor: cannot load libcupti\n");
    return 1;
  }
  p_subscribe = reinterpret_cast<decltype(p_subscribe)>(dlsym(h, "cuptiSubscribe"));
  p_enable = reinterpret_cast<decltype(p_enable)>(dlsym(h, "cuptiEnableCallback"));
  if (!p_subscribe || !p_enable ||
      p_subscribe(&g_sub, window ? &window_callback : &empty_callback, nullptr) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "cupti-floor: cannot subscribe\n");
    return 1;
  }
  for (const auto &cb : kSubscribedCallbacks) {
    const bool is_resource = cb.domain == CbDomain::Resource;
    if ((only_resource && !is_resource) || (only_api && is_resource) || subscribe_only) continue;
    if (launch || (from_start && parcagpu::enabled_from_start(cb.role)) ||
        (!from_start && cb.role == CbRole::GraphResource))
      p_enable(1, g_sub, static_cast<CUpti_CallbackDomain>(cb.domain), cb.cbid);
  }
  if (window) start_windows();
  std::atexit(report);
  return 1;
}
