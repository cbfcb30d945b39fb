// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* parcagpu-trace's PC sampling view, BPF side (events in pc_view.h). Reads exactly what the
 * production consumer reads (include/parcagpu/abi.h); every failed read is counted. A
 * pc_sample_batch firing is walked with bpf_loop (kernel 5.17+), one ring-buffer event per
 * record. */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "parcagpu/abi.h"
#include "pc_view.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 32 << 20); /* resized by userland before load */
} pc_events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, PV_STAT_MAX);
  __type(key, __u32);
  __type(value, __u64);
} pc_stats SEC(".maps");

static __always_inline void stat_add(__u32 idx, __u64 n) {
  __u64 *v = bpf_map_lookup_elem(&pc_stats, &idx);
  if (v) __sync_fetch_and_add(v, n);
}

static __always_inline void *reserve(__u64 size) {
  void *e = bpf_ringbuf_reserve(&pc_events, size, 0);
  if (!e) stat_add(PV_STAT_RINGBUF_DROPS, 1);
  return e;
}

static __always_inline __u32 tgid(void) { return bpf_get_current_pid_tgid() >> 32; }

static __always_inline long arg(struct pt_regs *ctx, __u64 n) {
  long v = 0;
  if (bpf_usdt_arg(ctx, n, &v) < 0) stat_add(PV_STAT_ERR_ARG, 1);
  return v;
}

struct batch_ctx {
  const void *const *records;
  __u32 count;
  __u32 pid;
};

static long read_one(__u64 i, void *data) {
  struct batch_ctx *b = data;
  const __u8 *rp = 0;
  if (bpf_probe_read_user(&rp, sizeof(rp), &b->records[i]) < 0) {
    stat_add(PV_STAT_ERR_POINTER, 1);
    return 0;
  }
  struct pv_pc_record_event *e = reserve(sizeof(*e));
  if (!e) return 0;
  e->h.type = PV_EV_PC_RECORD;
  e->h.pid = b->pid;
  e->batch_index = i;
  e->batch_count = b->count;
  __builtin_memset(e->record, 0, sizeof(e->record));
  if (bpf_probe_read_user(e->record, PARCAGPU_PC_SAMPLE_RECORD_SIZE, rp) < 0) {
    stat_add(PV_STAT_ERR_RECORD, 1);
    bpf_ringbuf_discard(e, 0);
    return 0;
  }
  const char *name = *(const char **)(e->record + 32);
  e->function_name[0] = 0;
  if (name && bpf_probe_read_user_str(e->function_name, sizeof(e->function_name), name) < 0) {
    stat_add(PV_STAT_ERR_NAME, 1);
    e->function_name[0] = 0;
  }
  const void *stall = *(const void **)(e->record + 48);
  if (bpf_probe_read_user(e->stall, sizeof(e->stall), stall) < 0) {
    stat_add(PV_STAT_ERR_STALL, 1);
    __builtin_memset(e->stall, 0, sizeof(e->stall));
  }
  stat_add(PV_STAT_RECORDS, 1);
  bpf_ringbuf_submit(e, 0);
  return 0;
}

SEC("usdt")
int pc_sample_batch(struct pt_regs *ctx) {
  stat_add(PV_STAT_BATCHES, 1);
  struct batch_ctx b = {
      .records = (const void *const *)arg(ctx, 0),
      .count = (__u32)arg(ctx, 1),
      .pid = tgid(),
  };
  __u32 n = b.count;
  if (n > PARCAGPU_PC_SAMPLE_BATCH_MAX) {
    stat_add(PV_STAT_OVER_CAP, n - PARCAGPU_PC_SAMPLE_BATCH_MAX);
    n = PARCAGPU_PC_SAMPLE_BATCH_MAX; /* the production consumer reads no more */
  }
  bpf_loop(n, read_one, &b, 0);
  return 0;
}

SEC("usdt")
int stall_reason_map(struct pt_regs *ctx) {
  const void *names = (const void *)arg(ctx, 0);
  __u32 count = arg(ctx, 1);
  struct pv_stall_map_event *e = reserve(sizeof(*e));
  if (!e) return 0;
  e->h.type = PV_EV_STALL_REASON_MAP;
  e->h.pid = tgid();
  e->count = count;
  e->pad = 0;
  if (bpf_probe_read_user(e->names, sizeof(e->names), names) < 0) {
    stat_add(PV_STAT_ERR_MAP, 1);
    bpf_ringbuf_discard(e, 0);
    return 0;
  }
  bpf_ringbuf_submit(e, 0);
  return 0;
}

static __always_inline int send_cubin(__u32 type, __u64 crc, __u64 ptr, __u64 size) {
  struct pv_cubin_event *e = reserve(sizeof(*e));
  if (!e) return 0;
  e->h.type = type;
  e->h.pid = tgid();
  e->crc = crc;
  e->ptr = ptr;
  e->size = size;
  bpf_ringbuf_submit(e, 0);
  return 0;
}

SEC("usdt")
int cubin_loaded(struct pt_regs *ctx) {
  return send_cubin(PV_EV_CUBIN_LOADED, arg(ctx, 0), arg(ctx, 1), arg(ctx, 2));
}

SEC("usdt")
int cubin_unloaded(struct pt_regs *ctx) { return send_cubin(PV_EV_CUBIN_UNLOADED, arg(ctx, 0), 0, 0); }

SEC("usdt")
int gpu_config(struct pt_regs *ctx) {
  struct pv_gpu_config_event *e = reserve(sizeof(*e));
  if (!e) return 0;
  e->h.type = PV_EV_GPU_CONFIG;
  e->h.pid = tgid();
  e->device_id = arg(ctx, 0);
  e->sampling_factor = arg(ctx, 1);
  e->clock_khz = arg(ctx, 2);
  e->sm_count = arg(ctx, 3);
  bpf_ringbuf_submit(e, 0);
  return 0;
}

SEC("usdt")
int cuda_correlation(struct pt_regs *ctx) {
  struct pv_correlation_event *e = reserve(sizeof(*e));
  if (!e) return 0;
  e->h.type = PV_EV_CORRELATION;
  e->h.pid = tgid();
  e->correlation_id = arg(ctx, 0);
  e->signed_cbid = arg(ctx, 1);
  bpf_ringbuf_submit(e, 0);
  return 0;
}
