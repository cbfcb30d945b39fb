// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The agent-faithful test consumer, BPF side (see agent_consumer.h and docs/probe-abi.md).
 *
 * One program per probe the production agent handles, attached by userland as a plain uprobe at
 * the probe's last note, with the note's semaphore as reference counter and the probe's index as
 * cookie. Arguments are evaluated from the note's specs (map "specs"), as the agent's own USDT
 * code does: a register, 8 bytes at register + offset, or a constant, then cut to the argument's
 * size and sign.
 *
 * What is copied from user memory, and what a failed copy costs, is the agent's:
 *   activity_batch   at most 128 records, in two chunks of 64; record pointers are read 16 at a
 *                    time (128 bytes, even where fewer remain); a failed pointer read gives up the
 *                    rest of its chunk, a failed 160-byte record read skips that record.
 *   pc_sample_batch  at most 1024 records (the agent chains 8 chunks of 128); per record 60 bytes,
 *                    functionName up to 128 bytes and 64 x 8 bytes at stallReason; any failed read
 *                    (a NULL functionName included) gives up the rest of the firing.
 *   stall_reason_map one blob of 64 x 64 bytes.
 *   cubin_loaded     first firing per (pid, crc) only; userland reads the bytes from /proc/PID/mem.
 *   gpu_config       first firing per (pid, device) only.
 * Every failed read is counted per pid (map "pid_stats"), as are repeats, caps and drops.
 *
 * Where the events go is the agent's too (agent_consumer.h): every event but cuda_correlation's
 * into one ring of the agent's size ("agent_ring", 1 MiB unless userland sizes it otherwise),
 * each taking the room the agent's event takes. A full agent ring costs what it costs the agent:
 * that kernel record (activity_batch goes on with the next), the rest of a pc_sample_batch
 * firing, that metadata event (cubin_loaded and gpu_config are then not marked seen). */
/* The UAPI headers before libbpf's. */
/* clang-format off */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "agent_consumer.h"
#include "parcagpu/abi.h"
/* clang-format on */

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Our own ring: correlations (the agent's go its trace path) and full kernel events. */
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 64 << 20);
} events SEC(".maps");

/* The agent's "cupti_events": userland sets its size before loading. */
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, AC_AGENT_RING_BYTES);
} agent_ring SEC(".maps");

/* Each event in the agent ring takes exactly the agent's event's room. */
_Static_assert(sizeof(struct ac_pc_sample_event) == AC_AGENT_PC_EVENT_SIZE, "pc_sample_event");
_Static_assert(sizeof(struct ac_cubin_event) == AC_AGENT_CUBIN_EVENT_SIZE, "cubin_event");
_Static_assert(sizeof(struct ac_gpu_config_event) == AC_AGENT_GPU_CONFIG_EVENT_SIZE, "gpu_config");
_Static_assert(sizeof(struct ac_stall_map_event) == AC_AGENT_STALL_MAP_EVENT_SIZE, "stall map");
_Static_assert(sizeof(struct ac_error_event) == AC_AGENT_ERROR_EVENT_SIZE, "error_event");

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, AC_PROBE_MAX);
  __type(key, __u32);
  __type(value, struct ac_probe_spec);
} specs SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, struct ac_stat_key);
  __type(value, __u64);
} pid_stats SEC(".maps");

struct cubin_seen_key {
  __u64 crc;
  __u32 pid;
  __u32 pad;
};
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 1 << 14);
  __type(key, struct cubin_seen_key);
  __type(value, __u8);
} cubin_seen SEC(".maps");

struct gpu_config_seen_key {
  __u32 pid;
  __u32 device_id;
};
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 256);
  __type(key, struct gpu_config_seen_key);
  __type(value, __u8);
} gpu_config_seen SEC(".maps");

static __always_inline __u32 current_pid(void) { return bpf_get_current_pid_tgid() >> 32; }

static __always_inline void count(__u32 pid, __u32 stat, __u64 n) {
  struct ac_stat_key key = {.pid = pid, .stat = stat};
  __u64 *v = bpf_map_lookup_elem(&pid_stats, &key);
  if (!v) {
    __u64 zero = 0;
    bpf_map_update_elem(&pid_stats, &key, &zero, BPF_NOEXIST);
    v = bpf_map_lookup_elem(&pid_stats, &key);
  }
  if (v) __sync_fetch_and_add(v, n);
}

/* An event of `size` bytes in `ring` with its type and pid set (every event starts with them),
 * or NULL: counted in `full_stat`. */
static __always_inline void *event_in(void *ring, __u32 full_stat, __u32 pid, __u32 type,
                                      __u64 size) {
  __u32 *header = bpf_ringbuf_reserve(ring, size, 0);
  if (!header) {
    count(pid, full_stat, 1);
    return header;
  }
  header[0] = type;
  header[1] = pid;
  return header;
}

/* An event of probe `probe` in the agent ring. */
static __always_inline void *agent_event(enum ac_probe probe, __u32 pid, __u32 type, __u64 size) {
  return event_in(&agent_ring, AC_STAT_RING_FULL + probe, pid, type, size);
}

/* An event in our own ring. */
static __always_inline void *own_event(__u32 pid, __u32 type, __u64 size) {
  return event_in(&events, AC_STAT_OWN_RING_DROPS, pid, type, size);
}

/* A firing of `probe`, counted; its pid. */
static __always_inline __u32 fired(enum ac_probe probe) {
  const __u32 pid = current_pid();
  count(pid, AC_STAT_FIRINGS + probe, 1);
  return pid;
}

/* A batch's record count cut to `cap` as the agent cuts it, the records and the excess counted. */
static __always_inline __u32 capped(__u32 pid, __u32 n, __u32 cap, __u32 records_stat,
                                    __u32 over_stat) {
  count(pid, records_stat, n);
  if (n <= cap) return n;
  count(pid, over_stat, n - cap);
  return cap;
}

/* Sends the event at `e` (`size` bytes, its type and pid set here) of a first-firing-only probe,
 * unless `key` is in map `seen` already (a repeat, counted in `repeat_stat`). The key is marked
 * seen once the event is out: a dropped one gets another chance. */
static __always_inline void send_once(enum ac_probe probe, void *seen, const void *key, __u32 pid,
                                      __u32 repeat_stat, __u32 type, __u32 *e, __u64 size) {
  if (bpf_map_lookup_elem(seen, key)) {
    count(pid, repeat_stat, 1);
    return;
  }
  e[0] = type;
  e[1] = pid;
  if (bpf_ringbuf_output(&agent_ring, e, size, 0) != 0) {
    count(pid, AC_STAT_RING_FULL + probe, 1);
    return;
  }
  const __u8 one = 1;
  bpf_map_update_elem(seen, key, &one, BPF_ANY);
}

/* Argument n of the firing probe, from its note's spec. 0 and a counted failure when it cannot be
 * evaluated (the agent then goes on with 0 too). */
static __always_inline long arg(struct pt_regs *ctx, __u32 pid, __u32 n) {
  __u32 id = (__u32)bpf_get_attach_cookie(ctx);
  struct ac_probe_spec *spec = bpf_map_lookup_elem(&specs, &id);
  if (!spec || n >= AC_MAX_ARGS || n >= spec->nargs) goto fail;
  struct ac_arg_spec *a = &spec->args[n];
  __u64 val = 0;
  const __u32 reg_off = a->reg_off;
  switch (a->type) {
    case AC_ARG_CONST:
      val = a->val_off;
      break;
    case AC_ARG_REG:
    case AC_ARG_REG_DEREF:
      if (reg_off > sizeof(struct pt_regs) - sizeof(__u64)) goto fail;
      if (bpf_probe_read_kernel(&val, sizeof(val), (void *)ctx + reg_off) != 0) goto fail;
      if (a->type == AC_ARG_REG_DEREF &&
          bpf_probe_read_user(&val, sizeof(val), (void *)(val + a->val_off)) != 0)
        goto fail;
      break;
    default:
      goto fail;
  }
  const __u32 shift = a->bitshift & 63;
  val <<= shift;
  return a->is_signed ? ((long)val) >> shift : (long)(val >> shift);
fail:
  count(pid, AC_STAT_READ_FAIL_ARG, 1);
  return 0;
}

SEC("uprobe")
int ac_cuda_correlation(struct pt_regs *ctx) {
  const __u64 id = bpf_get_current_pid_tgid();
  const __u32 pid = id >> 32;
  count(pid, AC_STAT_FIRINGS + AC_PROBE_CUDA_CORRELATION, 1);
  /* The agent reads the first two arguments only; the name is not read. */
  const __u32 corr = arg(ctx, pid, 0);
  const __s32 cbid = arg(ctx, pid, 1);
  struct ac_correlation_event *e = own_event(pid, AC_EV_CORRELATION, sizeof(*e));
  if (!e) return 0;
  e->tid = (__u32)id;
  e->correlation_id = corr;
  e->signed_cbid = cbid;
  e->pad = 0;
  e->ts = bpf_ktime_get_ns();
  bpf_ringbuf_submit(e, 0);
  return 0;
}

/* The kernel name as the agent reads it: "err" when it cannot be read. */
static __always_inline void read_kernel_name(__u32 pid, struct ac_kernel_event *e,
                                             const void *name) {
  e->name_fault = 0;
  if (bpf_probe_read_user_str(e->name, sizeof(e->name), name) <= 0) {
    e->name[0] = 'e';
    e->name[1] = 'r';
    e->name[2] = 'r';
    e->name[3] = 0;
    e->name_fault = 1;
    count(pid, AC_STAT_READ_FAIL_KERNEL_NAME, 1);
  }
}

#define FIELD(T, rec, off) (*(T *)((__u8 *)(rec) + (off)))

/* A kernel's event, from an activity record (kind: the record's) or kernel_executed's arguments
 * (kind 0). */
struct kernel_fields {
  __u64 start, end, graph_node_id, name;
  __u32 kind, correlation_id, device_id, context_id, stream_id, graph_id;
};
/* The agent ring takes the agent's kernel event (its room: a slot); our full event goes to our
 * own ring only when the slot was had, as the agent's event would be. */
static __always_inline void submit_kernel(enum ac_probe probe, __u32 pid,
                                          const struct kernel_fields *k) {
  __u32 *slot = agent_event(probe, pid, AC_EV_KERNEL_SLOT, AC_AGENT_KERNEL_EVENT_SIZE);
  if (!slot) return;
  bpf_ringbuf_submit(slot, 0);
  struct ac_kernel_event *e = own_event(pid, AC_EV_KERNEL, sizeof(*e));
  if (!e) return;
  e->kind = k->kind;
  e->start = k->start;
  e->end = k->end;
  e->device_id = k->device_id;
  e->context_id = k->context_id;
  e->stream_id = k->stream_id;
  e->ts = bpf_ktime_get_ns();
  e->pad = 0;
  e->correlation_id = k->correlation_id;
  e->graph_node_id = k->graph_node_id;
  e->graph_id = k->graph_id;
  read_kernel_name(pid, e, (const void *)k->name);
  bpf_ringbuf_submit(e, 0);
}

struct batch_walk {
  __u64 base;
  __u32 n;
  __u32 pid;
  __u32 skip_chunk; /* a chunk whose pointer read failed: its remaining groups are skipped */
  __u32 other;      /* records of other kinds */
};

/* One group of 16 records of an activity_batch firing (bpf_loop callback). */
static long batch_group(__u32 g, void *data) {
  struct batch_walk *w = data;
  const __u32 first = g * AC_PTR_GROUP;
  if (first >= w->n) return 1;
  const __u32 chunk = first / AC_ACTIVITY_CHUNK + 1;
  if (w->skip_chunk == chunk) return 0;
  const __u32 chunk_end = chunk * AC_ACTIVITY_CHUNK < w->n ? chunk * AC_ACTIVITY_CHUNK : w->n;
  __u64 ptrs[AC_PTR_GROUP];
  if (bpf_probe_read_user(ptrs, sizeof(ptrs), (void *)(w->base + first * 8ull)) != 0) {
    /* The agent gives up the rest of this chunk of 64; the next chunk is still read. */
    count(w->pid, AC_STAT_READ_FAIL_RECORD_PTRS, 1);
    count(w->pid, AC_STAT_BATCH_ABANDONED, chunk_end - first);
    w->skip_chunk = chunk;
    return 0;
  }
  __u64 rec[PARCAGPU_KREC_SIZE / 8];
  for (__u32 j = 0; j < AC_PTR_GROUP; j++) {
    if (first + j >= w->n) break;
    if (bpf_probe_read_user(rec, sizeof(rec), (void *)ptrs[j]) != 0) {
      count(w->pid, AC_STAT_READ_FAIL_RECORD, 1); /* that record only */
      continue;
    }
    const __u32 kind = FIELD(__u32, rec, PARCAGPU_KREC_OFF_KIND);
    if (kind != PARCAGPU_KIND_KERNEL && kind != PARCAGPU_KIND_CONCURRENT_KERNEL) {
      w->other++;
      continue;
    }
    const struct kernel_fields k = {
        .kind = kind,
        .start = FIELD(__u64, rec, PARCAGPU_KREC_OFF_START),
        .end = FIELD(__u64, rec, PARCAGPU_KREC_OFF_END),
        .device_id = FIELD(__u32, rec, PARCAGPU_KREC_OFF_DEVICE_ID),
        .context_id = FIELD(__u32, rec, PARCAGPU_KREC_OFF_CONTEXT_ID),
        .stream_id = FIELD(__u32, rec, PARCAGPU_KREC_OFF_STREAM_ID),
        .correlation_id = FIELD(__u32, rec, PARCAGPU_KREC_OFF_CORRELATION_ID),
        .graph_node_id = FIELD(__u64, rec, PARCAGPU_KREC_OFF_GRAPH_NODE_ID),
        .graph_id = FIELD(__u32, rec, PARCAGPU_KREC_OFF_GRAPH_ID),
        .name = FIELD(__u64, rec, PARCAGPU_KREC_OFF_NAME),
    };
    submit_kernel(AC_PROBE_ACTIVITY_BATCH, w->pid, &k);
  }
  return 0;
}

SEC("uprobe")
int ac_activity_batch(struct pt_regs *ctx) {
  const __u32 pid = fired(AC_PROBE_ACTIVITY_BATCH);
  struct batch_walk w = {.base = arg(ctx, pid, 0), .pid = pid};
  w.n = capped(pid, (__u32)arg(ctx, pid, 1), AC_ACTIVITY_CAP, AC_STAT_BATCH_RECORDS,
               AC_STAT_BATCH_OVER_CAP);
  bpf_loop((w.n + AC_PTR_GROUP - 1) / AC_PTR_GROUP, batch_group, &w, 0);
  if (w.other) count(pid, AC_STAT_BATCH_OTHER_KIND, w.other);
  return 0;
}

SEC("uprobe")
int ac_kernel_executed(struct pt_regs *ctx) {
  const __u32 pid = fired(AC_PROBE_KERNEL_EXECUTED);
  /* In argument order: the reads happen in it, as the agent's do. */
  struct kernel_fields k = {.kind = 0};
  k.start = arg(ctx, pid, 0);
  k.end = arg(ctx, pid, 1);
  k.correlation_id = arg(ctx, pid, 2);
  k.device_id = arg(ctx, pid, 3);
  k.stream_id = arg(ctx, pid, 4);
  k.graph_id = arg(ctx, pid, 5);
  k.graph_node_id = arg(ctx, pid, 6);
  k.name = arg(ctx, pid, 7);
  submit_kernel(AC_PROBE_KERNEL_EXECUTED, pid, &k);
  return 0;
}

SEC("uprobe")
int ac_cubin_loaded(struct pt_regs *ctx) {
  const __u32 pid = fired(AC_PROBE_CUBIN_LOADED);
  struct ac_cubin_event e = {
      .crc = arg(ctx, pid, 0), .ptr = arg(ctx, pid, 1), .size = arg(ctx, pid, 2)};
  const struct cubin_seen_key key = {.crc = e.crc, .pid = pid, .pad = 0};
  send_once(AC_PROBE_CUBIN_LOADED, &cubin_seen, &key, pid, AC_STAT_CUBIN_REPEATS, AC_EV_CUBIN,
            &e.type, sizeof(e));
  return 0;
}

SEC("uprobe")
int ac_gpu_config(struct pt_regs *ctx) {
  const __u32 pid = fired(AC_PROBE_GPU_CONFIG);
  struct ac_gpu_config_event e = {.device_id = arg(ctx, pid, 0),
                                  .sampling_factor = arg(ctx, pid, 1),
                                  .clock_khz = arg(ctx, pid, 2),
                                  .sm_count = arg(ctx, pid, 3)};
  const struct gpu_config_seen_key key = {.pid = pid, .device_id = e.device_id};
  send_once(AC_PROBE_GPU_CONFIG, &gpu_config_seen, &key, pid, AC_STAT_GPU_CONFIG_REPEATS,
            AC_EV_GPU_CONFIG, &e.type, sizeof(e));
  return 0;
}

SEC("uprobe")
int ac_stall_reason_map(struct pt_regs *ctx) {
  const __u32 pid = fired(AC_PROBE_STALL_REASON_MAP);
  const __u64 names = arg(ctx, pid, 0);
  __u32 n = (__u32)arg(ctx, pid, 1);
  if (n > AC_STALL_REASONS) n = AC_STALL_REASONS;
  struct ac_stall_map_event *e =
      agent_event(AC_PROBE_STALL_REASON_MAP, pid, AC_EV_STALL_MAP, sizeof(*e));
  if (!e) return 0;
  if (bpf_probe_read_user(e->names, sizeof(e->names), (const void *)names) != 0) {
    bpf_ringbuf_discard(e, 0);
    count(pid, AC_STAT_READ_FAIL_STALL_MAP, 1);
    return 0;
  }
  e->count = n;
  e->pad = 0;
  bpf_ringbuf_submit(e, 0);
  return 0;
}

struct pc_walk {
  __u64 base;
  __u32 n;
  __u32 pid;
};

/* Gives up the rest of the firing from record `from` on (the failed record included). */
static __always_inline long pc_abandon(struct pc_walk *w, __u32 stat, __u32 from) {
  if (stat) count(w->pid, stat, 1);
  count(w->pid, AC_STAT_PC_ABANDONED, w->n - from);
  return 1; /* stops bpf_loop */
}

/* One group of 16 records (bpf_loop callback). */
static long pc_group(__u32 g, void *data) {
  struct pc_walk *w = data;
  const __u32 first = g * AC_PTR_GROUP;
  if (first >= w->n) return 1;
  __u64 ptrs[AC_PTR_GROUP];
  if (bpf_probe_read_user(ptrs, sizeof(ptrs), (void *)(w->base + first * 8ull)) != 0)
    return pc_abandon(w, AC_STAT_READ_FAIL_PC_PTRS, first);
  for (__u32 j = 0; j < AC_PTR_GROUP; j++) {
    const __u32 i = first + j;
    if (i >= w->n) break;
    struct ac_pc_sample_event *e = bpf_ringbuf_reserve(&agent_ring, sizeof(*e), 0);
    if (!e) {
      /* The agent gives up the rest of the firing (cuda.ebpf.c: PC_SAMPLE_ERR_RINGBUF_FULL). */
      count(w->pid, AC_STAT_RING_FULL + AC_PROBE_PC_SAMPLE_BATCH, 1);
      count(w->pid, AC_STAT_PC_RING_FULL, w->n - i);
      return pc_abandon(w, 0, i);
    }
    if (bpf_probe_read_user(e->record, AC_PC_RECORD_SIZE, (void *)ptrs[j]) != 0) {
      bpf_ringbuf_discard(e, 0);
      return pc_abandon(w, AC_STAT_READ_FAIL_PC_RECORD, i);
    }
    e->function_name[0] = 0;
    if (bpf_probe_read_user_str(e->function_name, sizeof(e->function_name),
                                (void *)FIELD(__u64, e->record, AC_PC_OFF_FUNCTION_NAME)) < 0) {
      bpf_ringbuf_discard(e, 0);
      return pc_abandon(w, AC_STAT_READ_FAIL_PC_FUNCTION, i);
    }
    if (bpf_probe_read_user(e->stall, sizeof(e->stall),
                            (void *)FIELD(__u64, e->record, AC_PC_OFF_STALL_REASON)) != 0) {
      bpf_ringbuf_discard(e, 0);
      return pc_abandon(w, AC_STAT_READ_FAIL_PC_STALLS, i);
    }
    e->type = AC_EV_PC_SAMPLE;
    e->pid = w->pid;
    bpf_ringbuf_submit(e, 0);
  }
  return 0;
}

SEC("uprobe")
int ac_pc_sample_batch(struct pt_regs *ctx) {
  const __u32 pid = fired(AC_PROBE_PC_SAMPLE_BATCH);
  struct pc_walk w = {.base = arg(ctx, pid, 0), .pid = pid};
  w.n = capped(pid, (__u32)arg(ctx, pid, 1), AC_PC_CAP, AC_STAT_PC_RECORDS, AC_STAT_PC_OVER_CAP);
  /* The agent walks 8 tail-called chunks of 128; any failure ends the whole walk, so one loop
   * over the 16-pointer groups reads exactly the same bytes. */
  bpf_loop((w.n + AC_PTR_GROUP - 1) / AC_PTR_GROUP, pc_group, &w, 0);
  return 0;
}

/* A string of the error probe; NULL is allowed (left empty), a fault is counted. */
static __always_inline void read_error_string(__u32 pid, char *dst, __u32 size, __u64 src) {
  dst[0] = 0;
  if (src && bpf_probe_read_user_str(dst, size, (const void *)src) < 0) {
    dst[0] = 0;
    count(pid, AC_STAT_READ_FAIL_ERROR_STRING, 1);
  }
}

SEC("uprobe")
int ac_error(struct pt_regs *ctx) {
  const __u32 pid = fired(AC_PROBE_ERROR);
  const __s32 code = arg(ctx, pid, 0);
  const __u64 msg = arg(ctx, pid, 1), component = arg(ctx, pid, 2);
  struct ac_error_event *e = agent_event(AC_PROBE_ERROR, pid, AC_EV_ERROR, sizeof(*e));
  if (!e) return 0;
  e->code = code;
  e->pad = 0;
  read_error_string(pid, e->message, sizeof(e->message), msg);
  read_error_string(pid, e->component, sizeof(e->component), component);
  bpf_ringbuf_submit(e, 0);
  return 0;
}
