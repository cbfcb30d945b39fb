/* parcagpu-trace's PC sampling (--pc), BPF side (events in pc_events.h). Reads exactly what the
 * production consumer reads (include/parcagpu/abi.h); every failed read is counted. A
 * pc_sample_batch firing is walked with bpf_loop (kernel 5.17+), one ring-buffer event per
 * record. The ring buffer and the cgroup filter are the tracer's (parcagpu_trace.bpf.c): userland
 * hands this object their maps before load (bpf_map__reuse_fd). */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "parcagpu/abi.h"
#include "pc_events.h"

#define TRACE_STATS_MAX PV_STAT_MAX
#define TRACE_STAT_RINGBUF_DROPS PV_STAT_RINGBUF_DROPS
#define TRACE_STAT_META_RINGBUF_DROPS PV_STAT_META_RINGBUF_DROPS
#include "trace_common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

static __always_inline long arg(struct pt_regs *ctx, __u64 n) {
  long v = 0;
  if (bpf_usdt_arg(ctx, n, &v) < 0) stat_add(PV_STAT_ERR_ARG, 1);
  return v;
}

struct batch_ctx {
  const void *const *records;
  __u64 pid_tgid;
  __u64 ts;
  __u32 count;
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
  fill_header_at(&e->h, PV_EV_PC_RECORD, b->pid_tgid, b->ts);
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

PROBE(pc_sample_batch, PV_STAT_BATCHES) {
  struct batch_ctx b = {
      .records = (const void *const *)arg(ctx, 0),
      .pid_tgid = bpf_get_current_pid_tgid(),
      .ts = bpf_ktime_get_ns(),
      .count = (__u32)arg(ctx, 1),
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
  if (filtered_out()) return 0;
  const void *names = (const void *)arg(ctx, 0);
  __u32 count = arg(ctx, 1);
  /* Metadata (once per process, and every PC sample needs it): the ring buffer kernel events
   * cannot fill. */
  struct pv_stall_map_event *e = reserve_meta_event(sizeof(*e), PV_EV_STALL_REASON_MAP);
  if (!e) return 0;
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
