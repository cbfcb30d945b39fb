// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* parcagpu-trace: BPF side. One SEC("usdt") program per probe of provider "parcagpu"; userland
 * attaches them with bpf_program__attach_usdt. Probe arguments and the kernel activity records
 * are read exactly as the production consumer reads them (include/parcagpu/abi.h): 160 bytes per
 * record, at most PARCAGPU_ACTIVITY_BATCH_MAX records per activity_batch firing.
 *
 * Only user memory is read, so no CO-RE and no vmlinux.h: the UAPI struct pt_regs is enough
 * for usdt.bpf.h. Nothing fails silently: ring-buffer reservations that fail and reads that
 * fault are counted in the per-CPU "stats" map. */
/* clang-format off: the UAPI headers before libbpf's */
#include <stdbool.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>
/* clang-format on */

#include "parcagpu/abi.h"
#include "trace_events.h"

#define TRACE_STATS_MAX PT_STAT_MAX
#define TRACE_STAT_RINGBUF_DROPS PT_STAT_RINGBUF_DROPS
#define TRACE_STAT_META_RINGBUF_DROPS PT_STAT_META_RINGBUF_DROPS
#include "trace_common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by userland before load: send kernel_executed and per-batch events (-v). */
const volatile bool verbose_events = false;
/* Set by userland before load: cuda_correlation events carry the user stack (the launch site;
 * on by default, off with --no-stacks) and graph_capture_launch events too (--capture-sites). */
const volatile bool launch_stacks = false;
const volatile bool capture_stacks = false;
/* Set by userland before load (--stack-bytes; 0 = off): stack events also carry the registers
 * and this many bytes of the user stack from rsp, for DWARF unwinding in userland. A multiple of
 * 8, at most PT_STACK_COPY_MAX. Read-only data: the verifier sees it as a constant, which sizes
 * the ring-buffer reservation. */
const volatile __u32 stack_copy_bytes = 0;

/* Python processes (filled by userland, tools/trace/python.cc): pid -> where CPython's thread list is
 * and the offsets for its version. Absent = not Python (or --no-python): no frames taken. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct pt_py_proc);
} py_procs SEC(".maps");

/* Where the 64 x 64 stall-reason blob is copied to (too big for the stack). Per-CPU scratch is
 * not private to one firing (uprobe programs are preemptible on PREEMPT kernels): fine here, the
 * copy only checks that the blob is readable. Records, whose contents matter, go on the stack. */
struct scratch {
  __u8 blob[PARCAGPU_STALL_REASON_MAX * PARCAGPU_STALL_REASON_NAME_LEN];
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct scratch);
} scratch_map SEC(".maps");

static __always_inline void read_error(__u32 kind) {
  stat_add(PT_STAT_READ_ERRORS, 1);
  stat_add(kind, 1);
}

/* Argument n of the current USDT, as libbpf decoded it (size and sign from the note). */
static __always_inline long arg(struct pt_regs *ctx, __u64 n) {
  long v = 0;
  if (bpf_usdt_arg(ctx, n, &v) < 0) read_error(PT_STAT_READ_ERR_ARG);
  return v;
}

/* Reads a user string into dst; NULL pointers give "" and a flag, faults a flag and an error. */
static __always_inline __u32 read_str(char *dst, __u32 size, const void *src, __u32 null_flag,
                                      __u32 fault_flag) {
  dst[0] = 0;
  if (!src) return null_flag;
  if (bpf_probe_read_user_str(dst, size, src) < 0) {
    dst[0] = 0;
    read_error(PT_STAT_READ_ERR_STRING);
    return fault_flag;
  }
  return 0;
}

#define FIELD(T, rec, off) (*(T *)((rec) + (off)))

/* The user stack at the probe: the frame-pointer walk, as libbpf-tools' profile takes it. Code
 * built without frame pointers ends the walk early or hides its callers' frames. */
static __always_inline void take_stack(struct pt_regs *ctx, struct pt_stack *s) {
  s->pad = 0;
  long n = bpf_get_stack(ctx, s->ips, sizeof(s->ips), BPF_F_USER_STACK);
  if (n < 0) stat_add(PT_STAT_STACK_ERRORS, 1);
  s->bytes = n;
}

/* Where each thread's stack ends, once found (copy_stack): the first launch stack of a thread whose
 * stack ends within the copy's size searches for the end, later ones copy up to it at once. The
 * search costs a fault per failed probe (~0.7 us each; ~8 us a launch on deep-launch's main
 * thread, against ~2.5 us with the end known). Keyed by pid and tid; a thread's entry is
 * forgotten at its exit (forget_stack_end), so a thread id used again starts afresh. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64);
  __type(value, __u64);
} stack_ends SEC(".maps");

SEC("raw_tp/sched_process_exit") /* a raw tracepoint: no tracefs needed */
int forget_stack_end(void *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  bpf_map_delete_elem(&stack_ends, &id);
  return 0;
}

/* Whether the user byte at addr can be read (a read of one byte: ~0.1 us; ~0.7 us if it faults). */
static __always_inline bool readable(__u64 addr) {
  __u8 b;
  return bpf_probe_read_user(&b, 1, (const void *)addr) == 0;
}

/* One step of the search for the stack's end below: `chunk` more bytes where the last of them can
 * be read. No bound on `got`: it is only added to sp, so the verifier needs none, and a bound
 * checked against it would make it track every outcome of the search as a path of its own
 * (2^13 of them: loading took 4 s at 64 KiB). Past the configured size, the end found is not
 * used (copy_stack). */
#define FIND_END_STEP(chunk)                       \
  do {                                             \
    if (readable(sp + got + (chunk) - 1)) got += (chunk); \
  } while (0)

/* Finds where the stack above sp ends, to within 8 bytes (up to 128 KiB above sp), by one-byte
 * reads at halving distances, and keeps it for this thread (stack_ends). */
static __always_inline void remember_stack_end(__u64 sp, __u64 thread) {
  __u64 got = 0;
  FIND_END_STEP(65536);
  FIND_END_STEP(32768);
  FIND_END_STEP(16384);
  FIND_END_STEP(8192);
  FIND_END_STEP(4096);
  FIND_END_STEP(2048);
  FIND_END_STEP(1024);
  FIND_END_STEP(512);
  FIND_END_STEP(256);
  FIND_END_STEP(128);
  FIND_END_STEP(64);
  FIND_END_STEP(32);
  FIND_END_STEP(16);
  FIND_END_STEP(8);
  const __u64 end = sp + got;
  bpf_map_update_elem(&stack_ends, &thread, &end, BPF_ANY);
}

/* One step of the chunked copy below: `chunk` more bytes where they fit and read. A read that
 * runs past the stack's end fails whole (and zeroes its destination). */
#define COPY_CHUNK(chunk)                                                                   \
  do {                                                                                      \
    const __u32 last = stack_copy_bytes - (chunk); /* a constant: the verifier bounds got */ \
    if ((chunk) <= stack_copy_bytes && got <= last &&                                       \
        bpf_probe_read_user(data + got, (chunk), (const void *)(sp + got)) == 0)           \
      got += (chunk);                                                                       \
  } while (0)

/* The registers and the top of the user stack (struct pt_stack_copy, then stack_copy_bytes of
 * data at `data`). Usually the whole configured size is there (its last byte reads) and one read
 * takes it. Where the stack ends sooner (the main thread's ends a few KiB above main's frame, a
 * thread's a few KiB above its first frame) the end is found first, to within 8 bytes, by
 * one-byte reads at halving distances, and one read copies up to it: the outermost frames
 * (_start, clone3) are then in the copy wherever the stack's end falls. (A read past the end
 * fails whole after copying what it could: trying the whole size first and then halving chunks
 * cost ~10 us a launch on deep-launch's main thread, against ~2.5 us now.) Should that read fail
 * (memory not contiguous up to the end found), the copy descends in chunks, each kept when it
 * reads. Halving the whole size instead, as before, lost up to half of the stack, and which half
 * depended on where the kernel put the stack's top (a 4 or an 8 KiB copy of the same stack). */
static __always_inline void copy_regs(struct pt_regs *ctx, struct pt_stack_copy *c) {
  c->regs[0] = ctx->rax;
  c->regs[1] = ctx->rdx;
  c->regs[2] = ctx->rcx;
  c->regs[3] = ctx->rbx;
  c->regs[4] = ctx->rsi;
  c->regs[5] = ctx->rdi;
  c->regs[6] = ctx->rbp;
  c->regs[7] = ctx->rsp;
  c->regs[8] = ctx->r8;
  c->regs[9] = ctx->r9;
  c->regs[10] = ctx->r10;
  c->regs[11] = ctx->r11;
  c->regs[12] = ctx->r12;
  c->regs[13] = ctx->r13;
  c->regs[14] = ctx->r14;
  c->regs[15] = ctx->r15;
  c->regs[16] = ctx->rip;
}

/* The copy when the whole size does not read: up to the stack's end as the map holds it, else
 * (memory not contiguous up to that end) chunks of halving size, each kept when it reads. Returns
 * the bytes copied. */
static __always_inline __u32 copy_stack_to_end(__u64 sp, const __u64 *known_end, __u8 *data) {
  __u32 got = 0;
  const __u64 end_at = known_end ? *known_end : 0;
  if (end_at > sp && end_at - sp <= stack_copy_bytes) {
    __u32 n = end_at - sp;
    if (n <= stack_copy_bytes && bpf_probe_read_user(data, n, (const void *)sp) == 0) got = n;
  }
  if (got) return got;
  /* (No 64 KiB step: each step doubles the paths the verifier walks, and this fallback for
   * memory not contiguous to the stack's end is rare; loading took 1.2-1.9 s with it.) */
  COPY_CHUNK(32768);
  COPY_CHUNK(16384);
  COPY_CHUNK(8192);
  COPY_CHUNK(4096);
  COPY_CHUNK(2048);
  COPY_CHUNK(1024);
  COPY_CHUNK(512);
  COPY_CHUNK(256);
  COPY_CHUNK(128);
  COPY_CHUNK(64);
  COPY_CHUNK(32);
  COPY_CHUNK(16);
  COPY_CHUNK(8);
  return got;
}

static __always_inline void copy_stack(struct pt_regs *ctx, struct pt_stack_copy *c, __u8 *data) {
  copy_regs(ctx, c);
  c->size = stack_copy_bytes;
  /* Read once: a ctx pointer moved to a field may not be dereferenced (the verifier). */
  const __u64 sp = ctx->rsp;
  const __u64 thread = bpf_get_current_pid_tgid();
  __u32 got = 0;
  const __u64 *known_end = bpf_map_lookup_elem(&stack_ends, &thread);
  if (!known_end || *known_end <= sp || *known_end - sp >= stack_copy_bytes) {
    /* No end known within reach: the whole size, if its last byte reads. */
    if (readable(sp + stack_copy_bytes - 1) &&
        bpf_probe_read_user(data, stack_copy_bytes, (const void *)sp) == 0) {
      got = stack_copy_bytes;
    } else {
      remember_stack_end(sp, thread);
      known_end = bpf_map_lookup_elem(&stack_ends, &thread);
    }
  }
  if (!got) {
    stat_add(PT_STAT_STACK_COPY_SHORT, 1);
    got = copy_stack_to_end(sp, known_end, data);
  }
  if (got == 0) {
    c->bytes = -14; /* -EFAULT: not even 8 bytes at rsp */
    stat_add(PT_STAT_STACK_COPY_ERRORS, 1);
    return;
  }
  c->bytes = got;
  stat_add(PT_STAT_STACK_COPY_BYTES, got);
}

static __always_inline int read_ptr(__u64 *dst, __u64 addr) {
  return bpf_probe_read_user(dst, sizeof(*dst), (const void *)addr);
}

/* Walks the interpreter's thread list from *ts to the thread state of native thread `tid` (in
 * *ts). False when it is not among the first PT_PY_THREADS_MAX or a read fails. */
static __always_inline bool find_py_thread(const struct pt_py_proc *p, __u32 tid, __u64 *ts) {
  for (int i = 0; i < PT_PY_THREADS_MAX && *ts; i++) {
    __u64 native = 0;
    if (read_ptr(&native, *ts + p->tstate_native_thread_id)) return false;
    if (native == tid) return true;
    if (read_ptr(ts, *ts + p->tstate_next)) return false;
  }
  return false;
}

/* The frames from `frame` outwards, at most PT_PY_FRAMES_MAX, into s (status PT_PY_OK so far). */
static __always_inline void read_py_frames(const struct pt_py_proc *p, __u64 frame,
                                           struct pt_py_stack *s, bool at_launch) {
  __u32 n = 0;
  for (__u32 i = 0; i < PT_PY_FRAMES_MAX; i++) {
    if (!frame) break;
    __u64 code = 0, instr = 0, prev = 0;
    __u8 entry = 0;
    if (read_ptr(&code, frame + p->frame_code) || read_ptr(&instr, frame + p->frame_instr) ||
        read_ptr(&prev, frame + p->frame_previous) ||
        bpf_probe_read_user(&entry, 1, (const void *)(frame + p->frame_entry))) {
      s->status = PT_PY_READ_ERROR;
      if (at_launch) stat_add(PT_STAT_PY_READ_ERRORS, 1);
      break;
    }
    s->code[i] = code;
    s->instr[i] = instr;
    s->entry[i] = entry;
    n = i + 1;
    frame = prev;
  }
  s->count = n;
  if (frame && s->status == PT_PY_OK) {
    s->status = PT_PY_TRUNCATED;
    if (at_launch) stat_add(PT_STAT_PY_TRUNCATED, 1);
  }
}

/* The firing thread's CPython frames (struct pt_py_stack). The thread state is found by walking
 * the first interpreter's thread list for native_thread_id == this tid rather than through
 * CPython's thread-local variable: the list is at a fixed place (_PyRuntime), the TLS offset is
 * not; and the GIL holder (_PyRuntime's tstate_current) is not this thread during a ctypes or
 * torch call, which release the GIL. native_thread_id is the thread id in the process's pid
 * namespace: for a process in another one (a container) it is asked for there. */
static __always_inline void take_py_stack(const struct pt_py_proc *p, __u32 tid,
                                          struct pt_py_stack *s, bool at_launch) {
  s->count = 0;
  s->status = PT_PY_NO_THREAD;
  if (p->pidns_ino) {
    struct bpf_pidns_info ns = {};
    if (bpf_get_ns_current_pid_tgid(p->pidns_dev, p->pidns_ino, &ns, sizeof(ns))) {
      if (at_launch) stat_add(PT_STAT_PY_NO_THREAD, 1);
      return;
    }
    tid = ns.pid;
  }
  __u64 interp = 0, ts = 0, frame = 0;
  if (read_ptr(&interp, p->interp_head) || !interp ||
      read_ptr(&ts, interp + p->interp_threads_head)) {
    s->status = PT_PY_READ_ERROR;
    if (at_launch) stat_add(PT_STAT_PY_READ_ERRORS, 1);
    return;
  }
  if (!find_py_thread(p, tid, &ts)) {
    if (at_launch) stat_add(PT_STAT_PY_NO_THREAD, 1);
    return;
  }
  if (at_launch) stat_add(PT_STAT_PY_STACKS, 1);
  s->status = PT_PY_OK;
  if (read_ptr(&frame, ts + p->tstate_frame) ||
      (p->cframe_current_frame != PT_PY_NO_FIELD && frame &&
       read_ptr(&frame, frame + p->cframe_current_frame))) {
    s->status = PT_PY_READ_ERROR;
    if (at_launch) stat_add(PT_STAT_PY_READ_ERRORS, 1);
    return;
  }
  read_py_frames(p, frame, s, at_launch);
}

/* The launching thread's Python frames, where its process runs CPython (py_procs). */
static __always_inline void take_py_stack_if_python(struct pt_header *h, struct pt_py_stack *s) {
  s->count = 0;
  s->status = PT_PY_OK;
  const struct pt_py_proc *py = bpf_map_lookup_elem(&py_procs, &h->pid);
  if (py) {
    h->flags |= PT_F_PY_STACK;
    take_py_stack(py, h->tid, s, true);
  }
}

/* PyTorch autograd (tools/trace/autograd.h; userland attaches these programs to a libtorch_cpu.so
 * whose version's layout it knows). The backward runs on autograd's engine threads, with no
 * Python frames: a launch there is put under the Python frames of the forward call that created
 * the Node being run. Forward: every Node is numbered by at::sequence_number::get_and_increment
 * (a per-thread counter; the old value is returned and becomes Node::sequence_nr_); at its
 * return on a thread of a Python process the thread's Python frames are kept by (pid, number).
 * Backward: Engine::evaluate_function(graph_task, Node *func, ...) runs one Node; at its entry
 * the Node's vtable pointer and sequence_nr_ (at the attach cookie's offset) are pushed for the
 * thread, at its return popped. A launch on a thread with a Node open takes the Python frames
 * kept for that Node's number in place of its own. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 8192);
  __type(key, struct pt_autograd_key);
  __type(value, struct pt_py_stack);
} autograd_forward SEC(".maps");

/* LRU: a thread that dies inside evaluate_function (or leaves it by an exception, which no
 * uretprobe sees) leaves its entry behind; the LRU makes room for live threads. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64); /* pid_tgid */
  __type(value, struct pt_autograd_thread);
} autograd_threads SEC(".maps");

/* A zeroed pt_py_stack: what a new autograd_forward entry is created from (then filled in
 * place, so that no per-CPU scratch is shared by preempted programs). Never written. */
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct pt_py_stack);
} autograd_zero SEC(".maps");

SEC("uretprobe")
int autograd_seq_return(struct pt_regs *ctx) {
  const __u64 id = bpf_get_current_pid_tgid();
  const __u32 pid = id >> 32;
  if (filtered_out()) return 0;
  const struct pt_py_proc *py = bpf_map_lookup_elem(&py_procs, &pid);
  if (!py) return 0;
  const __u32 zero = 0;
  const struct pt_py_stack *empty = bpf_map_lookup_elem(&autograd_zero, &zero);
  if (!empty) return 0;
  struct pt_autograd_key key = {.pid = pid, .pad = 0, .seq = PT_REGS_RC(ctx)};
  if (bpf_map_update_elem(&autograd_forward, &key, empty, BPF_ANY)) return 0;
  struct pt_py_stack *s = bpf_map_lookup_elem(&autograd_forward, &key);
  if (!s) return 0;
  take_py_stack(py, (__u32)id, s, false);
  if (s->count == 0) {
    bpf_map_delete_elem(&autograd_forward, &key); /* a thread with no Python frames */
    return 0;
  }
  stat_add(PT_STAT_AUTOGRAD_FORWARD_STACKS, 1);
  return 0;
}

SEC("uprobe")
int autograd_node_enter(struct pt_regs *ctx) {
  const __u64 id = bpf_get_current_pid_tgid();
  const __u32 pid = id >> 32;
  if (filtered_out() || !bpf_map_lookup_elem(&py_procs, &pid)) return 0;
  const __u64 node = PT_REGS_PARM3(ctx); /* this, graph_task, func */
  const __u64 seq_offset = bpf_get_attach_cookie(ctx);
  struct pt_autograd_node n = {};
  if (read_ptr(&n.vtable, node) || read_ptr(&n.seq, node + seq_offset)) {
    stat_add(PT_STAT_AUTOGRAD_READ_ERRORS, 1);
    n.vtable = 0;
    n.seq = ~0ull;
  }
  struct pt_autograd_thread *t = bpf_map_lookup_elem(&autograd_threads, &id);
  if (!t) {
    struct pt_autograd_thread fresh = {};
    bpf_map_update_elem(&autograd_threads, &id, &fresh, BPF_NOEXIST);
    t = bpf_map_lookup_elem(&autograd_threads, &id);
    if (!t) return 0;
  }
  const __u32 d = t->depth;
  if (d < PT_AUTOGRAD_DEPTH) t->nodes[d & (PT_AUTOGRAD_DEPTH - 1)] = n;
  t->depth = d + 1;
  return 0;
}

SEC("uretprobe")
int autograd_node_return(struct pt_regs *ctx) {
  const __u64 id = bpf_get_current_pid_tgid();
  struct pt_autograd_thread *t = bpf_map_lookup_elem(&autograd_threads, &id);
  if (!t) return 0;
  if (t->depth <= 1)
    bpf_map_delete_elem(&autograd_threads, &id);
  else
    t->depth--;
  return 0;
}

/* At a launch: the Node this thread is running, if any, and its forward call's Python frames. */
static __always_inline void take_autograd(struct pt_header *h, struct pt_py_stack *s) {
  if (!(h->flags & PT_F_PY_STACK)) return; /* a Python process only */
  const __u64 id = bpf_get_current_pid_tgid();
  const struct pt_autograd_thread *t = bpf_map_lookup_elem(&autograd_threads, &id);
  if (!t || t->depth == 0) return;
  const __u32 d = t->depth > PT_AUTOGRAD_DEPTH ? PT_AUTOGRAD_DEPTH : t->depth;
  const struct pt_autograd_node n = t->nodes[(d - 1) & (PT_AUTOGRAD_DEPTH - 1)];
  h->flags |= PT_F_AUTOGRAD;
  s->node_vtable = n.vtable;
  s->node_seq = n.seq;
  s->node_linked = 0;
  s->node_pad = 0;
  struct pt_autograd_key key = {.pid = h->pid, .pad = 0, .seq = n.seq};
  const struct pt_py_stack *fwd = bpf_map_lookup_elem(&autograd_forward, &key);
  if (!fwd) {
    stat_add(PT_STAT_AUTOGRAD_FORWARD_MISSING, 1);
    return;
  }
  /* The chain only: count, status, code, instr, entry (the node fields stay this launch's). */
  bpf_probe_read_kernel(s, __builtin_offsetof(struct pt_py_stack, node_vtable), fwd);
  s->node_linked = 1;
  stat_add(PT_STAT_AUTOGRAD_LINKED, 1);
}

static __always_inline void fill_correlation(struct pt_correlation_event *c, struct pt_regs *ctx) {
  fill_header(&c->h, PT_EV_CORRELATION);
  c->correlation_id = arg(ctx, 0);
  c->signed_cbid = arg(ctx, 1);
  const char *name = (const char *)arg(ctx, 2);
  c->h.flags = read_str(c->name, sizeof(c->name), name, PT_F_NAME_NULL, PT_F_NAME_FAULT);
}

/* A launch or capture event with its stacks after it (pt_stacks, then the stack copy's data), when
 * `want` and the ring buffer has room; else NULL (no room: counted, the event goes without). */
static __always_inline void *reserve_with_stacks(bool want, __u64 size) {
  if (!want) return 0;
  void *e = bpf_ringbuf_reserve(&events, size + stack_copy_bytes, 0);
  if (!e) stat_add(PT_STAT_STACKS_DROPPED, 1);
  return e;
}

/* Where a stack event is built when it is not written in place: one slot per CPU, so that the
 * event goes into the ring buffer at its size (the stack bytes actually copied) and not at the
 * configured size. Most stacks end well inside 64 KiB (a thread's stack ends a few KiB above its
 * first frame), and a reservation of the whole size made the ring buffer hold ~500 launches.
 * A plain array of PT_STACK_SLOTS_PER_CPU slots per CPU, sized by userland to the CPUs (per-CPU
 * values are limited to 32 KiB). `busy`: uprobe programs are preemptible, so another task on
 * this CPU may find a slot taken (16 launching threads on 2 CPUs under TSan: often) and tries the
 * next; with all taken it reserves in place, at the full size. */
struct stack_slot {
  __u64 busy; /* 64 bits: BPF's 32-bit atomics need -mcpu=v3 */
  __u8 event[PT_STACK_EVENT_MAX + PT_STACK_COPY_MAX];
};
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1); /* the CPUs: set by userland before load */
  __type(key, __u32);
  __type(value, struct stack_slot);
} stack_slots SEC(".maps");

static __always_inline struct stack_slot *take_slot(bool want) {
  if (!want) return 0;
  const __u32 first = bpf_get_smp_processor_id() * PT_STACK_SLOTS_PER_CPU;
  for (__u32 i = 0; i < PT_STACK_SLOTS_PER_CPU; i++) {
    __u32 k = first + i;
    struct stack_slot *s = bpf_map_lookup_elem(&stack_slots, &k);
    if (s && __sync_val_compare_and_swap(&s->busy, 0, 1) == 0) return s;
  }
  return 0;
}

/* Sends the event built in slot s: `fixed` bytes (the event and its pt_stacks) and the stack bytes
 * copied. With no room for it, the event alone goes (counted as a stack dropped). Frees the slot. */
static __always_inline void send_slot(struct stack_slot *s, __u64 fixed, __s32 copied) {
  __u64 size = fixed + (copied > 0 ? (__u32)copied : 0);
  if (size > sizeof(s->event)) size = sizeof(s->event);
  if (bpf_ringbuf_output(&events, s->event, size, 0) != 0) {
    stat_add(PT_STAT_STACKS_DROPPED, 1);
    struct pt_header *h = (struct pt_header *)s->event;
    h->flags &= ~(PT_F_STACK | PT_F_STACK_COPY | PT_F_PY_STACK);
    if (fixed > sizeof(s->event)) fixed = sizeof(s->event);
    bpf_ringbuf_output(&events, s->event, fixed, 0); /* a full ring counts its own drop */
  }
  __sync_val_compare_and_swap(&s->busy, 1, 0); /* an atomic release (no atomic store in BPF) */
}

/* The stacks of the event whose header is h, at the probe. */
static __always_inline void take_stacks(struct pt_regs *ctx, struct pt_header *h,
                                        struct pt_stacks *s) {
  h->flags |= PT_F_STACK;
  take_stack(ctx, &s->stack);
  take_py_stack_if_python(h, &s->py);
  take_autograd(h, &s->py);
  if (stack_copy_bytes) {
    h->flags |= PT_F_STACK_COPY;
    copy_stack(ctx, &s->copy, (__u8 *)(s + 1));
  }
}

/* Sends a launch or capture event (struct kind##_event, filled by fill(event, ctx)), with its
 * stacks (struct kind##_stack_event) when `want` and the ring buffer has room for them: built in
 * this CPU's slot and sent at its size, or (slot taken) reserved in place at the full size. */
#define SEND_WITH_STACKS(want, kind, fill)                                        \
  do {                                                                            \
    _Static_assert(sizeof(struct kind##_stack_event) <= PT_STACK_EVENT_MAX,        \
                   "PT_STACK_EVENT_MAX too small");                               \
    struct stack_slot *slot = take_slot(want);                                    \
    if (slot) {                                                                   \
      struct kind##_stack_event *e = (struct kind##_stack_event *)slot->event;    \
      fill(&e->c, ctx);                                                           \
      take_stacks(ctx, &e->c.h, &e->stacks);                                      \
      send_slot(slot, sizeof(*e), stack_copy_bytes ? e->stacks.copy.bytes : 0);   \
      return 0;                                                                   \
    }                                                                             \
    struct kind##_stack_event *e = reserve_with_stacks(want, sizeof(*e));         \
    struct kind##_event *c = e ? &e->c : reserve(sizeof(*c));                     \
    if (!c) return 0;                                                             \
    fill(c, ctx);                                                                 \
    if (e) take_stacks(ctx, &c->h, &e->stacks);                                   \
    bpf_ringbuf_submit(c, 0);                                                     \
    return 0;                                                                     \
  } while (0)

PROBE(cuda_correlation, PT_STAT_FIRE_CUDA_CORRELATION) {
  SEND_WITH_STACKS(launch_stacks, pt_correlation, fill_correlation);
}

PROBE(kernel_executed, PT_STAT_FIRE_KERNEL_EXECUTED) {
  if (!verbose_events) return 0; /* counted only: activity_batch is the kernel source */
  struct pt_kernel_event *e = reserve_event(sizeof(*e), PT_EV_KERNEL_EXECUTED);
  if (!e) return 0;
  e->start = arg(ctx, 0);
  e->end = arg(ctx, 1);
  e->correlation_id = arg(ctx, 2);
  e->device_id = arg(ctx, 3);
  e->stream_id = arg(ctx, 4);
  e->graph_id = arg(ctx, 5);
  e->graph_node_id = arg(ctx, 6);
  e->kind = 0;
  e->context_id = 0;
  e->batch_index = 0;
  e->batch_count = 0;
  e->bytes = 0;
  e->copy_kind = e->src_kind = e->dst_kind = e->mem_flags = 0;
  e->peer_device_id = 0;
  e->cpu_blocked_ns = 0;
  e->h.flags = read_str(e->name, sizeof(e->name), (const void *)arg(ctx, 7), PT_F_NAME_NULL,
                        PT_F_NAME_FAULT);
  bpf_ringbuf_submit(e, 0);
  return 0;
}

/* The fields kernel records and memory records both have, into event `e` from record `rec`
 * whose offsets are PARCAGPU_<KIND>REC_OFF_* (KIND: K for a kernel record, M for a memory one). */
#define FILL_SHARED_FIELDS(e, rec, KIND)                                                   \
  do {                                                                                    \
    (e)->start = FIELD(__u64, rec, PARCAGPU_##KIND##REC_OFF_START);                        \
    (e)->end = FIELD(__u64, rec, PARCAGPU_##KIND##REC_OFF_END);                            \
    (e)->device_id = FIELD(__u32, rec, PARCAGPU_##KIND##REC_OFF_DEVICE_ID);                \
    (e)->stream_id = FIELD(__u32, rec, PARCAGPU_##KIND##REC_OFF_STREAM_ID);                \
    (e)->correlation_id = FIELD(__u32, rec, PARCAGPU_##KIND##REC_OFF_CORRELATION_ID);      \
  } while (0)

/* One kernel event from a kernel record (a copy of it, 8-byte aligned): the record's fields, no
 * bytes (that is a copy's), its name read from the process. */
static __always_inline void fill_kernel_event(struct pt_kernel_event *e, const __u8 *rec,
                                              __u32 kind) {
  e->kind = kind;
  FILL_SHARED_FIELDS(e, rec, K);
  e->context_id = FIELD(__u32, rec, PARCAGPU_KREC_OFF_CONTEXT_ID);
  e->graph_node_id = FIELD(__u64, rec, PARCAGPU_KREC_OFF_GRAPH_NODE_ID);
  e->graph_id = FIELD(__u32, rec, PARCAGPU_KREC_OFF_GRAPH_ID);
  e->bytes = 0;
  e->copy_kind = e->src_kind = e->dst_kind = e->mem_flags = 0;
  e->peer_device_id = 0;
  e->cpu_blocked_ns = 0;
  e->h.flags = read_str(e->name, sizeof(e->name), FIELD(const void *, rec, PARCAGPU_KREC_OFF_NAME),
                        PT_F_NAME_NULL, PT_F_NAME_FAULT);
}

PROBE(activity_batch, PT_STAT_FIRE_ACTIVITY_BATCH) {
  const void *const *records = (const void *const *)arg(ctx, 0);
  __u32 count = arg(ctx, 1);
  stat_add(PT_STAT_BATCH_RECORDS, count);
  __u32 n = count;
  if (n > PARCAGPU_ACTIVITY_BATCH_MAX) {
    stat_add(PT_STAT_BATCH_OVER_CAP, count - PARCAGPU_ACTIVITY_BATCH_MAX);
    n = PARCAGPU_ACTIVITY_BATCH_MAX; /* the production consumer ignores the rest */
  }
  __u64 rec_words[PARCAGPU_KREC_SIZE / 8]; /* 8-byte aligned copy of the record */
  const __u8 *rec = (const __u8 *)rec_words;
  __u32 kernels = 0, other = 0, unreadable = 0;
  for (__u32 i = 0; i < PARCAGPU_ACTIVITY_BATCH_MAX; i++) {
    if (i >= n) break;
    const __u8 *rp = 0;
    if (bpf_probe_read_user(&rp, sizeof(rp), &records[i]) < 0) {
      read_error(PT_STAT_READ_ERR_RECORD_PTR);
      unreadable++;
      continue;
    }
    if (bpf_probe_read_user(rec_words, PARCAGPU_KREC_SIZE, rp) < 0) {
      read_error(PT_STAT_READ_ERR_RECORD);
      unreadable++;
      continue;
    }
    __u32 kind = FIELD(__u32, rec, PARCAGPU_KREC_OFF_KIND);
    if (kind != PARCAGPU_KIND_KERNEL && kind != PARCAGPU_KIND_CONCURRENT_KERNEL) {
      other++;
      continue;
    }
    kernels++;
    struct pt_kernel_event *e = reserve_event(sizeof(*e), PT_EV_KERNEL);
    if (!e) continue;
    fill_kernel_event(e, rec, kind);
    e->batch_index = i;
    e->batch_count = count;
    bpf_ringbuf_submit(e, 0);
  }
  stat_add(PT_STAT_RECORDS_OTHER_KIND, other);
  if (verbose_events) {
    struct pt_batch_event b = {.records = (__u64)records,
                               .count = count,
                               .kernels = kernels,
                               .other_kinds = other,
                               .unreadable = unreadable};
    send_event(&b, sizeof(b), PT_EV_ACTIVITY_BATCH);
  }
  return 0;
}

/* memory_batch(ptr records, u32 count): count contiguous PARCAGPU_MREC_SIZE-byte records, at most
 * PARCAGPU_MEMORY_BATCH_MAX read; each one a PT_EV_MEMORY event. */
PROBE(memory_batch, PT_STAT_FIRE_MEMORY_BATCH) {
  const __u8 *records = (const __u8 *)arg(ctx, 0);
  __u32 count = arg(ctx, 1);
  stat_add(PT_STAT_MEMORY_RECORDS, count);
  __u64 rec_words[PARCAGPU_MREC_SIZE / 8];
  const __u8 *rec = (const __u8 *)rec_words;
  for (__u32 i = 0; i < PARCAGPU_MEMORY_BATCH_MAX; i++) {
    if (i >= count) break;
    if (bpf_probe_read_user(rec_words, PARCAGPU_MREC_SIZE, records + i * PARCAGPU_MREC_SIZE) < 0) {
      read_error(PT_STAT_READ_ERR_MEMORY);
      continue;
    }
    struct pt_kernel_event *e = reserve_event(sizeof(*e), PT_EV_MEMORY);
    if (!e) continue;
    e->kind = FIELD(__u32, rec, PARCAGPU_MREC_OFF_KIND);
    e->copy_kind = FIELD(__u8, rec, PARCAGPU_MREC_OFF_COPY_KIND);
    e->src_kind = FIELD(__u8, rec, PARCAGPU_MREC_OFF_SRC_KIND);
    e->dst_kind = FIELD(__u8, rec, PARCAGPU_MREC_OFF_DST_KIND);
    e->mem_flags = FIELD(__u8, rec, PARCAGPU_MREC_OFF_FLAGS);
    e->bytes = FIELD(__u64, rec, PARCAGPU_MREC_OFF_BYTES);
    FILL_SHARED_FIELDS(e, rec, M);
    e->peer_device_id = FIELD(__u32, rec, PARCAGPU_MREC_OFF_PEER_DEVICE_ID);
    e->cpu_blocked_ns = FIELD(__u64, rec, PARCAGPU_MREC_OFF_CPU_BLOCKED);
    e->context_id = 0;
    e->graph_id = 0;
    e->graph_node_id = 0;
    e->batch_index = i;
    e->batch_count = count;
    e->name[0] = 0;
    bpf_ringbuf_submit(e, 0);
  }
  return 0;
}

/* NVTX (--nvtx; userland attaches these programs only then: the library collects NVTX only while
 * nvtx_event_batch has a consumer). Threads that fired nvtx_event_batch, so that their exit is
 * said to userland (nvtx_thread_exit), which then frees the thread's open ranges; LRU: a thread
 * forgotten here keeps its ranges until its process is gone (tools/trace/nvtx_ranges.h). */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u64);
  __type(value, __u8);
} nvtx_threads SEC(".maps");

_Static_assert(PT_NVTX_MSG_LEN == PARCAGPU_NVTX_MESSAGE_MAX + 1, "PT_NVTX_MSG_LEN");

/* One NVTX record (an 8-byte aligned copy at rec) as a PT_EV_NVTX event, its message read. */
static __always_inline void send_nvtx_record(const __u8 *rec, __u32 index, __u32 count) {
  struct pt_nvtx_event *e = reserve_event(sizeof(*e), PT_EV_NVTX);
  if (!e) return;
  e->timestamp = FIELD(__u64, rec, PARCAGPU_NVTX_OFF_TIMESTAMP);
  e->range_id = FIELD(__u64, rec, PARCAGPU_NVTX_OFF_RANGE_ID);
  e->payload = FIELD(__u64, rec, PARCAGPU_NVTX_OFF_PAYLOAD);
  e->record_tid = FIELD(__u32, rec, PARCAGPU_NVTX_OFF_TID);
  e->correlation_id = FIELD(__u32, rec, PARCAGPU_NVTX_OFF_CORRELATION_ID);
  e->domain_id = FIELD(__u32, rec, PARCAGPU_NVTX_OFF_DOMAIN_ID);
  e->color = FIELD(__u32, rec, PARCAGPU_NVTX_OFF_COLOR);
  e->kind = FIELD(__u16, rec, PARCAGPU_NVTX_OFF_KIND);
  e->batch_index = index;
  e->batch_count = count;
  e->h.flags = read_str(e->message, sizeof(e->message), FIELD(const void *, rec, PARCAGPU_NVTX_OFF_MESSAGE),
                        PT_F_NAME_NULL, PT_F_NAME_FAULT);
  if (e->h.flags & PT_F_NAME_FAULT) stat_add(PT_STAT_NVTX_MESSAGE_FAULTS, 1);
  bpf_ringbuf_submit(e, 0);
}

/* nvtx_event_batch(ptr events, u32 count): count pointers to PARCAGPU_NVTX_REC_SIZE-byte records
 * of one thread, at most PARCAGPU_NVTX_BATCH_MAX read; each one a PT_EV_NVTX event, in order. */
PROBE(nvtx_event_batch, PT_STAT_FIRE_NVTX_EVENT_BATCH) {
  const void *const *records = (const void *const *)arg(ctx, 0);
  __u32 count = arg(ctx, 1);
  stat_add(PT_STAT_NVTX_RECORDS, count);
  __u32 n = count;
  if (n > PARCAGPU_NVTX_BATCH_MAX) {
    stat_add(PT_STAT_NVTX_OVER_CAP, count - PARCAGPU_NVTX_BATCH_MAX);
    n = PARCAGPU_NVTX_BATCH_MAX;
  }
  const __u64 thread = bpf_get_current_pid_tgid();
  const __u8 one = 1;
  bpf_map_update_elem(&nvtx_threads, &thread, &one, BPF_ANY);
  __u64 rec_words[PARCAGPU_NVTX_REC_SIZE / 8];
  for (__u32 i = 0; i < PARCAGPU_NVTX_BATCH_MAX; i++) {
    if (i >= n) break;
    const __u8 *rp = 0;
    if (bpf_probe_read_user(&rp, sizeof(rp), &records[i]) < 0 ||
        bpf_probe_read_user(rec_words, PARCAGPU_NVTX_REC_SIZE, rp) < 0) {
      read_error(PT_STAT_READ_ERR_NVTX);
      continue;
    }
    send_nvtx_record((const __u8 *)rec_words, i, count);
  }
  return 0;
}

PROBE(nvtx_resource_name, PT_STAT_FIRE_NVTX_RESOURCE_NAME) {
  struct pt_nvtx_resource_event *e = reserve_event(sizeof(*e), PT_EV_NVTX_RESOURCE_NAME);
  if (!e) return 0;
  e->kind = arg(ctx, 0);
  e->id = arg(ctx, 1);
  e->pad = 0;
  e->h.flags = read_str(e->name, sizeof(e->name), (const void *)arg(ctx, 2), PT_F_NAME_NULL, PT_F_NAME_FAULT);
  bpf_ringbuf_submit(e, 0);
  return 0;
}

SEC("raw_tp/sched_process_exit") /* every task's exit: a map lookup, an event for NVTX threads */
int nvtx_thread_exit(void *ctx) {
  __u64 thread = bpf_get_current_pid_tgid();
  if (!bpf_map_lookup_elem(&nvtx_threads, &thread)) return 0;
  bpf_map_delete_elem(&nvtx_threads, &thread);
  struct pt_header *h = reserve_event(sizeof(*h), PT_EV_NVTX_THREAD_EXIT);
  if (h) bpf_ringbuf_submit(h, 0);
  return 0;
}

PROBE(error, PT_STAT_FIRE_ERROR) {
  __s32 code = arg(ctx, 0);
  const char *msg = (const char *)arg(ctx, 1);
  const char *component = (const char *)arg(ctx, 2);
  struct pt_error_event *e = reserve_meta_event(sizeof(*e), PT_EV_ERROR);
  if (!e) {
    stat_add(PT_STAT_ERROR_DROPS, 1); /* the user's warning: fired_error - received */
    return 0;
  }
  e->code = code;
  e->pad = 0;
  e->h.flags = read_str(e->message, sizeof(e->message), msg, 0, PT_F_MSG_FAULT) |
               read_str(e->component, sizeof(e->component), component, 0, PT_F_MSG_FAULT);
  bpf_ringbuf_submit(e, 0);
  return 0;
}

PROBE(gpu_config, PT_STAT_FIRE_GPU_CONFIG) {
  struct pt_gpu_config_event e = {.device_id = arg(ctx, 0),
                                  .sampling_factor = arg(ctx, 1),
                                  .clock_khz = arg(ctx, 2),
                                  .sm_count = arg(ctx, 3)};
  send_meta_event(&e, sizeof(e), PT_EV_GPU_CONFIG);
  return 0;
}

/* A pt_meta_event: into the metadata ring buffer, except pc_sample_batch's, which come as often
 * as kernel records and go with them. */
static __always_inline int send_meta(__u32 type, __u64 crc, __u64 ptr, __u64 size, __u32 flags) {
  struct pt_meta_event e = {.h.flags = flags, .crc = crc, .ptr = ptr, .size = size};
  if (type == PT_EV_PC_SAMPLE_BATCH)
    send_event(&e, sizeof(e), type);
  else
    send_meta_event(&e, sizeof(e), type);
  return 0;
}

PROBE(cubin_loaded, PT_STAT_FIRE_CUBIN_LOADED) {
  return send_meta(PT_EV_CUBIN_LOADED, arg(ctx, 0), arg(ctx, 1), arg(ctx, 2), 0);
}

PROBE(cubin_unloaded, PT_STAT_FIRE_CUBIN_UNLOADED) {
  return send_meta(PT_EV_CUBIN_UNLOADED, arg(ctx, 0), 0, 0, 0);
}

PROBE(stall_reason_map, PT_STAT_FIRE_STALL_REASON_MAP) {
  __u64 names = arg(ctx, 0);
  __u32 count = arg(ctx, 1);
  /* The production consumer copies exactly 64 x 64 bytes: check that this copy works. */
  __u32 flags = 0, zero = 0;
  struct scratch *s = bpf_map_lookup_elem(&scratch_map, &zero);
  if (s && bpf_probe_read_user(s->blob, sizeof(s->blob), (const void *)names) < 0) {
    read_error(PT_STAT_READ_ERR_BLOB);
    flags = PT_F_BLOB_FAULT;
  }
  return send_meta(PT_EV_STALL_REASON_MAP, 0, names, count, flags);
}

PROBE(pc_sample_batch, PT_STAT_FIRE_PC_SAMPLE_BATCH) {
  __u64 records = arg(ctx, 0);
  __u32 count = arg(ctx, 1);
  stat_add(PT_STAT_PC_SAMPLE_RECORDS, count);
  return send_meta(PT_EV_PC_SAMPLE_BATCH, 0, records, count, 0);
}

/* A launch recorded into a graph during stream capture: no cuda_correlation comes for it. With
 * capture_stacks, the user stack at the probe: where the graph's kernel was captured. */
static __always_inline void fill_capture(struct pt_capture_event *c, struct pt_regs *ctx) {
  fill_header(&c->h, PT_EV_GRAPH_CAPTURE);
  c->correlation_id = arg(ctx, 0);
  c->signed_cbid = arg(ctx, 1);
  const char *name = (const char *)arg(ctx, 2);
  c->graph_id = arg(ctx, 3);
  c->graph_node_id = arg(ctx, 4);
  c->pad = 0;
  c->h.flags = read_str(c->name, sizeof(c->name), name, PT_F_NAME_NULL, PT_F_NAME_FAULT);
}

PROBE(graph_capture_launch, PT_STAT_FIRE_GRAPH_CAPTURE_LAUNCH) {
  SEND_WITH_STACKS(capture_stacks, pt_capture, fill_capture);
}

PROBE(graph_node_clone, PT_STAT_FIRE_GRAPH_NODE_CLONE) {
  __u64 original = arg(ctx, 0);
  __u64 cloned = arg(ctx, 1);
  __u32 exec_graph = arg(ctx, 2);
  struct pt_clone_event *e = reserve_event(sizeof(*e), PT_EV_GRAPH_NODE_CLONE);
  if (!e) return 0;
  e->original_node_id = original;
  e->cloned_node_id = cloned;
  e->exec_graph_id = exec_graph;
  e->pad = 0;
  bpf_ringbuf_submit(e, 0);
  return 0;
}
