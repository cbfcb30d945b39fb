/* What parcagpu-trace's two BPF objects share (parcagpu_trace.bpf.c, the tracer; pc_sampling.bpf.c,
 * PC sampling): the ring buffer and the cgroup filter (the latter reuses the tracer's maps through
 * bpf_map__reuse_fd, so these definitions must match), the per-CPU counters and the helpers over
 * them, the event header and the shape of a probe's program. The including file includes
 * trace_events.h (struct pt_header) and defines, before including this:
 *   TRACE_STATS_MAX            how many per-CPU counters its "stats" map has
 *   TRACE_STAT_RINGBUF_DROPS   the counter of failed ring-buffer reservations
 *   TRACE_STAT_META_RINGBUF_DROPS  ... of the metadata ring buffer (meta_events) */
#ifndef PARCAGPU_TRACE_COMMON_BPF_H
#define PARCAGPU_TRACE_COMMON_BPF_H

/* clang-format off: the UAPI headers before libbpf's */
#include <stdbool.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
/* clang-format on */

#if !defined(TRACE_STATS_MAX) || !defined(TRACE_STAT_RINGBUF_DROPS) || \
    !defined(TRACE_STAT_META_RINGBUF_DROPS)
#error "define TRACE_STATS_MAX, TRACE_STAT_RINGBUF_DROPS and TRACE_STAT_META_RINGBUF_DROPS before including trace_common.bpf.h"
#endif

/* Set by userland before load (-c): only tasks in the cgroup of cgroup_map[0] are traced. */
const volatile bool filter_cgroup = false;

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 16 << 20); /* resized by userland before load */
} events SEC(".maps");

/* The library's error and metadata firings (error, cubin_loaded, cubin_unloaded,
 * stall_reason_map, gpu_config): a few per process, and each one matters (an error the user must
 * see, a cubin or the stall-reason names the PC samples need). They get a ring buffer of their
 * own, so that a storm of launches and kernel records that fills `events` cannot crowd them out;
 * what still finds this one full is counted (TRACE_STAT_META_RINGBUF_DROPS). */
#define TRACE_META_RINGBUF_BYTES (256 << 10)
struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, TRACE_META_RINGBUF_BYTES);
} meta_events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} cgroup_map SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, TRACE_STATS_MAX);
  __type(key, __u32);
  __type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_add(__u32 idx, __u64 n) {
  __u64 *v = bpf_map_lookup_elem(&stats, &idx);
  /* Atomic even though per-CPU: uprobe programs run with migration, not preemption, disabled,
   * so two tasks on one CPU may interleave here. */
  if (v) __sync_fetch_and_add(v, n);
}

/* -c: the probe fired in a task outside the cgroup (its events are not wanted). The uprobe
 * itself is per file, so the library's semaphore is up in every process that maps it. */
static __always_inline bool filtered_out(void) {
  return filter_cgroup && bpf_current_task_under_cgroup(&cgroup_map, 0) != 1;
}

/* Reserves an event; counts a drop when the ring buffer is full. */
static __always_inline void *reserve(__u64 size) {
  void *e = bpf_ringbuf_reserve(&events, size, 0);
  if (!e) stat_add(TRACE_STAT_RINGBUF_DROPS, 1);
  return e;
}

/* The header of an event of `type` fired by the task pid_tgid at ts. */
static __always_inline void fill_header_at(struct pt_header *h, __u32 type, __u64 pid_tgid,
                                           __u64 ts) {
  h->type = type;
  h->pid = pid_tgid >> 32;
  h->tid = (__u32)pid_tgid;
  h->flags = 0;
  h->ts_ns = ts;
}

/* ... by the current task, now. */
static __always_inline void fill_header(struct pt_header *h, __u32 type) {
  fill_header_at(h, type, bpf_get_current_pid_tgid(), bpf_ktime_get_ns());
}

/* Reserves an event of `type` and fills its header (the current task, now); NULL when the ring
 * buffer is full (counted). */
static __always_inline void *reserve_event(__u64 size, __u32 type) {
  struct pt_header *h = reserve(size);
  if (h) fill_header(h, type);
  return h;
}

/* Sends a small event built on the stack at `e` (`size` bytes, its header's flags as set): the
 * header filled as reserve_event fills it, the bytes copied into `ring` (a full one counted in
 * stats[drop_stat]; false). Large events are reserved and written in place instead. */
static __always_inline bool send_event_to(void *ring, __u32 drop_stat, void *e, __u64 size,
                                          __u32 type) {
  struct pt_header *h = e;
  const __u32 flags = h->flags;
  fill_header(h, type);
  h->flags = flags;
  if (bpf_ringbuf_output(ring, e, size, 0) == 0) return true;
  stat_add(drop_stat, 1);
  return false;
}

/* ... into the main ring buffer (events). */
static __always_inline void send_event(void *e, __u64 size, __u32 type) {
  send_event_to(&events, TRACE_STAT_RINGBUF_DROPS, e, size, type);
}

/* Reserves an event of `type` in the metadata ring buffer (meta_events) and fills its header;
 * NULL when that is full (counted). */
static __always_inline void *reserve_meta_event(__u64 size, __u32 type) {
  struct pt_header *h = bpf_ringbuf_reserve(&meta_events, size, 0);
  if (!h) {
    stat_add(TRACE_STAT_META_RINGBUF_DROPS, 1);
    return 0;
  }
  fill_header(h, type);
  return h;
}

/* send_event into the metadata ring buffer. False when it was full (counted). */
static __always_inline bool send_meta_event(void *e, __u64 size, __u32 type) {
  return send_event_to(&meta_events, TRACE_STAT_META_RINGBUF_DROPS, e, size, type);
}

/* The program of USDT probe `name`: tasks the cgroup filter drops end here, the others count a
 * firing in stats[fired] and run the body that follows, which has `ctx`:
 *   PROBE(error, PT_STAT_FIRE_ERROR) { ...; return 0; } */
#define PROBE(name, fired)                                      \
  static __always_inline int name##_fired(struct pt_regs *ctx); \
  SEC("usdt") int name(struct pt_regs *ctx) {                   \
    if (filtered_out()) return 0;                               \
    stat_add(fired, 1);                                         \
    return name##_fired(ctx);                                   \
  }                                                             \
  static __always_inline int name##_fired(struct pt_regs *ctx)

#endif /* PARCAGPU_TRACE_COMMON_BPF_H */
