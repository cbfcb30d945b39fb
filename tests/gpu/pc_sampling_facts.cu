// What real CUPTI PC sampling does on this GPU, measured by a standalone CUPTI client (no
// parcagpu involved). Its output is where the facts in docs/pc-sampling.md come from: which
// calls may come from which thread, what each call costs, what enabling PC sampling costs a
// program that is not being sampled, which correlation IDs graph kernels' samples carry, how
// many samples a sampling period gives, and how the module callback's cubin relates to the CRC
// in the records.
//
// Build:  nvcc -O2 -std=c++17 -arch=sm_90 -lineinfo -o pc_sampling_facts pc_sampling_facts.cu \
//              -lcuda -lcupti
// Run:    pc_sampling_facts [OUTDIR]     (module cubins are written to OUTDIR when given)
// Output: "FACT name value..." lines on stdout; diagnostics on stderr. Exit 0 unless CUDA failed.

#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pc_facts.h"

#define CHECK_PROGRAM "pc_sampling_facts"
#include "cuda_check.h"
#include "launch_timing.h"

#define STEP(s) (g_step = (s), printf("STEP %s\n", (s)))

// ---------------------------------------------------------------- kernels of known character
// (tiny, membound and spin: pc_facts.h)
// Dependent floating-point chains in registers: waits on arithmetic.
__global__ void compute(float *out, int iters) { arithmetic_chain(out, iters, 0.0f); }

// ---------------------------------------------------------------- CUPTI callback bookkeeping
static std::mutex g_mu;
static std::vector<Launch> g_launches;
static std::vector<std::pair<const char *, size_t>> g_modules;
static std::atomic<int> g_enable_in_callback{0};
static std::atomic<int> g_enable_in_callback_rc{-1};
static CUcontext g_ctx;
static const char *g_outdir;

struct PcConfig;
static bool configure(CUcontext ctx, int factor, const char *where);

static void CUPTIAPI on_cb(void *, CUpti_CallbackDomain dom, CUpti_CallbackId cbid,
                           const void *data) {
  if (dom == CUPTI_CB_DOMAIN_RESOURCE) {
    auto *rd = static_cast<const CUpti_ResourceData *>(data);
    if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) {
      auto *m = static_cast<const CUpti_ModuleResourceData *>(rd->resourceDescriptor);
      CUpti_GetCubinCrcParams p = {CUpti_GetCubinCrcParamsSize, m->cubinSize, m->pCubin, 0};
      CUptiResult r = cuptiGetCubinCrc(&p);
      Dl_info dl{};
      const bool in_object = m->pCubin && dladdr(m->pCubin, &dl) && dl.dli_fname;
      printf("FACT module_loaded id=%u size=%zu crc=%llu rc=%s elf=%d in_object=%s\n", m->moduleId,
             m->cubinSize, (unsigned long long)p.cubinCrc, rs(r),
             m->pCubin && m->cubinSize > 4 && memcmp(m->pCubin, "\x7f" "ELF", 4) == 0,
             in_object ? dl.dli_fname : "-");
      std::lock_guard<std::mutex> l(g_mu);
      g_modules.push_back({m->pCubin, m->cubinSize});
      if (g_outdir && g_modules.size() <= 4) {
        char path[512];
        snprintf(path, sizeof path, "%s/module%zu.cubin", g_outdir, g_modules.size());
        if (FILE *f = fopen(path, "wb")) {
          fwrite(m->pCubin, 1, m->cubinSize, f);
          fclose(f);
        }
      }
    } else if (cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING) {
      printf("FACT module_unload_starting\n");
    } else if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) {
      printf("FACT context_created\n");
    }
    return;
  }
  auto *cb = static_cast<const CUpti_CallbackData *>(data);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    if (g_enable_in_callback.exchange(0)) {
      double t0 = now_ms();
      CUpti_PCSamplingEnableParams ep = {CUpti_PCSamplingEnableParamsSize, nullptr, cb->context};
      CUptiResult r = cuptiPCSamplingEnable(&ep);
      g_enable_in_callback_rc = r;
      bool ok = r == CUPTI_SUCCESS && configure(cb->context, 0, "in_callback");
      CUpti_PCSamplingStartParams sp = {CUpti_PCSamplingStartParamsSize, nullptr, cb->context};
      CUptiResult rs2 = ok ? cuptiPCSamplingStart(&sp) : r;
      printf("FACT enable_configure_start_in_launch_callback rc=%s start=%s ms=%.3f\n", rs(r),
             rs(rs2), now_ms() - t0);
    }
    return;
  }
  std::lock_guard<std::mutex> l(g_mu);
  g_launches.push_back({cb->correlationId, dom == CUPTI_CB_DOMAIN_DRIVER_API ? -(int)cbid : (int)cbid,
                        cb->symbolName ? cb->symbolName : cb->functionName});
}

// ---------------------------------------------------------------- PC sampling helpers
static std::vector<std::string> g_stall_names;

static void get_attr(CUcontext ctx, CUpti_PCSamplingConfigurationAttributeType t, const char *name) {
  CUpti_PCSamplingConfigurationInfo info{};
  info.attributeType = t;
  CUpti_PCSamplingConfigurationInfoParams p = {CUpti_PCSamplingConfigurationInfoParamsSize,
                                               nullptr, ctx, 1, &info};
  CUptiResult r = cuptiPCSamplingGetConfigurationAttribute(&p);
  printf("FACT attr %s rc=%s status=%s u64=%llu u32=%u\n", name, rs(r), rs(info.attributeStatus),
         (unsigned long long)info.attributeData.invalidData.data[0],
         info.attributeData.samplingPeriodData.samplingPeriod);
}

static bool configure(CUcontext ctx, int factor, const char *where) {
  g_step = "configure";
  double t0 = now_ms();
  if (g_num_stall == 0) {
    CUptiResult r, r2;
    g_stall_names = query_stall_reasons(ctx, &r, &r2);
    printf("FACT num_stall_reasons %zu rc=%s\n", g_num_stall, rs(r));
    printf("FACT get_stall_reasons rc=%s\n", rs(r2));
    for (size_t i = 0; i < g_num_stall; ++i)
      printf("FACT stall_reason %u %s\n", g_stall_idx[i], g_stall_names[i].c_str());
    alloc_buf(&g_cfg_buf, 1024);
    alloc_buf(&g_out_buf, 1024);
  }
  std::vector<CUpti_PCSamplingConfigurationInfo> infos =
      base_config(CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED);
  if (factor) {
    CUpti_PCSamplingConfigurationInfo i{};
    i.attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
    i.attributeData.samplingPeriodData.samplingPeriod = factor;
    infos.push_back(i);
  }
  CUpti_PCSamplingConfigurationInfoParams p = {CUpti_PCSamplingConfigurationInfoParamsSize, nullptr,
                                               ctx, infos.size(), infos.data()};
  CUptiResult r = cuptiPCSamplingSetConfigurationAttribute(&p);
  printf("FACT configure where=%s factor=%d rc=%s ms=%.3f statuses=", where, factor, rs(r),
         now_ms() - t0);
  for (auto &x : infos) printf("%d:%s,", x.attributeType, rs(x.attributeStatus));
  printf("\n");
  return r == CUPTI_SUCCESS;
}

struct Tally {
  size_t records = 0, pairs = 0, calls = 0;
  uint64_t hw = 0, total = 0, dropped = 0, nonusr = 0;
  int buffer_full = 0;
  double ms = 0, max_call_ms = 0;
  CUptiResult last = CUPTI_SUCCESS;
  std::map<uint32_t, uint64_t> by_corr;                   // corr -> hw samples
  std::map<std::string, std::map<uint32_t, uint64_t>> stall_by_fn;
  std::map<std::string, uint64_t> maxpc_by_fn;
  std::set<uint64_t> crcs;
  std::map<std::string, std::map<uint64_t, uint64_t>> pcs_by_fn;
};

static Tally drain(CUcontext ctx) {
  g_step = "cuptiPCSamplingGetData";
  Tally t;
  for (int guard = 0; guard < 10000; ++guard) {
    double t0 = now_ms();
    CUpti_PCSamplingGetDataParams p = {CUpti_PCSamplingGetDataParamsSize, nullptr, ctx, &g_out_buf};
    CUptiResult r = cuptiPCSamplingGetData(&p);
    double d = now_ms() - t0;
    t.ms += d;
    t.max_call_ms = std::max(t.max_call_ms, d);
    t.calls++;
    t.last = r;
    if (r != CUPTI_SUCCESS) break;
    t.total += g_out_buf.totalSamples;
    t.dropped += g_out_buf.droppedSamples;
    t.nonusr += g_out_buf.nonUsrKernelsTotalSamples;
    t.buffer_full |= g_out_buf.hardwareBufferFull;
    for (size_t k = 0; k < g_out_buf.totalNumPcs; ++k) {
      const CUpti_PCSamplingPCData &pc = g_out_buf.pPcData[k];
      t.records++;
      t.crcs.insert(pc.cubinCrc);
      std::string fn = pc.functionName ? pc.functionName : "?";
      t.maxpc_by_fn[fn] = std::max(t.maxpc_by_fn[fn], pc.pcOffset);
      for (size_t s = 0; s < pc.stallReasonCount; ++s) {
        if (!pc.stallReason[s].samples) continue;
        t.pairs++;
        t.hw += pc.stallReason[s].samples;
        t.by_corr[pc.correlationId] += pc.stallReason[s].samples;
        t.stall_by_fn[fn][pc.stallReason[s].pcSamplingStallReasonIndex] += pc.stallReason[s].samples;
        t.pcs_by_fn[fn][pc.pcOffset] += pc.stallReason[s].samples;
      }
    }
    if (g_out_buf.remainingNumPcs == 0 && g_out_buf.totalNumPcs == 0) break;
    if (g_out_buf.remainingNumPcs == 0) break;
  }
  return t;
}

static std::string stall_name(uint32_t idx) {
  for (size_t i = 0; i < g_stall_idx.size(); ++i)
    if (g_stall_idx[i] == idx) return g_stall_names[i];
  return "#" + std::to_string(idx);
}

static void print_tally(const char *what, const Tally &t) {
  printf("FACT drain %s records=%zu pairs=%zu hw_samples=%llu total=%llu dropped=%llu nonusr=%llu "
         "buffer_full=%d calls=%zu ms=%.3f max_call_ms=%.3f last=%s crcs=",
         what, t.records, t.pairs, (unsigned long long)t.hw, (unsigned long long)t.total,
         (unsigned long long)t.dropped, (unsigned long long)t.nonusr, t.buffer_full, t.calls, t.ms,
         t.max_call_ms, rs(t.last));
  for (auto c : t.crcs) printf("%llu,", (unsigned long long)c);
  printf(" corrs=");
  for (auto &c : t.by_corr) printf("%u:%llu,", c.first, (unsigned long long)c.second);
  printf("\n");
  for (auto &f : t.stall_by_fn) {
    std::vector<std::pair<uint64_t, uint32_t>> v;
    for (auto &s : f.second) v.push_back({s.second, s.first});
    std::sort(v.rbegin(), v.rend());
    printf("FACT stalls %s fn=%s maxpc=%llu top=", what, f.first.c_str(),
           (unsigned long long)t.maxpc_by_fn.at(f.first));
    for (size_t i = 0; i < v.size() && i < 4; ++i)
      printf("%s:%llu,", stall_name(v[i].second).c_str(), (unsigned long long)v[i].first);
    std::vector<std::pair<uint64_t, uint64_t>> pcs;
    for (auto &p : t.pcs_by_fn.at(f.first)) pcs.push_back({p.second, p.first});
    std::sort(pcs.rbegin(), pcs.rend());
    printf(" hot_pcs=");
    for (size_t i = 0; i < pcs.size() && i < 4; ++i)
      printf("%#llx:%llu,", (unsigned long long)pcs[i].second, (unsigned long long)pcs[i].first);
    printf("\n");
  }
}

// ---------------------------------------------------------------- workloads
static int *d_tiny;
static float4 *d_in, *d_out;
static float *d_f;
static const size_t kN = 64ull << 20 >> 4;  // 64 MiB of float4
static cudaStream_t s1, s2;
static cudaGraphExec_t g_exec;

static double tiny_launches(int n) {
  g_step = "tiny_launches";
  return tiny_launch_ns(s1, d_tiny, n);
}

// Two streams of 1-block spin kernels: ~overlapped when kernels run concurrently.
static double concurrency(long long cycles, int per_stream) {
  g_step = "concurrency";
  return concurrency_ms(s1, s2, cycles, per_stream);
}

static double kernel_ms(int which) {
  g_step = "kernel_ms";
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, s1);
  if (which == 0) membound<<<132 * 8, 256, 0, s1>>>(d_in, d_out, kN);
  else compute<<<132 * 4, 256, 0, s1>>>(d_f, 4000);
  cudaEventRecord(b, s1);
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms;
}

static void mixed_work(int reps) {
  g_step = "mixed_work";
  for (int i = 0; i < reps; ++i) {
    membound<<<132 * 8, 256, 0, s1>>>(d_in, d_out, kN);
    compute<<<132 * 4, 256, 0, s1>>>(d_f, 4000);
    CHECK(cudaGraphLaunch(g_exec, s1));
  }
  CHECK(cudaStreamSynchronize(s1));
}

static void print_launches_since(size_t from, const char *what) {
  std::lock_guard<std::mutex> l(g_mu);
  printf("FACT launches %s:", what);
  for (size_t i = from; i < g_launches.size(); ++i)
    printf(" %u/%d/%s", g_launches[i].corr, g_launches[i].cbid, g_launches[i].name.substr(0, 12).c_str());
  printf("\n");
}

static size_t launches_now() {
  std::lock_guard<std::mutex> l(g_mu);
  return g_launches.size();
}

static long long g_spin_cycles;

static bool enable_and_configure(int factor) {
  double ms = 0;
  CUptiResult r = pc_enable(g_ctx, &ms);
  printf("FACT enable rc=%s ms=%.3f\n", rs(r), ms);
  return r == CUPTI_SUCCESS && configure(g_ctx, factor, "main");
}

static void phase_base() {
  const long long spin_cycles = g_spin_cycles;
  CUptiResult r;
  // ---- A: baseline, PC sampling never enabled
  printf("FACT A_tiny_ns_per_launch %.1f\n", tiny_launches(20000));
  printf("FACT A_concurrency_ms %.3f (20 pairs of ~1 ms kernels; 20 = overlapped, 40 = serialized)\n",
         concurrency(spin_cycles, 20));
  printf("FACT A_kernel_ms membound=%.3f compute=%.3f\n", kernel_ms(0), kernel_ms(1));

  // ---- B: enabled + configured (start/stop control), not started
  double ms = 0;
  STEP("B_enable");
  r = pc_enable(g_ctx, &ms);
  printf("FACT B_enable rc=%s ms=%.3f\n", rs(r), ms);
  if (r != CUPTI_SUCCESS) return;
  get_attr(g_ctx, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD, "sampling_period");
  get_attr(g_ctx, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SCRATCH_BUFFER_SIZE, "scratch_buffer");
  get_attr(g_ctx, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_HARDWARE_BUFFER_SIZE, "hw_buffer");
  get_attr(g_ctx, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE, "collection_mode");
  get_attr(g_ctx, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_WORKER_THREAD_PERIODIC_SLEEP_SPAN, "sleep_span");
  get_attr(g_ctx, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL, "start_stop");
  configure(g_ctx, 0, "main");
  get_attr(g_ctx, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD, "sampling_period_after");
  printf("FACT B_tiny_ns_per_launch %.1f\n", tiny_launches(20000));
  printf("FACT B_concurrency_ms %.3f\n", concurrency(spin_cycles, 20));
  printf("FACT B_kernel_ms membound=%.3f compute=%.3f\n", kernel_ms(0), kernel_ms(1));
  print_tally("B_idle_getdata", drain(g_ctx));

  // ---- C: one window on the main thread, GPU idle at start
  r = pc_start(g_ctx, &ms);
  printf("FACT C_start_idle rc=%s ms=%.3f\n", rs(r), ms);
  printf("FACT C_tiny_ns_per_launch %.1f\n", tiny_launches(2000));
  printf("FACT C_concurrency_ms %.3f\n", concurrency(spin_cycles, 20));
  printf("FACT C_kernel_ms membound=%.3f compute=%.3f\n", kernel_ms(0), kernel_ms(1));
  size_t l0 = launches_now();
  mixed_work(2);
  print_launches_since(l0, "C_mixed");
  print_tally("C_mid_window", drain(g_ctx));
  mixed_work(1);
  membound<<<132 * 8, 256, 0, s1>>>(d_in, d_out, kN);
  r = pc_stop(g_ctx, &ms);
  printf("FACT C_stop_after_async_launch rc=%s ms=%.3f\n", rs(r), ms);
  print_tally("C_after_stop", drain(g_ctx));
  CHECK(cudaDeviceSynchronize());
  print_tally("C_after_sync", drain(g_ctx));

  // ---- D: Start while the GPU is busy
  spin<<<1, 32, 0, s1>>>(spin_cycles * 50);
  r = pc_start(g_ctx, &ms);
  printf("FACT D_start_busy rc=%s ms=%.3f\n", rs(r), ms);
  compute<<<132, 256, 0, s1>>>(d_f, 2000);
  CHECK(cudaDeviceSynchronize());
  r = pc_stop(g_ctx, &ms);
  printf("FACT D_stop rc=%s ms=%.3f\n", rs(r), ms);
  print_tally("D", drain(g_ctx));

}

static void phase_thread() {
  if (!enable_and_configure(0)) return;
  // ---- E: windows opened and closed from another thread while this one launches
  {
    std::atomic<bool> done{false};
    std::vector<std::string> notes;
    std::vector<Tally> tallies;
    size_t e0 = launches_now();
    std::thread helper([&] {
      for (int w = 0; w < 5; ++w) {
        std::this_thread::sleep_for(std::chrono::milliseconds(15));
        double a = 0, b = 0;
        CUptiResult r1 = pc_start(g_ctx, &a);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        CUptiResult r2 = pc_stop(g_ctx, &b);
        Tally t = drain(g_ctx);
        char buf[200];
        snprintf(buf, sizeof buf, "w%d start=%s %.3fms stop=%s %.3fms", w, rs(r1), a, rs(r2), b);
        notes.push_back(buf);
        tallies.push_back(t);
      }
      done = true;
    });
    int launched = 0;
    double t0 = now_ms();
    while (!done && now_ms() - t0 < 3000) {
      membound<<<132 * 2, 256, 0, s1>>>(d_in, d_out, kN / 8);
      compute<<<132, 256, 0, s1>>>(d_f, 500);
      launched += 2;
      if (launched % 20 == 0) CHECK(cudaStreamSynchronize(s1));
    }
    printf("FACT E_main_loop_ended done=%d launched=%d ms=%.1f\n", (int)done.load(), launched,
           now_ms() - t0);
    g_step = "E_join_helper";
    helper.join();
    CHECK(cudaDeviceSynchronize());
    printf("FACT E_thread_windows launched=%d ms=%.1f\n", launched, now_ms() - t0);
    std::set<uint32_t> mine;
    {
      std::lock_guard<std::mutex> l(g_mu);
      for (size_t i = e0; i < g_launches.size(); ++i) mine.insert(g_launches[i].corr);
    }
    for (size_t i = 0; i < notes.size(); ++i) {
      size_t known = 0, unknown = 0;
      for (auto &c : tallies[i].by_corr) (mine.count(c.first) ? known : unknown)++;
      printf("FACT E_%s records=%zu pairs=%zu hw=%llu corr_known=%zu corr_unknown=%zu last=%s\n",
             notes[i].c_str(), tallies[i].records, tallies[i].pairs,
             (unsigned long long)tallies[i].hw, known, unknown, rs(tallies[i].last));
    }
  }

}

static void phase_disable() {
  const long long spin_cycles = g_spin_cycles;
  CUptiResult r;
  double ms = 0;
  if (!enable_and_configure(0)) return;
  // ---- F: disable from another thread (no context current there), then the cost is gone?
  {
    CUptiResult rd = CUPTI_SUCCESS;
    double dms = 0;
    std::thread t([&] { rd = pc_disable(g_ctx, &dms); });
    t.join();
    printf("FACT F_disable_other_thread rc=%s ms=%.3f\n", rs(rd), dms);
    printf("FACT F_tiny_ns_per_launch %.1f\n", tiny_launches(20000));
    printf("FACT F_concurrency_ms %.3f\n", concurrency(spin_cycles, 20));
    // Re-enable from another thread.
    CUptiResult re = CUPTI_SUCCESS;
    std::thread t2([&] { re = pc_enable(g_ctx, &dms); });
    t2.join();
    printf("FACT F_enable_other_thread rc=%s ms=%.3f\n", rs(re), dms);
    if (re == CUPTI_SUCCESS) {
      bool ok = false;
      std::thread t3([&] { ok = configure(g_ctx, 0, "other_thread"); });
      t3.join();
      r = pc_start(g_ctx, &ms);
      mixed_work(1);
      CUptiResult rs2 = pc_stop(g_ctx, &ms);
      printf("FACT F_window_after_reenable start=%s stop=%s\n", rs(r), rs(rs2));
      print_tally("F_after_reenable", drain(g_ctx));
      pc_disable(g_ctx, &dms);
      printf("FACT F_disable_main ms=%.3f\n", dms);
    }
    // Enable + configure + start inside a launch ENTER callback.
    g_enable_in_callback = 1;
    compute<<<132, 256, 0, s1>>>(d_f, 2000);
    CHECK(cudaDeviceSynchronize());
    r = pc_stop(g_ctx, &ms);
    printf("FACT F_stop_after_callback_start rc=%s\n", rs(r));
    print_tally("F_callback_window", drain(g_ctx));
  }

}

static void phase_sweep() {
  // ---- G: sampling period sweep on the compute kernel (samples per ms of kernel time)
  double compute_ms = kernel_ms(1);
  double membound_ms = kernel_ms(0);
  for (int factor : {0, 12, 14, 16, 18, 20, 22}) {
    double dms = 0, ems = 0;
    pc_disable(g_ctx, &dms);
    pc_enable(g_ctx, &ems);
    configure(g_ctx, factor, "sweep");
    pc_start(g_ctx, nullptr);
    compute<<<132 * 4, 256, 0, s1>>>(d_f, 4000);
    membound<<<132 * 8, 256, 0, s1>>>(d_in, d_out, kN);
    CHECK(cudaDeviceSynchronize());
    pc_stop(g_ctx, nullptr);
    Tally t = drain(g_ctx);
    printf("FACT G_factor %d compute_ms=%.3f membound_ms=%.3f records=%zu pairs=%zu hw=%llu "
           "total=%llu dropped=%llu disable_ms=%.3f enable_ms=%.3f\n",
           factor, compute_ms, membound_ms, t.records, t.pairs, (unsigned long long)t.hw,
           (unsigned long long)t.total, (unsigned long long)t.dropped, dms, ems);
    if (factor == 0) get_attr(g_ctx, CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD, "period_default_again");
  }

}

static void phase_window() {
  if (!enable_and_configure(0)) return;
  // ---- H: the price of one window: 200 windows of 10 small launches vs the same without
  {
    auto burst = [&] {
      for (int i = 0; i < 10; ++i) membound<<<132, 256, 0, s1>>>(d_in, d_out, kN / 64);
    };
    CHECK(cudaDeviceSynchronize());
    double t0 = now_ms();
    for (int w = 0; w < 200; ++w) burst();
    CHECK(cudaDeviceSynchronize());
    double plain = now_ms() - t0;
    double st = 0, sp = 0, dr = 0;
    size_t pairs = 0;
    t0 = now_ms();
    for (int w = 0; w < 200; ++w) {
      double a, b;
      pc_start(g_ctx, &a);
      burst();
      pc_stop(g_ctx, &b);
      double c0 = now_ms();
      Tally t = drain(g_ctx);
      dr += now_ms() - c0;
      st += a;
      sp += b;
      pairs += t.pairs;
    }
    CHECK(cudaDeviceSynchronize());
    double windowed = now_ms() - t0;
    printf("FACT H_windows plain_ms=%.3f windowed_ms=%.3f per_window_extra_ms=%.3f start_ms=%.4f "
           "stop_ms=%.4f drain_ms=%.4f pairs_per_window=%.1f\n",
           plain, windowed, (windowed - plain) / 200, st / 200, sp / 200, dr / 200, pairs / 200.0);
    double t1 = now_ms();
    for (int w = 0; w < 200; ++w) burst();
    CHECK(cudaDeviceSynchronize());
    printf("FACT H_enabled_not_started_ms %.3f\n", now_ms() - t1);
  }
}

int main(int argc, char **argv) {
  g_outdir = argc > 1 ? argv[1] : nullptr;
  const std::string phase = argc > 2 ? argv[2] : "base";
  const int watchdog_s = argc > 3 ? atoi(argv[3]) : 20;
  std::thread([watchdog_s, phase] {
    std::this_thread::sleep_for(std::chrono::seconds(watchdog_s));
    printf("FACT watchdog phase=%s stuck_at=%s\n", phase.c_str(), g_step.load());
    fflush(stdout);
    _exit(3);
  }).detach();
  setvbuf(stdout, nullptr, _IOLBF, 0);
  uint32_t ver = 0;
  cuptiGetVersion(&ver);
  int drv = 0;
  cuDriverGetVersion(&drv);
  CUpti_SubscriberHandle sub;
  CUptiResult r = cuptiSubscribe(&sub, on_cb, nullptr);
  printf("FACT cupti_version %u driver %d subscribe=%s\n", ver, drv, rs(r));
  cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED);
  cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING);
  cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
  cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000);

  CHECK(cudaSetDevice(0));
  CHECK(cudaFree(0));
  CHECK(cuCtxGetCurrent(&g_ctx) == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown);
  int clock_khz = 0, sms = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  printf("FACT device clock_khz=%d sms=%d\n", clock_khz, sms);
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CHECK(cudaMalloc(&d_tiny, 64 * sizeof(int)));
  CHECK(cudaMalloc(&d_in, kN * sizeof(float4)));
  CHECK(cudaMalloc(&d_out, kN * sizeof(float4)));
  CHECK(cudaMalloc(&d_f, 1024 * sizeof(float)));
  CHECK(cudaMemset(d_in, 0, kN * sizeof(float4)));
  {  // a 3-kernel graph
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
    membound<<<132 * 2, 256, 0, s1>>>(d_in, d_out, kN / 4);
    compute<<<132 * 2, 256, 0, s1>>>(d_f, 1000);
    tiny<<<1, 32, 0, s1>>>(d_tiny);
    CHECK(cudaStreamEndCapture(s1, &g));
    CHECK(cudaGraphInstantiate(&g_exec, g, 0));
  }
  STEP("warmup");  // module load, clocks
  for (int i = 0; i < 3; ++i) mixed_work(3);
  tiny_launches(2000);
  g_spin_cycles = (long long)(clock_khz ? clock_khz : 1755000) * 1;  // ~1 ms per spin kernel
  STEP(phase.c_str());
  if (phase == "base") phase_base();
  else if (phase == "thread") phase_thread();
  else if (phase == "disable") phase_disable();
  else if (phase == "sweep") phase_sweep();
  else if (phase == "window") phase_window();
  double dms = 0;
  STEP("final_disable");
  pc_disable(g_ctx, &dms);
  printf("FACT done phase=%s disable_ms=%.3f modules=%zu\n", phase.c_str(), dms, g_modules.size());
  fflush(stdout);
  _exit(0);
}

