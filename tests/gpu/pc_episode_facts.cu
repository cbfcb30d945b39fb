// Facts for PC sampling in short episodes (issue 17), measured by a standalone CUPTI client (no
// parcagpu involved): an episode enables PC sampling, samples one or a few start/stop windows,
// drains and disables it again, so the costly configuration is held only that long. What it needs
// to know: what Disable and a later Enable cost against CUPTI's worker-thread sleep span, how soon
// the samples of a window can be read, whether Enable/Disable may come from a watcher thread while
// the application launches, whether kernel activity can be switched off and on around an episode,
// what each state costs a launch, what continuous mode gives for correlation IDs and concurrency,
// and which graph kernels give records in kernel-serialized mode (docs/pc-sampling.md P13...).
//
// Build:  nvcc -O2 -std=c++17 -arch=sm_90 -lineinfo -o pc_episode_facts pc_episode_facts.cu \
//              -lcuda -lcupti          (plus -I/-L for CUPTI where the toolkit keeps it)
// Run:    pc_episode_facts extra             the phases added after the first device run:
//                                          firstwindow, graphepisode, disablethreads, and extra2's
//         pc_episode_facts extra2            the phases added after the second: graphreg, gated
//         pc_episode_facts all [ROUNDS]     every phase, each its own child process under a
//                                          watchdog; the cost phase as ROUNDS (default 11)
//                                          interleaved rounds of one short process per state
//         pc_episode_facts PHASE [ARG]     one phase: sleepspan; offthread nocur|cur|afterstop;
//                                          activity serialized|continuous; cost STATE; continuous;
//                                          serialgraph [EAGER] (CUDA_MODULE_LOADING=EAGER);
//                                          firstwindow serialized|continuous; graphepisode;
//                                          disablethreads watcher_idle|watcher_launch|main_other;
//                                          graphreg; gated main|watcher; shadow [late|warm|warmact];
//                                          shadowlib [a][s][c]
// Output: "FACT name value..." lines on stdout. A child that hangs prints
//         "FACT watchdog phase=... stuck_at=..." and exits 3: a hang is a fact too.

#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pc_facts.h"

#define CHECK(call)                                                                     \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      printf("FACT cuda_error %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      fflush(stdout);                                                                   \
      _exit(2);                                                                         \
    }                                                                                   \
  } while (0)

#include "launch_timing.h"

// Where the program is, for the watchdog: g_step (pc_facts.h) is the last CUPTI call begun (any
// thread), g_main the main thread's place.
static std::atomic<const char *> g_main{"init"};

static void sleep_ms(double ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::microseconds((long long)(ms * 1000)));
}

static double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}
static double vmin(const std::vector<double> &v) { return v.empty() ? -1 : *std::min_element(v.begin(), v.end()); }
static double vmax(const std::vector<double> &v) { return v.empty() ? -1 : *std::max_element(v.begin(), v.end()); }

// ---------------------------------------------------------------- kernels
__global__ void empty_kernel() {}

// (tiny, membound and spin: pc_facts.h)
// Dependent floating-point chains in registers. K makes distinct functions (serialgraph).
template <int K>
__global__ void gwork(float *out, int iters) {
  arithmetic_chain(out, iters, K);
}

// ---------------------------------------------------------------- launch callbacks
static std::mutex g_mu;
static std::vector<Launch> g_launches;
static std::atomic<bool> g_record{false};
static CUcontext g_ctx;
static CUpti_SubscriberHandle g_sub;

static void CUPTIAPI on_cb(void *, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data) {
  if (!g_record.load(std::memory_order_relaxed)) return;  // the "callbacks" cost: an empty body
  if (dom != CUPTI_CB_DOMAIN_RUNTIME_API && dom != CUPTI_CB_DOMAIN_DRIVER_API) return;
  auto *cb = static_cast<const CUpti_CallbackData *>(data);
  if (cb->callbackSite != CUPTI_API_ENTER) return;
  std::lock_guard<std::mutex> l(g_mu);
  g_launches.push_back({cb->correlationId, dom == CUPTI_CB_DOMAIN_DRIVER_API ? -(int)cbid : (int)cbid,
                        cb->symbolName ? cb->symbolName : (cb->functionName ? cb->functionName : "?")});
}

// The launch cbids a launch-callback library subscribes to.
static void subscribe_launch_cbids() {
  CUptiResult r = cuptiSubscribe(&g_sub, on_cb, nullptr);
  int ok = 0;
  const CUpti_CallbackId rt[] = {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                                 CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
                                 CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                                 CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000};
  const CUpti_CallbackId drv[] = {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                                  CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
                                  CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz};
  for (auto c : rt) ok += cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_RUNTIME_API, c) == CUPTI_SUCCESS;
  for (auto c : drv) ok += cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_DRIVER_API, c) == CUPTI_SUCCESS;
  printf("FACT subscribe rc=%s launch_cbids_enabled=%d\n", rs(r), ok);
}

static size_t launches_now() {
  std::lock_guard<std::mutex> l(g_mu);
  return g_launches.size();
}
static std::map<uint32_t, std::string> launches_since(size_t from) {
  std::lock_guard<std::mutex> l(g_mu);
  std::map<uint32_t, std::string> m;
  for (size_t i = from; i < g_launches.size(); ++i)
    m[g_launches[i].corr] = std::to_string(g_launches[i].cbid) + "/" + g_launches[i].name.substr(0, 14);
  return m;
}

// ---------------------------------------------------------------- activity
static std::atomic<long> g_act_conc{0}, g_act_kern{0}, g_act_other{0}, g_act_dropped{0};
static const size_t kActBuf = 8u << 20;

static void CUPTIAPI buf_req(uint8_t **buf, size_t *size, size_t *max_records) {
  *buf = (uint8_t *)aligned_alloc(8, kActBuf);
  *size = *buf ? kActBuf : 0;
  *max_records = 0;
}
static void CUPTIAPI buf_done(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t, size_t valid) {
  CUpti_Activity *rec = nullptr;
  while (cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) g_act_conc++;
    else if (rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) g_act_kern++;
    else g_act_other++;
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS) g_act_dropped += dropped;
  free(buf);
}
static void activity_register() {
  CUptiResult r = cuptiActivityRegisterCallbacks(buf_req, buf_done);
  printf("FACT activity_register rc=%s\n", rs(r));
}
struct ActCount {
  long conc, kern, other, dropped;
};
// Synchronizes, flushes every buffer, returns what arrived since the last call.
static ActCount act_take() {
  g_main = "act_take";
  CHECK(cudaDeviceSynchronize());
  g_step = "cuptiActivityFlushAll";
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  ActCount c{g_act_conc.exchange(0), g_act_kern.exchange(0), g_act_other.exchange(0), g_act_dropped.exchange(0)};
  return c;
}

// ---------------------------------------------------------------- PC sampling helpers
static void reset_buf(CUpti_PCSamplingData *d) {
  d->totalSamples = d->droppedSamples = d->nonUsrKernelsTotalSamples = 0;
  d->totalNumPcs = d->remainingNumPcs = 0;
  d->hardwareBufferFull = 0;
}

static uint32_t get_attr_u32(CUcontext ctx, CUpti_PCSamplingConfigurationAttributeType t, CUptiResult *rc) {
  CUpti_PCSamplingConfigurationInfo info{};
  info.attributeType = t;
  CUpti_PCSamplingConfigurationInfoParams p = {CUpti_PCSamplingConfigurationInfoParamsSize,
                                               nullptr, ctx, 1, &info};
  CUptiResult r = cuptiPCSamplingGetConfigurationAttribute(&p);
  if (rc) *rc = r;
  return info.attributeData.workerThreadPeriodicSleepSpanData.workerThreadPeriodicSleepSpan;
}

enum Mode { SERIALIZED, CONTINUOUS };
static size_t g_hwbuf = 0;  // hardware buffer size to configure; 0 leaves CUPTI's (512 MiB)

// Collection mode, start/stop control on, all stall reasons, the config buffer; span_ms < 0 leaves
// CUPTI's worker-thread sleep span alone. Returns the call's result; *ms its time.
static CUptiResult configure(CUcontext ctx, Mode mode, int span_ms, bool verbose, double *ms,
                             const char *where) {
  g_step = "configure";
  if (g_num_stall == 0) {
    CUptiResult r, r2;
    query_stall_reasons(ctx, &r, &r2);
    printf("FACT stall_reasons n=%zu rc=%s names_rc=%s\n", g_num_stall, rs(r), rs(r2));
    alloc_buf(&g_cfg_buf, 2048);
    alloc_buf(&g_out_buf, 2048);
  }
  reset_buf(&g_cfg_buf);
  double t0 = now_ms();
  std::vector<CUpti_PCSamplingConfigurationInfo> infos =
      base_config(mode == SERIALIZED ? CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED
                                     : CUPTI_PC_SAMPLING_COLLECTION_MODE_CONTINUOUS);
  CUpti_PCSamplingConfigurationInfo i{};
  if (g_hwbuf) {
    i = {};
    i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE;
    i.attributeData.hardwareBufferSizeData.hardwareBufferSize = g_hwbuf;
    infos.push_back(i);
  }
  if (span_ms >= 0) {
    i = {};
    i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN;
    i.attributeData.workerThreadPeriodicSleepSpanData.workerThreadPeriodicSleepSpan = (uint32_t)span_ms;
    infos.push_back(i);
  }
  CUpti_PCSamplingConfigurationInfoParams p = {CUpti_PCSamplingConfigurationInfoParamsSize, nullptr,
                                               ctx, infos.size(), infos.data()};
  CUptiResult r = cuptiPCSamplingSetConfigurationAttribute(&p);
  double d = now_ms() - t0;
  if (ms) *ms = d;
  if (verbose || r != CUPTI_SUCCESS) {
    printf("FACT configure where=%s mode=%s span=%d rc=%s ms=%.3f statuses=", where,
           mode == SERIALIZED ? "serialized" : "continuous", span_ms, rs(r), d);
    for (auto &x : infos) printf("%d:%s,", x.attributeType, rs(x.attributeStatus));
    printf("\n");
  }
  g_step = "after_configure";
  return r;
}

struct Tally {
  size_t records = 0, calls = 0;
  uint64_t hw = 0, total = 0, dropped = 0, nonusr = 0;
  double ms = 0;
  CUptiResult last = CUPTI_SUCCESS;
  std::map<uint32_t, uint64_t> by_corr;
  std::map<std::string, uint64_t> by_fn;
  std::map<std::string, std::set<uint32_t>> corrs_by_fn;
  void add(const Tally &o) {
    records += o.records;
    calls += o.calls;
    hw += o.hw;
    total += o.total;
    dropped += o.dropped;
    nonusr += o.nonusr;
    ms += o.ms;
    for (auto &c : o.by_corr) by_corr[c.first] += c.second;
    for (auto &c : o.by_fn) by_fn[c.first] += c.second;
    for (auto &c : o.corrs_by_fn) corrs_by_fn[c.first].insert(c.second.begin(), c.second.end());
  }
};

static void tally_buf(Tally &t, const CUpti_PCSamplingData &b) {
  t.total += b.totalSamples;
  t.dropped += b.droppedSamples;
  t.nonusr += b.nonUsrKernelsTotalSamples;
  for (size_t k = 0; k < b.totalNumPcs && k < b.collectNumPcs; ++k) {
    const CUpti_PCSamplingPCData &pc = b.pPcData[k];
    t.records++;
    std::string fn = pc.functionName ? pc.functionName : "?";
    if (fn.size() > 24) fn = fn.substr(0, 24);
    t.corrs_by_fn[fn].insert(pc.correlationId);
    for (size_t s = 0; s < pc.stallReasonCount; ++s) {
      t.hw += pc.stallReason[s].samples;
      t.by_corr[pc.correlationId] += pc.stallReason[s].samples;
      t.by_fn[fn] += pc.stallReason[s].samples;
    }
  }
}

static Tally drain(CUcontext ctx) {
  g_step = "cuptiPCSamplingGetData";
  Tally t;
  for (int guard = 0; guard < 1000; ++guard) {
    reset_buf(&g_out_buf);
    double t0 = now_ms();
    CUpti_PCSamplingGetDataParams p = {CUpti_PCSamplingGetDataParamsSize, nullptr, ctx, &g_out_buf};
    CUptiResult r = cuptiPCSamplingGetData(&p);
    t.ms += now_ms() - t0;
    t.calls++;
    t.last = r;
    if (r != CUPTI_SUCCESS) break;
    tally_buf(t, g_out_buf);
    if (g_out_buf.remainingNumPcs == 0) break;
  }
  g_step = "after_cuptiPCSamplingGetData";
  return t;
}
// What Disable left in the configured buffer.
static Tally cfg_tally() {
  Tally t;
  tally_buf(t, g_cfg_buf);
  return t;
}

static std::string tally_str(const Tally &t) {
  char b[512];
  snprintf(b, sizeof b, "records=%zu samples=%llu total=%llu dropped=%llu nonusr=%llu calls=%zu last=%s",
           t.records, (unsigned long long)t.hw, (unsigned long long)t.total, (unsigned long long)t.dropped,
           (unsigned long long)t.nonusr, t.calls, rs(t.last));
  std::string s = b;
  s += " corrs=";
  int n = 0;
  for (auto &c : t.by_corr) {
    if (++n > 24) { s += "..."; break; }
    s += std::to_string(c.first) + ":" + std::to_string(c.second) + ",";
  }
  s += " fns=";
  for (auto &f : t.by_fn) {
    s += f.first + ":" + std::to_string(f.second) + "[corr";
    int m = 0;
    for (auto c : t.corrs_by_fn.at(f.first)) {
      if (++m > 6) { s += "..."; break; }
      s += " " + std::to_string(c);
    }
    s += "],";
  }
  return s;
}

// ---------------------------------------------------------------- workloads
static int *d_tiny;
static float *d_f;
static float4 *d_in, *d_out;
static const size_t kN = 16ull << 20 >> 4;  // 16 MiB of float4
static cudaStream_t s1, s2;
static long long g_spin_cycles;

static void setup_cuda() {
  g_main = "setup_cuda";
  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(0));
  CHECK(cuCtxGetCurrent(&g_ctx) == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown);
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CHECK(cudaMalloc(&d_tiny, 64 * sizeof(int)));
  CHECK(cudaMalloc(&d_f, 1024 * sizeof(float)));
  CHECK(cudaMalloc(&d_in, kN * sizeof(float4)));
  CHECK(cudaMalloc(&d_out, kN * sizeof(float4)));
  CHECK(cudaMemset(d_in, 0, kN * sizeof(float4)));
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  g_spin_cycles = (long long)(clock_khz ? clock_khz : 1755000);  // ~1 ms
}

static double tiny_launches(int n) {
  g_main = "tiny_launches";
  return tiny_launch_ns(s1, d_tiny, n);
}

// Two streams of 1-block ~1 ms spin kernels: ~20 ms when they overlap, ~40 when serialized.
static double concurrency(int per_stream) {
  g_main = "concurrency";
  return concurrency_ms(s1, s2, g_spin_cycles, per_stream);
}

template <int K>
static cudaGraphExec_t make_graph(int nodes, int blocks, int iters) {
  g_main = "make_graph";
  cudaGraph_t g;
  cudaGraphExec_t e;
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < nodes; ++i) gwork<K><<<blocks, 256, 0, s1>>>(d_f, iters);
  CHECK(cudaStreamEndCapture(s1, &g));
  CHECK(cudaGraphInstantiate(&e, g, 0));
  CHECK(cudaGraphDestroy(g));
  return e;
}

// The work a window samples: `kernels` gwork kernels of one wave (132 blocks) on s1, waited for.
static void run_work(int kernels) {
  for (int i = 0; i < kernels; ++i) gwork<0><<<132, 256, 0, s1>>>(d_f, 1000);
  CHECK(cudaStreamSynchronize(s1));
}

// One window on the enabled g_ctx: Start, the work, Stop, then GetData until it is empty.
static Tally sample_window(int kernels) {
  pc_start(g_ctx, nullptr);
  run_work(kernels);
  pc_stop(g_ctx, nullptr);
  return drain(g_ctx);
}

// ================================================================ phase sleepspan
static void phase_sleepspan() {
  g_main = "sleepspan";
  // A warm cycle: the process's first Enable (P3: ~100 ms) is not an episode's.
  {
    double en = 0, cf = 0, dis = 0;
    CUptiResult r = pc_enable(g_ctx, &en);
    CUptiResult rc = configure(g_ctx, SERIALIZED, -1, true, &cf, "warm");
    CUptiResult rsp;
    uint32_t span = get_attr_u32(g_ctx, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN, &rsp);
    Tally t = sample_window(20);
    pc_disable(g_ctx, &dis);
    printf("FACT sleepspan_warm enable_rc=%s enable_ms=%.3f configure_rc=%s configure_ms=%.3f "
           "default_span=%u span_rc=%s disable_ms=%.3f %s\n",
           rs(r), en, rs(rc), cf, span, rs(rsp), dis, tally_str(t).c_str());
  }
  const int spans[] = {-1, 20, 5, 1, 0};
  for (int span : spans) {
    const double eff = span < 0 ? 100 : span;
    std::vector<double> lms, ens, cfs, dis, stops, frac_imm, frac_1x, imm_rec, tot_rec, dis_only, dis_only_rec;
    bool failed = false;
    for (int k = 0; k < 5 && !failed; ++k) {
      double en = 0, cf = 0, ds = 0, sp = 0;
      CUptiResult r = pc_enable(g_ctx, &en);
      CUptiResult rc = configure(g_ctx, SERIALIZED, span, k == 0, &cf, "sleepspan");
      if (r != CUPTI_SUCCESS || rc != CUPTI_SUCCESS) {
        printf("FACT sleepspan_fail span=%d k=%d enable=%s configure=%s\n", span, k, rs(r), rs(rc));
        pc_disable(g_ctx, &ds);
        failed = true;
        break;
      }
      if (k == 0) {
        CUptiResult rsp;
        uint32_t v = get_attr_u32(g_ctx, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN, &rsp);
        printf("FACT sleepspan_readback span=%d value=%u rc=%s\n", span, v, rs(rsp));
      }
      CUptiResult r1 = pc_start(g_ctx, nullptr);
      g_main = "sleepspan_launches";
      double tl = now_ms();
      run_work(20);
      tl = (now_ms() - tl) / 20;
      CUptiResult r2 = pc_stop(g_ctx, &sp);
      Tally t0 = drain(g_ctx);
      sleep_ms(eff);
      Tally t1 = drain(g_ctx);
      sleep_ms(eff);
      Tally t2 = drain(g_ctx);
      CUptiResult rd = pc_disable(g_ctx, &ds);
      Tally t3 = cfg_tally();
      double tot = (double)(t0.hw + t1.hw + t2.hw + t3.hw);
      double totr = (double)(t0.records + t1.records + t2.records + t3.records);
      printf("FACT sleepspan_cycle span=%d k=%d enable_ms=%.3f configure_ms=%.3f start=%s stop=%s "
             "disable_rc=%s disable_ms=%.3f launch_ms=%.3f | immediate records=%zu samples=%llu total=%llu | +1x "
             "records=%zu samples=%llu | +2x records=%zu samples=%llu | in_disable_buffer records=%zu "
             "samples=%llu | nonusr=%llu\n",
             span, k, en, cf, rs(r1), rs(r2), rs(rd), ds, tl, t0.records, (unsigned long long)t0.hw,
             (unsigned long long)t0.total, t1.records, (unsigned long long)t1.hw, t2.records,
             (unsigned long long)t2.hw, t3.records, (unsigned long long)t3.hw,
             (unsigned long long)(t0.nonusr + t1.nonusr + t2.nonusr + t3.nonusr));
      ens.push_back(en);
      cfs.push_back(cf);
      dis.push_back(ds);
      stops.push_back(sp);
      lms.push_back(tl);
      frac_imm.push_back(tot > 0 ? t0.hw / tot : -1);
      frac_1x.push_back(tot > 0 ? (t0.hw + t1.hw) / tot : -1);
      imm_rec.push_back((double)t0.records);
      tot_rec.push_back(totr);
    }
    if (failed) continue;
    // Variant: Disable right after Stop, no GetData: what does Disable cost then, and does the
    // configured buffer get the window's records?
    for (int k = 0; k < 3; ++k) {
      double en = 0, cf = 0, ds = 0;
      pc_enable(g_ctx, &en);
      configure(g_ctx, SERIALIZED, span, false, &cf, "sleepspan_b");
      pc_start(g_ctx, nullptr);
      g_main = "sleepspan_launches_b";
      run_work(20);
      pc_stop(g_ctx, nullptr);
      CUptiResult rd = pc_disable(g_ctx, &ds);
      Tally t3 = cfg_tally();
      printf("FACT sleepspan_stop_disable span=%d k=%d disable_rc=%s disable_ms=%.3f in_disable_buffer "
             "records=%zu samples=%llu total=%llu\n",
             span, k, rs(rd), ds, t3.records, (unsigned long long)t3.hw, (unsigned long long)t3.total);
      dis_only.push_back(ds);
      dis_only_rec.push_back((double)t3.records);
    }
    printf("FACT sleepspan_summary span=%d(%s) cycles=%zu enable_ms min=%.3f med=%.3f configure_ms "
           "min=%.3f med=%.3f disable_after_drains_ms min=%.3f med=%.3f max=%.3f stop_ms med=%.4f "
           "immediate_fraction_of_samples min=%.3f med=%.3f after_1x min=%.3f med=%.3f "
           "launch_ms_in_window_med=%.3f records_immediate_med=%.0f records_total_med=%.0f disable_right_after_stop_ms min=%.3f "
           "med=%.3f records_in_disable_buffer_med=%.0f\n",
           span, span < 0 ? "default" : "set", ens.size(), vmin(ens), median(ens), vmin(cfs),
           median(cfs), vmin(dis), median(dis), vmax(dis), median(stops), vmin(frac_imm),
           median(frac_imm), vmin(frac_1x), median(frac_1x), median(lms), median(imm_rec), median(tot_rec),
           vmin(dis_only), median(dis_only), median(dis_only_rec));
  }
}

// A watcher thread (no context current): disables PC sampling each time `req` passes what it has
// seen, its result in *rd and its time in *ds, then acks with `ack`; until quit.
static std::thread disable_watcher(std::atomic<bool> &quit, std::atomic<int> &req,
                                   std::atomic<int> &ack, CUptiResult *rd, double *ds) {
  return std::thread([&quit, &req, &ack, rd, ds] {
    int seen = 0;
    while (!quit) {
      if (req.load() > seen) {
        seen = req.load();
        *rd = pc_disable(g_ctx, ds);
        ack = seen;
      } else {
        sleep_ms(0.2);
      }
    }
  });
}

// ================================================================ phase offthread
static void phase_offthread(const std::string &variant) {
  std::atomic<bool> done{false};
  std::atomic<long> launched{0}, launch_errors{0};
  std::vector<double> ens, cfs, dss;
  std::vector<std::string> fails;
  if (variant == "nocur" || variant == "cur") {
    std::thread helper([&] {
      if (variant == "cur") {
        CUresult cr = cuCtxSetCurrent(g_ctx);
        printf("FACT offthread_set_current rc=%d\n", (int)cr);
      }
      CUcontext c = nullptr;
      cuCtxGetCurrent(&c);
      printf("FACT offthread_helper variant=%s context_current=%d\n", variant.c_str(), c == g_ctx);
      sleep_ms(20);  // the main loop is launching by now
      for (int i = 0; i < 20; ++i) {
        double en = 0, cf = 0, ds = 0;
        CUptiResult r = pc_enable(g_ctx, &en);
        CUptiResult rc = r == CUPTI_SUCCESS ? configure(g_ctx, SERIALIZED, 10, i == 0, &cf, "offthread") : r;
        sleep_ms(3);
        CUptiResult rd = pc_disable(g_ctx, &ds);
        sleep_ms(3);
        ens.push_back(en);
        cfs.push_back(cf);
        dss.push_back(ds);
        if (r != CUPTI_SUCCESS || rc != CUPTI_SUCCESS || rd != CUPTI_SUCCESS) {
          char b[160];
          snprintf(b, sizeof b, "i%d:enable=%s,configure=%s,disable=%s", i, rs(r), rs(rc), rs(rd));
          fails.push_back(b);
        }
      }
      done = true;
    });
    g_main = "offthread_main_launch_loop";
    double t0 = now_ms();
    while (!done && now_ms() - t0 < 15000) {
      for (int i = 0; i < 64; ++i) {
        tiny<<<1, 32, 0, s1>>>(d_tiny);
        if (cudaGetLastError() != cudaSuccess) launch_errors++;
      }
      launched += 64;
      if (cudaStreamSynchronize(s1) != cudaSuccess) launch_errors++;
    }
    double loop_ms = now_ms() - t0;
    g_main = "offthread_join";
    helper.join();
    printf("FACT offthread_result variant=%s helper_done=%d launched=%ld launch_errors=%ld loop_ms=%.1f "
           "launch_ns=%.0f enable_ms min=%.3f med=%.3f max=%.3f configure_ms med=%.3f max=%.3f "
           "disable_ms min=%.3f med=%.3f max=%.3f failures=%zu",
           variant.c_str(), (int)done.load(), launched.load(), launch_errors.load(), loop_ms,
           loop_ms * 1e6 / std::max(1L, launched.load()), vmin(ens), median(ens), vmax(ens),
           median(cfs), vmax(cfs), vmin(dss), median(dss), vmax(dss), fails.size());
    for (auto &f : fails) printf(" %s", f.c_str());
    printf("\n");
    // Does a window still work on this context after all that?
    double en = 0, cf = 0, ds = 0;
    pc_enable(g_ctx, &en);
    configure(g_ctx, SERIALIZED, 10, false, &cf, "after");
    Tally t = sample_window(5);
    pc_disable(g_ctx, &ds);
    printf("FACT offthread_window_after variant=%s %s\n", variant.c_str(), tally_str(t).c_str());
    return;
  }
  // afterstop: the main thread enables, samples a window, stops and drains; a watcher thread
  // (context not current) then disables while the main thread launches.
  std::atomic<int> req{0}, ack{0};
  std::atomic<bool> quit{false};
  double last_ds = 0;
  CUptiResult last_rd = CUPTI_SUCCESS;
  std::thread watcher = disable_watcher(quit, req, ack, &last_rd, &last_ds);
  std::vector<double> winrec;
  for (int w = 1; w <= 10; ++w) {
    double en = 0, cf = 0;
    g_main = "afterstop_enable";
    CUptiResult r = pc_enable(g_ctx, &en);
    CUptiResult rc = configure(g_ctx, SERIALIZED, 10, w == 1, &cf, "afterstop");
    pc_start(g_ctx, nullptr);
    g_main = "afterstop_window";
    run_work(5);
    pc_stop(g_ctx, nullptr);
    Tally t = drain(g_ctx);
    winrec.push_back((double)t.records);
    req = w;
    g_main = "afterstop_launch_while_watcher_disables";
    long n = 0;
    double t0 = now_ms();
    while (ack.load() < w && now_ms() - t0 < 10000) {
      for (int i = 0; i < 16; ++i) {
        tiny<<<1, 32, 0, s1>>>(d_tiny);
        if (cudaGetLastError() != cudaSuccess) launch_errors++;
      }
      n += 16;
      if (cudaStreamSynchronize(s1) != cudaSuccess) launch_errors++;
    }
    launched += n;
    ens.push_back(en);
    cfs.push_back(cf);
    dss.push_back(last_ds);
    if (r != CUPTI_SUCCESS || rc != CUPTI_SUCCESS || last_rd != CUPTI_SUCCESS || ack.load() < w) {
      char b[200];
      snprintf(b, sizeof b, "w%d:enable=%s,configure=%s,disable=%s,acked=%d", w, rs(r), rs(rc),
               rs(last_rd), ack.load() >= w);
      fails.push_back(b);
    }
  }
  quit = true;
  g_main = "afterstop_join";
  watcher.join();
  printf("FACT offthread_result variant=afterstop windows=10 launched_during_disables=%ld "
         "launch_errors=%ld enable_ms med=%.3f max=%.3f disable_ms(watcher) min=%.3f med=%.3f max=%.3f "
         "records_per_window med=%.0f failures=%zu",
         launched.load(), launch_errors.load(), median(ens), vmax(ens), vmin(dss), median(dss),
         vmax(dss), median(winrec), fails.size());
  for (auto &f : fails) printf(" %s", f.c_str());
  printf("\n");
}

// ================================================================ phase activity
static void act_launches(int n) {
  g_main = "act_launches";
  for (int i = 0; i < n; ++i) tiny<<<1, 32, 0, s1>>>(d_tiny);
}
static void print_act(const char *what, const ActCount &c) {
  printf("FACT activity_records %s concurrent_kernel=%ld kernel=%ld other=%ld dropped=%ld\n", what,
         c.conc, c.kern, c.other, c.dropped);
}
// One probe of the phase: 100 tiny launches, then the activity records they left (named `what`).
static void print_act_of_100(const char *what) {
  act_launches(100);
  print_act(what, act_take());
}
// "FACT <fact> rc=<name> (<number>)": the result of one cuptiActivity* call.
static void print_act_rc(const char *fact, CUptiResult r) {
  printf("FACT %s rc=%s (%d)\n", fact, rs(r), (int)r);
}
static void phase_activity(const std::string &mode_s) {
  Mode mode = mode_s == "continuous" ? CONTINUOUS : SERIALIZED;
  double ms = 0;
  act_take();
  print_act_of_100("a_on_before_pc_100");
  CUptiResult r = pc_enable(g_ctx, &ms);
  CUptiResult rc = configure(g_ctx, mode, 10, true, &ms, "activity");
  printf("FACT activity_pc_enable mode=%s rc=%s configure=%s\n", mode_s.c_str(), rs(r), rs(rc));
  print_act_of_100("b_pc_enabled_100");
  r = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  print_act_rc("activity_disable_concurrent_while_pc_enabled", r);
  print_act_of_100("c_after_disable_100");
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  print_act_rc("activity_reenable_concurrent_while_pc_enabled", r);
  CUptiResult rk = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_KERNEL);
  print_act_rc("activity_enable_KERNEL_while_pc_enabled", rk);
  print_act_of_100("d_after_reenable_attempts_100");
  CUptiResult rx = cuptiActivityEnableContext(g_ctx, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  print_act_rc("activity_enable_context_concurrent_while_pc_enabled", rx);
  CUptiResult rxk = cuptiActivityEnableContext(g_ctx, CUPTI_ACTIVITY_KIND_KERNEL);
  print_act_rc("activity_enable_context_KERNEL_while_pc_enabled", rxk);
  print_act_of_100("e_after_enable_context_100");
  // Switch off what is on, then PC off.
  CUptiResult d1 = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  CUptiResult d2 = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_KERNEL);
  CUptiResult d3 = cuptiActivityDisableContext(g_ctx, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  CUptiResult d4 = cuptiActivityDisableContext(g_ctx, CUPTI_ACTIVITY_KIND_KERNEL);
  printf("FACT activity_disable_all rc=%s,%s,%s,%s\n", rs(d1), rs(d2), rs(d3), rs(d4));
  print_act_of_100("f_all_disabled_pc_enabled_100");
  CUptiResult rd = pc_disable(g_ctx, &ms);
  printf("FACT activity_pc_disable rc=%s ms=%.3f\n", rs(rd), ms);
  print_act_of_100("g_pc_disabled_activity_off_100");
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  print_act_rc("activity_enable_concurrent_after_pc_disable", r);
  print_act_of_100("h_after_pc_disable_reenabled_100");
  // The episode cycle again: PC enabled with activity on, activity off during it? on after?
  r = pc_enable(g_ctx, &ms);
  rc = configure(g_ctx, mode, 10, false, &ms, "activity2");
  printf("FACT activity_pc_reenable_with_activity_on rc=%s configure=%s ms=%.3f\n", rs(r), rs(rc), ms);
  pc_start(g_ctx, nullptr);
  act_launches(20);
  CHECK(cudaDeviceSynchronize());
  pc_stop(g_ctx, nullptr);
  Tally t = drain(g_ctx);
  printf("FACT activity_window_with_activity_on %s\n", tally_str(t).c_str());
  print_act_of_100("i_pc_reenabled_window_then_100");
  rd = pc_disable(g_ctx, &ms);
  printf("FACT activity_pc_disable2 rc=%s ms=%.3f\n", rs(rd), ms);
  print_act_of_100("j_after_second_pc_disable_100");
  // Off, PC on, then enable activity (the failure of P12), then PC off, on again.
  d1 = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  pc_enable(g_ctx, &ms);
  configure(g_ctx, mode, 10, false, &ms, "activity3");
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  printf("FACT activity_enable_after_pc_enable mode=%s disable_before=%s rc=%s (%d)\n", mode_s.c_str(),
         rs(d1), rs(r), (int)r);
  pc_disable(g_ctx, &ms);
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  act_launches(100);
  ActCount c = act_take();
  printf("FACT activity_enable_after_failed_then_pc_disable rc=%s records_of_100=%ld\n", rs(r), c.conc);
}

// ================================================================ phase cost
static const char *kStates[] = {"none", "callbacks", "activity", "ser", "ser_act", "cont", "cont_act", "cont_started"};

// The steps that make the cost phase's graph: stream capture of 4 empty kernels, instantiate,
// upload. Which of them run inside the episode is what cost_after_episode varies.
struct CostGraph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  void capture(cudaStream_t s) {
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int k = 0; k < 4; ++k) empty_kernel<<<1, 1, 0, s>>>();
    CHECK(cudaStreamEndCapture(s, &graph));
  }
  void instantiate() {
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphDestroy(graph));
  }
  void upload(cudaStream_t s) { CHECK(cudaGraphUpload(exec, s)); }
  // Steps 0 (capture), 1 (instantiate), 2 (upload) from `from` up to, not including, `to`.
  void steps(int from, int to, cudaStream_t s) {
    for (int k = from; k < to; ++k) {
      if (k == 0) capture(s);
      if (k == 1) instantiate();
      if (k == 2) upload(s);
    }
  }
};

// After an episode as the library runs one (kernel activity on, PC sampling enabled
// kernel-serialized, a window over a few launches, stopped, drained, disabled, activity off), do
// launches cost what they cost before it? `in_episode` is how many of the graph's steps
// (capture, instantiate, upload) run inside the episode, after those before it:
//   after_ep_pre   all three before the Enable, the graph launched in the window
//   after_ep       all three inside the episode (its kernels give records later, P19)
//   after_ep_cap   captured inside, instantiated and uploaded after the Disable
//   after_ep_inst  captured and instantiated inside, uploaded after
//   after_ep_post  all three after the Disable (between episodes: the library uploads graphs
//                  there by default, P24)
static void cost_after_episode(int before, int in_episode, CostGraph *g, cudaStream_t s) {
  g->steps(0, before, s);
  activity_register();
  CUptiResult ra = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  double ms = 0, cf = 0;
  CUptiResult r = pc_enable(g_ctx, &ms);
  CUptiResult rc = configure(g_ctx, SERIALIZED, 10, false, &cf, "cost");
  g->steps(before, before + in_episode, s);
  void *noargs[1] = {nullptr};
  CUptiResult rs1 = pc_start(g_ctx, nullptr);
  for (int i = 0; i < 8; ++i) CHECK(cudaLaunchKernel((const void *)empty_kernel, dim3(1), dim3(1), noargs, 0, s));
  if (before + in_episode == 3) CHECK(cudaGraphLaunch(g->exec, s));
  CUptiResult rs2 = pc_stop(g_ctx, nullptr);
  Tally t = drain(g_ctx);
  double dms = 0;
  CUptiResult rd = pc_disable(g_ctx, &dms);
  CUptiResult rad = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  CHECK(cudaStreamSynchronize(s));
  g->steps(before + in_episode, 3, s);
  printf("FACT cost_after_episode steps_before=%d steps_in_episode=%d act=%s enable=%s configure=%s "
         "start=%s stop=%s disable=%s (%.1f ms) act_off=%s %s\n", before, in_episode, rs(ra), rs(r),
         rs(rc), rs(rs1), rs(rs2), rs(rd), dms, rs(rad), tally_str(t).c_str());
}

static void phase_cost(const std::string &state) {
  const bool after = state.rfind("after_ep", 0) == 0;
  const bool cb = state != "none";
  const bool act = state == "activity" || state == "ser_act" || state == "cont_act";
  const bool pc = !after && (state.rfind("ser", 0) == 0 || state.rfind("cont", 0) == 0);
  const Mode mode = state.rfind("cont", 0) == 0 ? CONTINUOUS : SERIALIZED;
  const bool started = state == "cont_started";
  if (cb) subscribe_launch_cbids();
  if (act) {
    activity_register();
    CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    printf("FACT cost_activity_enable rc=%s\n", rs(r));
  }
  setup_cuda();
  if (pc) {
    double ms = 0, cf = 0;
    CUptiResult r = pc_enable(g_ctx, &ms);
    CUptiResult rc = configure(g_ctx, mode, 10, false, &cf, "cost");
    if (r != CUPTI_SUCCESS || rc != CUPTI_SUCCESS) {
      printf("FACT cost_pc_failed state=%s enable=%s configure=%s\n", state.c_str(), rs(r), rs(rc));
      return;
    }
  }
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CostGraph cg;
  if (after) {
    const bool act_again = state == "after_ep_post_act";
    const int before = state == "after_ep_pre" ? 3 : 0;
    const int in_episode = state == "after_ep" ? 3 : state == "after_ep_inst" ? 2
                         : state == "after_ep_cap" ? 1 : 0;
    cost_after_episode(before, in_episode, &cg, s);
    // after_ep_post_act: kernel activity on again after the episode, as the library turns it on
    // around announced launches between episodes (P25).
    if (act_again) {
      CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      printf("FACT cost_activity_reenable rc=%s\n", rs(r));
    }
  } else {
    cg.steps(0, 3, s);
  }
  cudaGraphExec_t exec = cg.exec;
  if (started) {
    CUptiResult r = pc_start(g_ctx, nullptr);
    printf("FACT cost_start rc=%s\n", rs(r));
  }
  g_main = "cost_warmup";
  void *noargs[1] = {nullptr};
  for (int i = 0; i < 2000; ++i) CHECK(cudaLaunchKernel((const void *)empty_kernel, dim3(1), dim3(1), noargs, 0, s));
  for (int i = 0; i < 500; ++i) CHECK(cudaGraphLaunch(exec, s));
  CHECK(cudaStreamSynchronize(s));
  g_main = "cost_eager";
  const int NE = 20000, NG = 5000;
  double t0 = now_ms();
  for (int i = 0; i < NE; ++i) cudaLaunchKernel((const void *)empty_kernel, dim3(1), dim3(1), noargs, 0, s);
  CHECK(cudaStreamSynchronize(s));
  double eager = (now_ms() - t0) * 1e6 / NE;
  g_main = "cost_graph";
  t0 = now_ms();
  for (int i = 0; i < NG; ++i) cudaGraphLaunch(exec, s);
  CHECK(cudaStreamSynchronize(s));
  double graph = (now_ms() - t0) * 1e6 / NG;
  CHECK(cudaGetLastError());
  printf("FACT cost_round state=%s eager_ns=%.1f graph_ns=%.1f\n", state.c_str(), eager, graph);
  if (started) {
    pc_stop(g_ctx, nullptr);
    sleep_ms(30);
    Tally t = drain(g_ctx);
    printf("FACT cost_started_samples %s\n", tally_str(t).c_str());
  }
  if (act) print_act("cost", act_take());
}

// ================================================================ phase continuous
// Launches the graphs on s1 in order (a null exec left out) and waits for them.
static void launch_and_wait(std::initializer_list<cudaGraphExec_t> graphs) {
  for (cudaGraphExec_t g : graphs)
    if (g) CHECK(cudaGraphLaunch(g, s1));
  CHECK(cudaStreamSynchronize(s1));
}
static void phase_continuous_body() {
  double ms = 0;
  cudaGraphExec_t ge = make_graph<5>(2, 132, 1000);  // graph-first kernel
  launch_and_wait({ge});
  printf("FACT cont_concurrency_ms none=%.3f (20 pairs of ~1 ms kernels; 20 = overlapped, 40 = serialized)\n",
         concurrency(20));
  printf("FACT cont_tiny_ns none=%.1f\n", tiny_launches(5000));
  CUptiResult r = pc_enable(g_ctx, &ms);
  CUptiResult rc = configure(g_ctx, CONTINUOUS, 10, true, &ms, "continuous");
  printf("FACT cont_enable rc=%s configure=%s\n", rs(r), rs(rc));
  printf("FACT cont_concurrency_ms enabled_not_started=%.3f\n", concurrency(20));
  printf("FACT cont_tiny_ns enabled_not_started=%.1f\n", tiny_launches(5000));
  size_t l0 = launches_now();
  r = pc_start(g_ctx, &ms);
  printf("FACT cont_start rc=%s ms=%.3f\n", rs(r), ms);
  g_main = "cont_window";
  double t0 = now_ms();
  for (int i = 0; i < 5; ++i) {
    gwork<0><<<132 * 4, 256, 0, s1>>>(d_f, 2000);
    membound<<<132 * 4, 256, 0, s1>>>(d_in, d_out, kN);
    CHECK(cudaGraphLaunch(ge, s1));
  }
  CHECK(cudaStreamSynchronize(s1));
  printf("FACT cont_window_ms %.3f (5 x gwork0 + membound + 2-node graph)\n", now_ms() - t0);
  r = pc_stop(g_ctx, &ms);
  Tally a = drain(g_ctx);
  sleep_ms(30);
  Tally b = drain(g_ctx);
  printf("FACT cont_launches %zu:", launches_now() - l0);
  for (auto &x : launches_since(l0)) printf(" %u=%s", x.first, x.second.c_str());
  printf("\n");
  printf("FACT cont_drain_immediate %s\n", tally_str(a).c_str());
  printf("FACT cont_drain_after_30ms %s\n", tally_str(b).c_str());
  // Started: per-launch cost and concurrency.
  pc_start(g_ctx, nullptr);
  printf("FACT cont_concurrency_ms started=%.3f\n", concurrency(20));
  printf("FACT cont_tiny_ns started=%.1f\n", tiny_launches(5000));
  pc_stop(g_ctx, nullptr);
  sleep_ms(30);
  Tally c = drain(g_ctx);
  printf("FACT cont_drain_spin_window %s\n", tally_str(c).c_str());
  CUptiResult rd = pc_disable(g_ctx, &ms);
  Tally d = cfg_tally();
  printf("FACT cont_disable rc=%s ms=%.3f in_disable_buffer records=%zu\n", rs(rd), ms, d.records);
  // For comparison: kernel-serialized, started, the same concurrency test.
  pc_enable(g_ctx, &ms);
  configure(g_ctx, SERIALIZED, 10, false, &ms, "ser_cmp");
  pc_start(g_ctx, nullptr);
  printf("FACT cont_concurrency_ms serialized_started_10_pairs=%.3f\n", concurrency(10));
  pc_stop(g_ctx, nullptr);
  drain(g_ctx);
  pc_disable(g_ctx, &ms);
}

// ================================================================ phase serialgraph
static void phase_serialgraph() {
  g_record = true;
  double ms = 0;
  const char *ml = getenv("CUDA_MODULE_LOADING");
  printf("FACT serialgraph module_loading=%s\n", ml ? ml : "(default)");
  // Before PC enable: gwork<1> first loaded by a graph; gwork<2> launched eagerly, then a graph.
  cudaGraphExec_t g1 = make_graph<1>(2, 132 * 4, 2000);
  gwork<2><<<132 * 4, 256, 0, s1>>>(d_f, 2000);
  CHECK(cudaStreamSynchronize(s1));
  cudaGraphExec_t g2 = make_graph<2>(2, 132 * 4, 2000);
  launch_and_wait({g1, g2});
  CUptiResult r = pc_enable(g_ctx, &ms);
  CUptiResult rc = configure(g_ctx, SERIALIZED, 10, true, &ms, "serialgraph");
  printf("FACT serialgraph_enable rc=%s configure=%s\n", rs(r), rs(rc));
  // After PC enable: gwork<3> first loaded by a graph; gwork<4> eager only, first used in a window.
  cudaGraphExec_t g3 = make_graph<3>(2, 132 * 4, 2000);
  struct W {
    const char *name;
    int what;
  } ws[] = {{"graph_g1_graphfirst_before_enable", 1}, {"graph_g2_eagerfirst_before_enable", 2},
            {"graph_g3_graphfirst_after_enable", 3},   {"eager_gwork1_graph_loaded", 11},
            {"eager_gwork2", 12},                      {"eager_gwork3_graph_loaded", 13},
            {"eager_gwork4_first_use_in_window", 14},  {"graph_g1_again", 1}};
  for (auto &w : ws) {
    size_t l0 = launches_now();
    pc_start(g_ctx, nullptr);
    g_main = w.name;
    for (int i = 0; i < 2; ++i) {
      switch (w.what) {
        case 1: CHECK(cudaGraphLaunch(g1, s1)); break;
        case 2: CHECK(cudaGraphLaunch(g2, s1)); break;
        case 3: CHECK(cudaGraphLaunch(g3, s1)); break;
        case 11: gwork<1><<<132 * 4, 256, 0, s1>>>(d_f, 2000); break;
        case 12: gwork<2><<<132 * 4, 256, 0, s1>>>(d_f, 2000); break;
        case 13: gwork<3><<<132 * 4, 256, 0, s1>>>(d_f, 2000); break;
        case 14: gwork<4><<<132 * 4, 256, 0, s1>>>(d_f, 2000); break;
      }
    }
    CHECK(cudaStreamSynchronize(s1));
    pc_stop(g_ctx, nullptr);
    Tally t = drain(g_ctx);
    sleep_ms(30);
    t.add(drain(g_ctx));
    printf("FACT serialgraph_window %s launches:", w.name);
    for (auto &x : launches_since(l0)) printf(" %u=%s", x.first, x.second.c_str());
    printf(" | %s\n", tally_str(t).c_str());
  }
  pc_disable(g_ctx, &ms);
  Tally d = cfg_tally();
  printf("FACT serialgraph_disable ms=%.3f in_disable_buffer records=%zu\n", ms, d.records);
}


// ================================================================ phase firstwindow
// Where an episode's time goes: Start, each of the first launches in the first and second window
// after Enable (timed one by one, synchronized), Stop, GetData, Disable; per hardware buffer size.
static void phase_firstwindow(const std::string &mode_s) {
  const Mode mode = mode_s == "continuous" ? CONTINUOUS : SERIALIZED;
  {  // the process's first Enable, not an episode's
    double ms = 0;
    pc_enable(g_ctx, &ms);
    configure(g_ctx, mode, 10, true, &ms, "firstwindow_warm");
    pc_disable(g_ctx, &ms);
  }
  const size_t sizes[] = {0, 64u << 20, 8u << 20, 1u << 20};
  for (size_t hw : sizes) {
    g_hwbuf = hw;
    for (int ep = 0; ep < 2; ++ep) {
      double en = 0, cf = 0, ds = 0;
      CUptiResult r = pc_enable(g_ctx, &en);
      CUptiResult rc = configure(g_ctx, mode, 10, ep == 0 && hw == (1u << 20), &cf, "firstwindow");
      std::string line;
      char b[200];
      for (int w = 0; w < 2; ++w) {
        double st = 0, sp = 0;
        CUptiResult r1 = pc_start(g_ctx, &st);
        snprintf(b, sizeof b, " | w%d start=%s %.3fms launches_ms=", w, rs(r1), st);
        line += b;
        g_main = "firstwindow_launches";
        for (int i = 0; i < 5; ++i) {
          double t0 = now_ms();
          gwork<0><<<132, 256, 0, s1>>>(d_f, 1000);
          CHECK(cudaStreamSynchronize(s1));
          snprintf(b, sizeof b, "%.3f,", now_ms() - t0);
          line += b;
        }
        pc_stop(g_ctx, &sp);
        Tally t = drain(g_ctx);
        snprintf(b, sizeof b, " stop=%.3fms getdata=%.3fms records=%zu", sp, t.ms, t.records);
        line += b;
      }
      CUptiResult rd = pc_disable(g_ctx, &ds);
      printf("FACT firstwindow mode=%s hwbuf=%zu ep=%d enable=%s %.3fms configure=%s %.3fms%s | "
             "disable=%s %.3fms\n",
             mode_s.c_str(), hw, ep, rs(r), en, rs(rc), cf, line.c_str(), rs(rd), ds);
    }
  }
  g_hwbuf = 0;
  // Enabled but never started: what does Disable cost then (P3: 0.1 ms)? And started with no
  // launch inside the window?
  double en = 0, cf = 0, ds = 0, st = 0;
  pc_enable(g_ctx, &en);
  configure(g_ctx, mode, 10, false, &cf, "nostart");
  pc_disable(g_ctx, &ds);
  printf("FACT firstwindow_never_started mode=%s disable_ms=%.3f\n", mode_s.c_str(), ds);
  pc_enable(g_ctx, &en);
  configure(g_ctx, mode, 10, false, &cf, "emptywindow");
  pc_start(g_ctx, &st);
  pc_stop(g_ctx, nullptr);
  drain(g_ctx);
  pc_disable(g_ctx, &ds);
  printf("FACT firstwindow_empty_window mode=%s start_ms=%.3f disable_ms=%.3f\n", mode_s.c_str(), st, ds);
}

// ================================================================ phase graphepisode
// Which graphs give records in a later episode: instantiated before any Enable, during an
// earlier episode, between episodes, captured before and instantiated during.
static void graph_window(const char *name, cudaGraphExec_t g, int eager_k) {
  size_t l0 = launches_now();
  pc_start(g_ctx, nullptr);
  g_main = name;
  if (g) {
    CHECK(cudaGraphLaunch(g, s1));
    CHECK(cudaGraphLaunch(g, s1));
  }
  switch (eager_k) {
    case 0: gwork<0><<<132 * 4, 256, 0, s1>>>(d_f, 2000); break;
    case 21: gwork<21><<<132 * 4, 256, 0, s1>>>(d_f, 2000); break;
    case 22: gwork<22><<<132 * 4, 256, 0, s1>>>(d_f, 2000); break;
    case 23: gwork<23><<<132 * 4, 256, 0, s1>>>(d_f, 2000); break;
    default: break;
  }
  CHECK(cudaStreamSynchronize(s1));
  pc_stop(g_ctx, nullptr);
  Tally t = drain(g_ctx);
  sleep_ms(20);
  t.add(drain(g_ctx));
  printf("FACT graphepisode_window %s launches:", name);
  for (auto &x : launches_since(l0)) printf(" %u=%s", x.first, x.second.c_str());
  printf(" | %s\n", tally_str(t).c_str());
}
// An episode (kernel-serialized) whose windows each launch one graph twice (graph_window), in
// order; a null exec is left out.
static void graph_windows(const char *where,
                          std::initializer_list<std::pair<const char *, cudaGraphExec_t>> graphs) {
  double ms = 0;
  pc_enable(g_ctx, &ms);
  configure(g_ctx, SERIALIZED, 10, false, &ms, where);
  for (const auto &g : graphs)
    if (g.second) graph_window(g.first, g.second, -1);
  pc_disable(g_ctx, &ms);
}
static void phase_graphepisode() {
  g_record = true;
  double ms = 0;
  cudaGraphExec_t gA = make_graph<20>(2, 132 * 4, 2000);  // before any Enable, launched
  CHECK(cudaGraphLaunch(gA, s1));
  cudaGraphExec_t gF = make_graph<25>(2, 132 * 4, 2000);  // before any Enable, never launched before
  cudaGraph_t capD;                                       // captured before, instantiated later
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  gwork<24><<<132 * 4, 256, 0, s1>>>(d_f, 2000);
  gwork<24><<<132 * 4, 256, 0, s1>>>(d_f, 2000);
  CHECK(cudaStreamEndCapture(s1, &capD));
  CHECK(cudaStreamSynchronize(s1));
  // Episode 1.
  pc_enable(g_ctx, &ms);
  configure(g_ctx, SERIALIZED, 10, true, &ms, "graphepisode1");
  cudaGraphExec_t gB = make_graph<21>(2, 132 * 4, 2000);  // instantiated during episode 1
  graph_window("ep1_gB_instantiated_in_ep1", gB, -1);
  graph_window("ep1_gA_before_any_enable", gA, -1);
  pc_disable(g_ctx, &ms);
  // Between episodes.
  cudaGraphExec_t gC = make_graph<22>(2, 132 * 4, 2000);
  launch_and_wait({gC});
  // Episode 2.
  pc_enable(g_ctx, &ms);
  configure(g_ctx, SERIALIZED, 10, false, &ms, "graphepisode2");
  cudaGraphExec_t gD;
  CHECK(cudaGraphInstantiate(&gD, capD, 0));
  graph_window("ep2_gA_before_any_enable", gA, -1);
  graph_window("ep2_gF_before_any_enable_never_launched", gF, -1);
  graph_window("ep2_gB_instantiated_in_ep1", gB, -1);
  graph_window("ep2_gC_instantiated_between_episodes", gC, -1);
  graph_window("ep2_gD_captured_before_instantiated_in_ep2", gD, -1);
  graph_window("ep2_eager_gwork21_of_gB", nullptr, 21);
  graph_window("ep2_eager_gwork22_of_gC", nullptr, 22);
  graph_window("ep2_eager_gwork0_never_in_graph", nullptr, 0);
  // A fresh instantiation of gA's graph during the episode (what re-instantiating would give).
  pc_disable(g_ctx, &ms);
  // Continuous mode, episode 3: the same graphs.
  pc_enable(g_ctx, &ms);
  configure(g_ctx, CONTINUOUS, 10, false, &ms, "graphepisode3");
  graph_window("ep3_continuous_gA_before_any_enable", gA, -1);
  graph_window("ep3_continuous_gC_instantiated_between_episodes", gC, -1);
  graph_window("ep3_continuous_gD", gD, -1);
  pc_disable(g_ctx, &ms);
}

// A second application thread: `tiny` 16 at a time on a stream of its own, counted in
// *launches, until quit.
static std::thread other_launcher(std::atomic<bool> &quit, std::atomic<long> &launches) {
  return std::thread([&quit, &launches] {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    while (!quit) {
      for (int i = 0; i < 16; ++i) tiny<<<1, 32, 0, s>>>(d_tiny);
      cudaStreamSynchronize(s);
      launches += 16;
    }
  });
}

// ================================================================ phase disablethreads
// Disable (and Stop) with another thread launching, per window, so a hang says which.
//   watcher_idle:    main samples a window, stops, drains; a watcher thread (no context) disables
//                    while main waits without CUDA calls.
//   watcher_launch:  the same while main launches (P13's hang, window by window).
//   main_other:      main does Start, launches, Stop, GetData, Disable itself while a second
//                    application thread launches all the time (its launches fall in the window).
static void phase_disablethreads(const std::string &variant) {
  std::atomic<bool> quit{false};
  std::atomic<long> other_launches{0};
  std::thread other;
  if (variant == "main_other") {
    other = other_launcher(quit, other_launches);
    sleep_ms(20);
  }
  std::atomic<int> req{0}, ack{0};
  double last_ds = 0;
  CUptiResult last_rd = CUPTI_SUCCESS;
  std::thread watcher;
  if (variant != "main_other") {
    watcher = disable_watcher(quit, req, ack, &last_rd, &last_ds);
  }
  for (int w = 1; w <= 5; ++w) {
    double en = 0, cf = 0, st = 0, sp = 0, ds = 0;
    g_main = "dt_enable";
    CUptiResult r = pc_enable(g_ctx, &en);
    CUptiResult rc = configure(g_ctx, SERIALIZED, 10, false, &cf, "disablethreads");
    CUptiResult r1 = pc_start(g_ctx, &st);
    g_main = "dt_window";
    run_work(3);
    g_main = "dt_stop";
    CUptiResult r2 = pc_stop(g_ctx, &sp);
    g_main = "dt_getdata";
    Tally t = drain(g_ctx);
    CUptiResult rd;
    long n = 0;
    if (variant == "main_other") {
      g_main = "dt_disable_main";
      rd = pc_disable(g_ctx, &ds);
    } else {
      req = w;
      double t0 = now_ms();
      g_main = variant == "watcher_idle" ? "dt_wait_idle_for_watcher" : "dt_launch_while_watcher_disables";
      while (ack.load() < w && now_ms() - t0 < 6000) {
        if (variant == "watcher_idle") {
          sleep_ms(0.2);
        } else {
          for (int i = 0; i < 16; ++i) tiny<<<1, 32, 0, s1>>>(d_tiny);
          cudaStreamSynchronize(s1);
          n += 16;
        }
      }
      rd = ack.load() >= w ? last_rd : CUPTI_ERROR_UNKNOWN;
      ds = last_ds;
    }
    printf("FACT disablethreads variant=%s w=%d enable=%s %.3fms configure=%s start=%s %.3fms stop=%s "
           "%.3fms getdata=%.3fms records=%zu disable=%s %.3fms acked=%d main_launches_meanwhile=%ld "
           "other_thread_launches=%ld\n",
           variant.c_str(), w, rs(r), en, rs(rc), rs(r1), st, rs(r2), sp, t.ms, t.records, rs(rd), ds,
           variant == "main_other" ? 1 : (int)(ack.load() >= w), n, other_launches.load());
  }
  quit = true;
  g_main = "dt_join";
  if (other.joinable()) other.join();
  if (watcher.joinable()) watcher.join();
}

// ================================================================ phase graphreg
// graphepisode found that a graph first launched while PC sampling was not enabled never gives
// records (nor do eager launches of its kernels), one first launched while enabled does, in later
// episodes too. Which event counts, and does a brief enable that is never started suffice?
static void phase_graphreg() {
  g_record = true;
  double ms = 0;
  cudaGraphExec_t gP = make_graph<30>(2, 132 * 4, 2000);
  cudaGraphExec_t gQ = make_graph<31>(2, 132 * 4, 2000);
  cudaGraphExec_t gS = make_graph<33>(2, 132 * 4, 2000);
  cudaGraph_t capT;
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  gwork<34><<<132 * 4, 256, 0, s1>>>(d_f, 2000);
  gwork<34><<<132 * 4, 256, 0, s1>>>(d_f, 2000);
  CHECK(cudaStreamEndCapture(s1, &capT));
  cudaGraphExec_t gT;
  CHECK(cudaGraphInstantiate(&gT, capT, 0));
  // gS, gT: first launched with PC sampling off (bad, P?)
  launch_and_wait({gS, gT});
  // Registration period: enabled, configured, never started.
  double en = 0, ds = 0, t0 = 0;
  pc_enable(g_ctx, &en);
  configure(g_ctx, SERIALIZED, 10, true, &ms, "graphreg");
  t0 = now_ms();
  CHECK(cudaGraphUpload(gP, s1));                  // gP: uploaded only
  CHECK(cudaStreamSynchronize(s1));
  double up_ms = now_ms() - t0;
  t0 = now_ms();
  // gQ: first launched
  launch_and_wait({gQ});
  double l_ms = now_ms() - t0;
  cudaGraphExec_t gR = make_graph<32>(2, 132 * 4, 2000);  // gR: instantiated only
  CHECK(cudaGraphUpload(gS, s1));                  // gS: re-uploaded while enabled
  cudaGraphExec_t gT2;
  CHECK(cudaGraphInstantiate(&gT2, capT, 0));      // gT's graph instantiated again
  launch_and_wait({gT2});
  pc_disable(g_ctx, &ds);
  printf("FACT graphreg_registration enable_ms=%.3f upload_gP_ms=%.3f first_launch_gQ_ms=%.3f "
         "disable_never_started_ms=%.3f\n", en, up_ms, l_ms, ds);
  // Between: gR first launched while disabled.
  launch_and_wait({gR});
  // The episode.
  graph_windows("graphreg_episode", {{"reg_gP_uploaded_in_unstarted_enable", gP},
                                     {"reg_gQ_first_launched_in_unstarted_enable", gQ},
                                     {"reg_gR_instantiated_in_enable_launched_between", gR},
                                     {"reg_gS_bad_then_reuploaded_in_enable", gS},
                                     {"reg_gT_bad", gT},
                                     {"reg_gT2_reinstantiated_in_enable", gT2}});
}

// ================================================================ phase shadow
// P30: a graph first launched (uploaded) while PC sampling is enabled pays about a microsecond per
// kernel on every later launch, on the CPU and on the GPU; one uploaded between episodes gives no
// records (P19). Can a graph's kernels be registered without the application's graph paying? A
// throwaway exec of the same graph ("shadow") is instantiated, uploaded and destroyed while
// enabled; the application's own exec is first launched between episodes. Controls: a graph with
// no shadow, and a graph whose own exec was uploaded while enabled. Then, outside any episode,
// what each costs per launch on the CPU and on the GPU.
template <int K>
static cudaGraph_t capture_graph(int nodes, int blocks, int iters) {
  g_main = "capture_graph";
  cudaGraph_t g;
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < nodes; ++i) gwork<K><<<blocks, 256, 0, s1>>>(d_f, iters);
  CHECK(cudaStreamEndCapture(s1, &g));
  return g;
}
static void shadow_cost(const char *name, cudaGraphExec_t e, int nodes) {
  g_main = name;
  std::vector<double> cpu, gpu;
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int round = 0; round < 5; ++round) {
    const int n = 500;
    CHECK(cudaEventRecord(a, s1));
    double t0 = now_ms();
    for (int i = 0; i < n; ++i) CHECK(cudaGraphLaunch(e, s1));
    double t1 = now_ms();
    CHECK(cudaEventRecord(b, s1));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    cpu.push_back((t1 - t0) * 1e6 / n);
    gpu.push_back(ms * 1e6 / n);
  }
  printf("FACT shadow_cost %s nodes=%d launch_ns=%.0f (%.0f..%.0f) gpu_ns_per_launch=%.0f (%.0f..%.0f)\n",
         name, nodes, median(cpu), vmin(cpu), vmax(cpu), median(gpu), vmin(gpu), vmax(gpu));
}
static bool g_shadow_captured_late = false;  // phase "shadow late"
static bool g_shadow_warmed_up = false;      // phase "shadow warm" or "shadow warmact"
static bool g_shadow_warm_activity = false;  // "warmact": the warm-up with kernel activity on
static void phase_shadow() {
  g_record = true;
  double ms = 0;
  const int nodes = 32, blocks = 132, iters = 100;  // short kernels: a per-kernel tax shows
  // captured_late: the graphs are captured after the process's first Enable, between episodes
  // (a program that captures after start-up); g44 is captured during episode 1.
  const bool late = g_shadow_captured_late;
  cudaGraph_t g40 = nullptr, g41 = nullptr, g42 = nullptr, g43 = nullptr, g44 = nullptr;
  const auto capture_all = [&] {
    g40 = capture_graph<40>(nodes, blocks, iters);
    g41 = capture_graph<41>(nodes, blocks, iters);
    g42 = capture_graph<42>(nodes, blocks, iters);
    g43 = capture_graph<43>(nodes, blocks, iters);
  };
  if (!late) capture_all();
  // warmed_up: each graph's kernel first launched eagerly before the process's first Enable, as
  // PyTorch warms a step up before capturing it (P36).
  if (g_shadow_warmed_up) {
    g_main = "shadow_warm_up";
    if (g_shadow_warm_activity) {
      activity_register();
      printf("FACT shadow_warm_activity enable=%s\n",
             rs(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)));
    }
    gwork<40><<<blocks, 256, 0, s1>>>(d_f, iters);
    gwork<41><<<blocks, 256, 0, s1>>>(d_f, iters);
    gwork<42><<<blocks, 256, 0, s1>>>(d_f, iters);
    gwork<43><<<blocks, 256, 0, s1>>>(d_f, iters);
    CHECK(cudaStreamSynchronize(s1));
    if (g_shadow_warm_activity) {
      const CUptiResult d = cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      const ActCount c = act_take();
      printf("FACT shadow_warm_activity disable=%s kernel_records=%ld\n", rs(d), c.conc);
    }
  }
  // The process's first Enable: from here on a first use outside an episode gives no records (P20).
  pc_enable(g_ctx, &ms);
  configure(g_ctx, SERIALIZED, 10, true, &ms, "shadow0");
  pc_disable(g_ctx, &ms);
  if (late) capture_all();
  // Episode 1: the shadow of g40, g42's own exec uploaded, g43 instantiated only (its own exec,
  // first launched later, between episodes: P26 says instantiation while enabled counts too).
  pc_enable(g_ctx, &ms);
  configure(g_ctx, SERIALIZED, 10, false, &ms, "shadow1");
  double t0 = now_ms();
  cudaGraphExec_t sh;
  CHECK(cudaGraphInstantiate(&sh, g40, 0));
  CHECK(cudaGraphUpload(sh, s1));
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaGraphExecDestroy(sh));
  const double shadow_ms = now_ms() - t0;
  cudaGraphExec_t e42, e43;
  CHECK(cudaGraphInstantiate(&e42, g42, 0));
  CHECK(cudaGraphUpload(e42, s1));
  CHECK(cudaGraphInstantiate(&e43, g43, 0));
  if (late) g44 = capture_graph<44>(nodes, blocks, iters);  // captured while enabled
  CHECK(cudaStreamSynchronize(s1));
  pc_disable(g_ctx, &ms);
  printf("FACT shadow_made ms=%.3f (instantiate, upload, destroy of a %d-kernel graph while enabled)\n",
         shadow_ms, nodes);
  // Between episodes: the application's execs of g40 (shadowed) and g41 (control), first launched.
  cudaGraphExec_t e40, e41, e44 = nullptr;
  CHECK(cudaGraphInstantiate(&e40, g40, 0));
  CHECK(cudaGraphInstantiate(&e41, g41, 0));
  if (late) CHECK(cudaGraphInstantiate(&e44, g44, 0));
  launch_and_wait({e40, e41, e44, e43});  // e44: null unless late
  // Episode 2: which give records.
  graph_windows("shadow2", {{"shadow_e40_app_exec_of_shadowed_graph", e40},
                            {"shadow_e41_control_no_shadow", e41},
                            {"shadow_e42_own_exec_uploaded_in_ep1", e42},
                            {"shadow_e43_instantiated_in_ep1_launched_between", e43},
                            {"shadow_e44_captured_in_ep1_instantiated_between", e44}});
  // Outside episodes: what each costs, twice in turn.
  for (int r = 0; r < 2; ++r) {
    shadow_cost("e40_shadowed", e40, nodes);
    shadow_cost("e41_control", e41, nodes);
    shadow_cost("e42_uploaded_in_episode", e42, nodes);
    shadow_cost("e43_instantiated_in_episode", e43, nodes);
    if (late) shadow_cost("e44_captured_in_episode", e44, nodes);
  }
}

// ================================================================ phase shadowlib
// P32's shadow worked here and not under the library (graph_first). The library's registration
// differs in three ways, each a flag of ARG: 'a' kernel activity (CONCURRENT_KERNEL) enabled
// before the Enable and disabled after the Disable, as the library holds it around an episode;
// 's' the shadow uploaded on a non-blocking stream of its own (driver calls: instantiate, upload,
// synchronize, destroy); 'c' the registration made inside the application's cudaGraphInstantiate
// callback (runtime API, ENTER), as the library makes it. Graphs captured late (between
// episodes), like "shadow late"; g41 is the control with no shadow.
static std::string g_shadowlib_flags;
static std::atomic<cudaGraph_t> g_shadow_in_callback{nullptr};
static bool shadowlib_flag(char f) { return g_shadowlib_flags.find(f) != std::string::npos; }
static void shadowlib_register(cudaGraph_t graph) {
  double ms = 0;
  const double t0 = now_ms();
  if (shadowlib_flag('a')) cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  pc_enable(g_ctx, &ms);
  configure(g_ctx, SERIALIZED, 10, false, &ms, "shadowlib1");
  static CUstream own = nullptr;
  if (shadowlib_flag('s') && !own && cuStreamCreate(&own, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) own = nullptr;
  CUstream st = shadowlib_flag('s') ? own : (CUstream)s1;
  CUgraphExec sh = nullptr;
  CUresult ri = cuGraphInstantiateWithFlags(&sh, (CUgraph)graph, 0);
  CUresult ru = sh ? cuGraphUpload(sh, st) : CUDA_ERROR_INVALID_VALUE;
  CUresult rs_ = cuStreamSynchronize(st);
  if (sh) cuGraphExecDestroy(sh);
  pc_disable(g_ctx, &ms);
  if (shadowlib_flag('a')) {
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  printf("FACT shadowlib_registered flags=%s instantiate=%d upload=%d sync=%d ms=%.3f\n",
         g_shadowlib_flags.c_str(), (int)ri, (int)ru, (int)rs_, now_ms() - t0);
}
static void CUPTIAPI shadowlib_cb(void *, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                                  const void *data) {
  auto *cb = static_cast<const CUpti_CallbackData *>(data);
  if (dom == CUPTI_CB_DOMAIN_RUNTIME_API && cb->callbackSite == CUPTI_API_ENTER &&
      (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000 ||
       cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v10000)) {
    cudaGraph_t g = g_shadow_in_callback.exchange(nullptr);
    if (g) shadowlib_register(g);
  }
}
static void phase_shadowlib() {
  const int nodes = 32, blocks = 132, iters = 100;
  double ms = 0;
  if (shadowlib_flag('a')) activity_register();
  if (shadowlib_flag('c')) {
    CUpti_SubscriberHandle sub;
    // One subscriber per process: this phase runs without the launch-recording one.
    CUptiResult r = cuptiSubscribe(&sub, shadowlib_cb, nullptr);
    CUptiResult r1 = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                                         CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000);
    CUptiResult r2 = cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                                         CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v10000);
    printf("FACT shadowlib_subscribe rc=%s %s %s\n", rs(r), rs(r1), rs(r2));
  }
  pc_enable(g_ctx, &ms);  // the process's first Enable (the library's learning episode)
  configure(g_ctx, SERIALIZED, 10, true, &ms, "shadowlib0");
  pc_disable(g_ctx, &ms);
  cudaGraph_t g40 = capture_graph<40>(nodes, blocks, iters);
  cudaGraph_t g41 = capture_graph<41>(nodes, blocks, iters);
  cudaGraphExec_t e40, e41;
  if (shadowlib_flag('c')) g_shadow_in_callback = g40;
  else shadowlib_register(g40);
  CHECK(cudaGraphInstantiate(&e40, g40, 0));
  CHECK(cudaGraphInstantiate(&e41, g41, 0));
  launch_and_wait({e40, e41});
  graph_windows("shadowlib2", {{"shadowlib_e40_shadowed", e40}, {"shadowlib_e41_control", e41}});
  shadow_cost("e40_shadowed", e40, nodes);
  shadow_cost("e41_control", e41, nodes);
}

// ================================================================ phase gated
// Disable with the other launching threads held at their launch callback's ENTER (a gate the
// library could keep), instead of inside a launch (disablethreads: hangs).
static std::atomic<int> g_gate{0}, g_inflight{0};
static void CUPTIAPI gate_cb(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *data) {
  auto *cb = static_cast<const CUpti_CallbackData *>(data);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    g_inflight++;
    while (g_gate.load()) {
      g_inflight--;
      while (g_gate.load()) std::this_thread::yield();
      g_inflight++;
    }
  } else {
    g_inflight--;
  }
}
static void phase_gated(const std::string &variant) {
  std::atomic<bool> quit{false};
  std::atomic<long> other_launches{0};
  std::thread other = other_launcher(quit, other_launches);
  sleep_ms(20);
  auto gated_disable = [&](double *ds, double *wait_ms) {
    double t0 = now_ms();
    g_gate = 1;
    while (g_inflight.load() > 0) std::this_thread::yield();
    *wait_ms = now_ms() - t0;
    CUptiResult r = pc_disable(g_ctx, ds);
    g_gate = 0;
    return r;
  };
  for (int w = 1; w <= 5; ++w) {
    double en = 0, cf = 0, ds = 0, wait = 0;
    g_main = "gated_enable";
    pc_enable(g_ctx, &en);
    configure(g_ctx, SERIALIZED, 10, false, &cf, "gated");
    pc_start(g_ctx, nullptr);
    g_main = "gated_window";
    run_work(3);
    pc_stop(g_ctx, nullptr);
    Tally t = drain(g_ctx);
    CUptiResult rd;
    long before = other_launches.load();
    if (variant == "watcher") {
      std::atomic<bool> dd{false};
      std::thread wt([&] {
        rd = gated_disable(&ds, &wait);
        dd = true;
      });
      g_main = "gated_main_launching_during_watcher_disable";
      while (!dd.load()) tiny<<<1, 32, 0, s1>>>(d_tiny);  // blocks at the gate meanwhile
      wt.join();
      cudaStreamSynchronize(s1);
    } else {
      g_main = "gated_disable_main";
      rd = gated_disable(&ds, &wait);
    }
    printf("FACT gated variant=%s w=%d records=%zu gate_wait_ms=%.3f disable=%s %.3fms "
           "other_thread_launches_during=%ld\n",
           variant.c_str(), w, t.records, wait, rs(rd), ds, other_launches.load() - before);
  }
  quit = true;
  g_main = "gated_join";
  other.join();
}

// ================================================================ driver
static std::string g_self;  // this program's path, which run_child runs again

static bool find_self() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return false;
  self[n] = 0;
  g_self = self;
  return true;
}

static int run_child(const std::string &args, int timeout_s, std::vector<std::string> *lines) {
  std::string cmd = "timeout -k 3 " + std::to_string(timeout_s) + " " + g_self + " " + args + " 2>&1";
  printf("PHASE %s\n", args.c_str());
  fflush(stdout);
  double t0 = now_ms();
  FILE *f = popen(cmd.c_str(), "r");
  if (!f) {
    printf("FACT child args=%s popen_failed\n", args.c_str());
    return -1;
  }
  char buf[16384];
  while (fgets(buf, sizeof buf, f)) {
    fputs(buf, stdout);
    if (lines) lines->push_back(buf);
  }
  int st = pclose(f);
  int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  printf("FACT child args=\"%s\" rc=%d ms=%.0f%s\n", args.c_str(), rc, now_ms() - t0,
         rc == 3 ? " (watchdog: hung)" : rc == 124 || rc == 137 ? " (timeout: hung)" : "");
  fflush(stdout);
  return rc;
}

// A phase run in a child process, with its time limit.
struct PhaseRun {
  const char *args;
  int timeout_s;
};
template <size_t N>
static void run_phases(const PhaseRun (&runs)[N]) {
  for (const PhaseRun &r : runs) run_child(r.args, r.timeout_s, nullptr);
}

// The phases of the first device run.
static const PhaseRun kFirstRuns[] = {
    {"sleepspan", 60},
    {"offthread nocur", 25},
    {"offthread cur", 25},
    {"offthread afterstop", 25},
    {"activity serialized", 30},
    {"activity continuous", 30},
    {"continuous", 40},
    {"serialgraph", 30},
    {"serialgraph EAGER", 30},
};
// Added after the first device run ("extra" runs them and then kExtra2Runs).
static const PhaseRun kExtraRuns[] = {
    {"firstwindow serialized", 40},
    {"firstwindow continuous", 40},
    {"graphepisode", 30},
    {"disablethreads watcher_idle", 15},
    {"disablethreads main_other", 15},
    {"disablethreads watcher_launch", 15},
};
// Added after the second ("extra2").
static const PhaseRun kExtra2Runs[] = {
    {"graphreg", 30},
    {"gated main", 15},
    {"gated watcher", 15},
};

static void run_all(int rounds) {
  const double t_begin = now_ms();
  run_phases(kExtraRuns);
  run_phases(kExtra2Runs);
  run_phases(kFirstRuns);
  // cost: rounds x states, one short process each, the order rotated per round.
  const int ns = sizeof kStates / sizeof kStates[0];
  std::map<std::string, std::vector<double>> eager, graph;
  int done_rounds = 0;
  for (int r = 0; r < rounds; ++r) {
    if (now_ms() - t_begin > 270000) {
      printf("FACT cost_rounds_cut_short at_round=%d (time budget)\n", r);
      break;
    }
    for (int k = 0; k < ns; ++k) {
      const char *st = kStates[(k + r) % ns];
      std::vector<std::string> lines;
      run_child(std::string("cost ") + st, 30, &lines);
      for (auto &l : lines) {
        char name[64];
        double e = 0, g = 0;
        if (sscanf(l.c_str(), "FACT cost_round state=%63s eager_ns=%lf graph_ns=%lf", name, &e, &g) == 3) {
          eager[name].push_back(e);
          graph[name].push_back(g);
        }
      }
    }
    done_rounds++;
  }
  const double e0 = median(eager["none"]), g0 = median(graph["none"]);
  printf("FACT cost_table rounds=%d (median ns per launch, ratio to none, min..max)\n", done_rounds);
  for (int k = 0; k < ns; ++k) {
    const std::string st = kStates[k];
    auto &e = eager[st];
    auto &g = graph[st];
    printf("FACT cost_summary state=%-12s n=%zu eager_ns=%.1f ratio=%.2f (%.1f..%.1f) graph_ns=%.1f "
           "ratio=%.2f (%.1f..%.1f)\n",
           st.c_str(), e.size(), median(e), median(e) / e0, vmin(e), vmax(e), median(g),
           median(g) / g0, vmin(g), vmax(g));
  }
  printf("FACT all_done ms=%.0f\n", now_ms() - t_begin);
}

int main(int argc, char **argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::string phase = argc > 1 ? argv[1] : "all";
  const std::string arg = argc > 2 ? argv[2] : "";
  if (phase == "all") {
    if (!find_self()) return 2;
    uint32_t ver = 0;
    cuptiGetVersion(&ver);
    int drv = 0;
    cuDriverGetVersion(&drv);
    printf("FACT cupti_version %u driver %d\n", ver, drv);
    run_all(arg.empty() ? 11 : atoi(arg.c_str()));
    return 0;
  }
  if (phase == "extra" || phase == "extra2") {  // phases added after the first (second) run
    if (!find_self()) return 2;
    if (phase == "extra") run_phases(kExtraRuns);
    run_phases(kExtra2Runs);
    return 0;
  }
  if (phase == "serialgraph" && arg == "EAGER") setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  const int watchdog_s = phase == "offthread" ? 20 : phase == "sleepspan" ? 50 : phase == "disablethreads" || phase == "gated" ? 10 : 25;
  std::thread([watchdog_s, phase, arg] {
    std::this_thread::sleep_for(std::chrono::seconds(watchdog_s));
    printf("FACT watchdog phase=%s %s after_s=%d stuck_at=%s main_at=%s\n", phase.c_str(), arg.c_str(),
           watchdog_s, g_step.load(), g_main.load());
    fflush(stdout);
    _exit(3);
  }).detach();

  if (phase == "cost") {
    phase_cost(arg);
  } else {
    if (phase == "activity") {
      activity_register();
      CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      printf("FACT activity_enable_concurrent_before_pc rc=%s\n", rs(r));
    }
    if (phase == "gated") {
      CUptiResult r = cuptiSubscribe(&g_sub, gate_cb, nullptr);
      CUptiResult r2 = cuptiEnableCallback(1, g_sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
      printf("FACT gate_subscribe rc=%s enable=%s\n", rs(r), rs(r2));
    }
    if (phase == "continuous" || phase == "serialgraph" || phase == "graphepisode" || phase == "graphreg" ||
        phase == "shadow") {
      g_record = true;
      subscribe_launch_cbids();
    }
    setup_cuda();
    int clock_khz = 0, sms = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    printf("FACT device %s clock_khz=%d sms=%d\n", prop.name, clock_khz, sms);
    g_main = "warmup";
    gwork<0><<<132, 256, 0, s1>>>(d_f, 1000);
    tiny_launches(1000);
    CHECK(cudaDeviceSynchronize());
    if (phase == "sleepspan") phase_sleepspan();
    else if (phase == "offthread") phase_offthread(arg);
    else if (phase == "activity") phase_activity(arg);
    else if (phase == "continuous") phase_continuous_body();
    else if (phase == "serialgraph") phase_serialgraph();
    else if (phase == "firstwindow") phase_firstwindow(arg);
    else if (phase == "graphepisode") phase_graphepisode();
    else if (phase == "disablethreads") phase_disablethreads(arg);
    else if (phase == "graphreg") phase_graphreg();
    else if (phase == "gated") phase_gated(arg);
    else if (phase == "shadow") {
      g_shadow_captured_late = arg == "late";
      g_shadow_warmed_up = arg == "warm" || arg == "warmact";
      g_shadow_warm_activity = arg == "warmact";
      phase_shadow();
    } else if (phase == "shadowlib") {
      g_shadowlib_flags = arg;
      phase_shadowlib();
    }
    else printf("FACT unknown_phase %s\n", phase.c_str());
  }
  printf("FACT done phase=%s %s\n", phase.c_str(), arg.c_str());
  fflush(stdout);
  _exit(0);
}
