/* Events that parcagpu_trace.bpf.c sends to userland through its two ring buffers (`events`:
 * launches, kernels and the rest; `meta_events`: the library's error and metadata firings, which
 * a storm of kernel events must not crowd out), and the per-CPU counters it keeps. Plain C: included by the BPF program and by the C++ userland.
 *
 * Every event starts with struct pt_header; `type` says which struct follows. Adding a probe
 * = a new PT_EV_* type, its struct here, a SEC("usdt") program, and a row in the userland probe
 * table (tools/trace/bpf_session.cc). */
#ifndef PARCAGPU_TRACE_EVENTS_H
#define PARCAGPU_TRACE_EVENTS_H

#include <linux/types.h>

#define PT_NAME_LEN 256      /* kernel / launch names, truncated (NUL included) */
#define PT_MSG_LEN 256       /* error probe message */
#define PT_COMPONENT_LEN 64  /* error probe component */

enum pt_event_type {
  PT_EV_CORRELATION = 1,      /* cuda_correlation */
  PT_EV_KERNEL = 2,           /* one kernel record read through activity_batch */
  PT_EV_KERNEL_EXECUTED = 3,  /* kernel_executed (sent only when verbose; always counted) */
  PT_EV_ACTIVITY_BATCH = 4,   /* one per activity_batch firing (sent only when verbose) */
  PT_EV_ERROR = 5,
  PT_EV_GPU_CONFIG = 6,
  PT_EV_CUBIN_LOADED = 7,
  PT_EV_CUBIN_UNLOADED = 8,
  PT_EV_STALL_REASON_MAP = 9,
  PT_EV_PC_SAMPLE_BATCH = 10,
  PT_EV_GRAPH_CAPTURE = 11,   /* graph_capture_launch: pt_capture_event, or pt_capture_stack_event */
  PT_EV_GRAPH_NODE_CLONE = 12,
  PT_EV_MEMORY = 13,          /* one copy or fill record read through memory_batch
                                 (pt_kernel_event, kind MEMCPY / MEMSET / MEMCPY2, no name) */
  PT_EV_NVTX = 14,            /* one NVTX record read through nvtx_event_batch (pt_nvtx_event) */
  PT_EV_NVTX_RESOURCE_NAME = 15, /* nvtx_resource_name (pt_nvtx_resource_event) */
  PT_EV_NVTX_THREAD_EXIT = 16, /* a thread that fired nvtx_event_batch exited (pt_header only) */
  /* Types from here on belong to extensions with a BPF object of their own that writes into this
   * ring buffer (tools/trace/extension.h; PC sampling: tools/trace/pc_events.h). */
  PT_EV_EXTENSION_BASE = 64,
};

/* Flags on string fields. */
#define PT_F_NAME_NULL 0x1   /* the name pointer was NULL */
#define PT_F_NAME_FAULT 0x2  /* reading the name failed (counted as a read error) */
#define PT_F_MSG_FAULT 0x4   /* error probe: message/component unreadable */
#define PT_F_BLOB_FAULT 0x8  /* stall_reason_map: the 64 x 64 blob was unreadable */
#define PT_F_STACK 0x10      /* the event carries a struct pt_stack after its fixed part */
#define PT_F_STACK_COPY 0x20 /* ... and after it a struct pt_stack_copy with the stack bytes */
#define PT_F_PY_STACK 0x40   /* cuda_correlation: `py` holds the thread's CPython frame chain */
#define PT_F_AUTOGRAD 0x80   /* cuda_correlation in a PyTorch autograd node: `py` holds the
                                Python frames of the forward call that created the node (when
                                node_linked), and node_vtable / node_seq name the node */

/* The user stack at a probe: the frame-pointer walk of bpf_get_stack(BPF_F_USER_STACK), as
 * libbpf-tools' profile takes it. ips[0] is the probe's own address, then return addresses.
 * PT_STACK_MAX is the kernel's default kernel.perf_event_max_stack. */
#define PT_STACK_MAX 127

struct pt_stack {
  __s32 bytes;  /* bpf_get_stack's result: bytes of ips[] filled, or a negative errno */
  __u32 pad;
  __u64 ips[PT_STACK_MAX];
};

/* For unwinding by DWARF CFI in userland (as perf --call-graph dwarf): the user registers at the
 * probe, in DWARF register order for x86-64 (rax rdx rcx rbx rsi rdi rbp rsp r8..r15, then rip
 * as 16, the return-address column), and the top of the user stack from rsp. `bytes` of the data
 * were copied: the configured size, or less where the stack ends sooner (to within 8 bytes of its
 * end), or a negative errno. The data follows this struct, which ends the event: the event ends
 * after the `bytes` copied (built in a per-CPU slot and sent at its size), or after the
 * configured size (stack_copy_bytes in the BPF program, --stack-bytes; reserved in place when the
 * slot was taken). */
#define PT_DWARF_REGS 17
#define PT_STACK_COPY_MAX 131072
/* The largest launch or capture event with its stacks, before the stack data. */
#define PT_STACK_EVENT_MAX 4096
/* Slots per CPU where stack events are built (parcagpu_trace.bpf.c, stack_slots). */
#define PT_STACK_SLOTS_PER_CPU 4

struct pt_stack_copy {
  __u64 regs[PT_DWARF_REGS];
  __s32 bytes;
  __u32 size; /* the configured size (--stack-bytes); the event may end after `bytes` */
};

/* CPython (3.11+) at a launch. Userland puts one struct pt_py_proc per Python process in the
 * BPF hash map "py_procs" (pid -> where _PyRuntime's interpreter list is, and the offsets of
 * the fields walked, for that process's CPython version: tools/trace/python.cc). The BPF program
 * finds the firing thread's PyThreadState in the first interpreter's thread list by
 * native_thread_id (in the process's pid namespace) and copies its _PyInterpreterFrame chain, innermost first: for each frame
 * the code object pointer, the instruction pointer and the byte that tells where the eval
 * loop was entered (3.11: is_entry; 3.12+: owner, FRAME_OWNED_BY_CSTACK = the loop's shim
 * frame). Userland reads the code objects from /proc/PID/mem. */
#define PT_PY_FRAMES_MAX 64
#define PT_PY_THREADS_MAX 128
#define PT_PY_NO_FIELD 0xffff /* pt_py_proc.cframe_current_frame: no _PyCFrame (3.13+) */

struct pt_py_proc {
  __u64 interp_head; /* address of _PyRuntime.interpreters.head in the process */
  __u16 interp_threads_head; /* PyInterpreterState.threads.head */
  __u16 tstate_next;
  __u16 tstate_native_thread_id;
  __u16 tstate_frame;         /* 3.11/3.12: tstate->cframe; 3.13: tstate->current_frame */
  __u16 cframe_current_frame; /* 3.11/3.12: _PyCFrame.current_frame; PT_PY_NO_FIELD */
  __u16 frame_code;           /* f_code (3.11/3.12), f_executable (3.13) */
  __u16 frame_previous;
  __u16 frame_instr;          /* prev_instr (3.11/3.12), instr_ptr (3.13) */
  __u16 frame_entry;          /* the byte: is_entry (3.11), owner (3.12+) */
  __u16 pad[3];
  /* The process's pid namespace (st_dev, st_ino of /proc/PID/ns/pid): native_thread_id is the
   * thread id there (a container's ids differ from the kernel's). 0, 0: unknown, the kernel's
   * (root namespace) tid is used. */
  __u64 pidns_dev;
  __u64 pidns_ino;
};

/* Where the frame walk ended. */
enum pt_py_status {
  PT_PY_OK = 0,         /* the chain was read to its end (count may be 0: no Python frames) */
  PT_PY_NO_THREAD = 1,  /* no PyThreadState with this thread's id (a thread Python never saw) */
  PT_PY_TRUNCATED = 2,  /* more than PT_PY_FRAMES_MAX frames: the outermost are missing */
  PT_PY_READ_ERROR = 3, /* a pointer could not be read: the frames before it are kept */
};

struct pt_py_stack {
  __u32 count;  /* frames filled */
  __u32 status; /* enum pt_py_status */
  __u64 code[PT_PY_FRAMES_MAX];
  __u64 instr[PT_PY_FRAMES_MAX];
  __u8 entry[PT_PY_FRAMES_MAX]; /* is_entry (3.11) or owner (3.12+) */
  /* With PT_F_AUTOGRAD (tools/trace/autograd.h): the launching thread was running an autograd Node
   * (torch::autograd::Engine::evaluate_function): its vtable pointer (word 0, names the node's
   * class) and its sequence_nr_. node_linked: the frames above are the Python frames of the
   * forward call that created the node (found by (pid, node_seq) in autograd_forward); 0: not
   * found, the frames are the thread's own. */
  __u64 node_vtable;
  __u64 node_seq;
  __u32 node_linked;
  __u32 node_pad;
};

/* PyTorch autograd (tools/trace/autograd.h). Key of the BPF LRU map autograd_forward: the Python
 * frames of the thread that numbered a Node (at::sequence_number::get_and_increment's return).
 * The counter is per thread in PyTorch: two Python threads building graphs at once may number
 * nodes alike, and the later one's frames win. */
struct pt_autograd_key {
  __u32 pid;
  __u32 pad;
  __u64 seq;
};
/* Nodes of one thread being run (evaluate_function nests in reentrant backward). */
#define PT_AUTOGRAD_DEPTH 4
struct pt_autograd_node {
  __u64 vtable;
  __u64 seq;
};
struct pt_autograd_thread {
  __u32 depth; /* evaluate_function calls open on this thread (may exceed PT_AUTOGRAD_DEPTH) */
  __u32 pad;
  struct pt_autograd_node nodes[PT_AUTOGRAD_DEPTH];
};

/* What follows a launch or capture event that carries its stack: the frame-pointer walk, the
 * Python frames and the registers and stack copy, whose data ends the event. */
struct pt_stacks {
  struct pt_stack stack;
  struct pt_py_stack py;     /* with PT_F_PY_STACK (a process in py_procs) */
  struct pt_stack_copy copy; /* with PT_F_STACK_COPY (--stack-bytes > 0) */
};

struct pt_header {
  __u32 type;  /* enum pt_event_type */
  __u32 pid;   /* tgid of the firing thread */
  __u32 tid;
  __u32 flags; /* PT_F_* */
  __u64 ts_ns; /* bpf_ktime_get_ns() at the firing */
};

/* cuda_correlation. With user stacks on (the default), pt_correlation_stack_event; when the
 * ring buffer has no room for the stack, this part alone (counted as a dropped stack). */
struct pt_correlation_event {
  struct pt_header h;
  __u32 correlation_id;
  __s32 signed_cbid;
  char name[PT_NAME_LEN];
};

struct pt_correlation_stack_event {
  struct pt_correlation_event c;
  struct pt_stacks stacks;
};

/* PT_EV_KERNEL (from an activity_batch record) and PT_EV_KERNEL_EXECUTED (from the probe's
 * arguments; kind, context_id and batch_index are 0 there); PT_EV_MEMORY (a memory_batch record:
 * bytes and the copy's kinds set, graph fields and name empty). */
struct pt_kernel_event {
  struct pt_header h;
  __u64 start;
  __u64 end;
  __u64 graph_node_id;
  __u32 kind;
  __u32 device_id;
  __u32 context_id;
  __u32 stream_id;
  __u32 correlation_id;
  __u32 graph_id;
  __u32 batch_index; /* position in its activity_batch */
  __u32 batch_count; /* the batch's count argument */
  __u64 bytes;       /* PT_EV_MEMORY: bytes copied or filled */
  __u8 copy_kind;    /* PT_EV_MEMORY: include/parcagpu/abi.h PARCAGPU_MREC_OFF_COPY_KIND .. FLAGS */
  __u8 src_kind;
  __u8 dst_kind;
  __u8 mem_flags;
  __u32 peer_device_id;
  __u64 cpu_blocked_ns; /* PT_EV_MEMORY: PARCAGPU_MREC_OFF_CPU_BLOCKED (0 for kernels) */
  char name[PT_NAME_LEN];
};

struct pt_batch_event {
  struct pt_header h;
  __u64 records;     /* the const void ** argument */
  __u32 count;       /* as fired */
  __u32 kernels;     /* kernel records sent */
  __u32 other_kinds; /* records of other kinds, skipped */
  __u32 unreadable;  /* records whose pointer or body could not be read */
};

struct pt_error_event {
  struct pt_header h;
  __s32 code;
  __u32 pad;
  char message[PT_MSG_LEN];
  char component[PT_COMPONENT_LEN];
};

struct pt_gpu_config_event {
  struct pt_header h;
  __u32 device_id;
  __u32 sampling_factor;
  __u32 clock_khz;
  __u32 sm_count;
};

/* cubin_loaded, cubin_unloaded (ptr/size 0), stall_reason_map (crc 0, ptr = names, size =
 * count) and pc_sample_batch (crc 0, ptr = records, size = count). */
struct pt_meta_event {
  struct pt_header h;
  __u64 crc;
  __u64 ptr;
  __u64 size;
};

/* graph_capture_launch(u32 correlationId, s32 signedCbid, ptr name, u32 graphId, u64 graphNodeId).
 * With --capture-sites, pt_capture_stack_event (PT_F_STACK set). */
struct pt_capture_event {
  struct pt_header h;
  __u32 correlation_id;
  __s32 signed_cbid;
  __u32 graph_id;
  __u32 pad;
  __u64 graph_node_id;
  char name[PT_NAME_LEN];
};

struct pt_capture_stack_event {
  struct pt_capture_event c;
  struct pt_stacks stacks;
};

/* graph_node_clone(u64 originalNodeId, u64 clonedNodeId, u32 execGraphId). */
struct pt_clone_event {
  struct pt_header h;
  __u64 original_node_id;
  __u64 cloned_node_id;
  __u32 exec_graph_id;
  __u32 pad;
};

/* NVTX (--nvtx): one event per record of an nvtx_event_batch firing (include/parcagpu/abi.h,
 * PARCAGPU_NVTX_*), in the thread's order, with the message read from the process. The header's
 * tid is the firing thread's (the kernel's, as cuda_correlation's); record_tid is the record's
 * own. PT_F_NAME_NULL / PT_F_NAME_FAULT say a message pointer was NULL / unreadable. */
#define PT_NVTX_MSG_LEN 240 /* PARCAGPU_NVTX_MESSAGE_MAX + 1 (checked in the BPF program) */

struct pt_nvtx_event {
  struct pt_header h;
  __u64 timestamp; /* the record's, CLOCK_MONOTONIC */
  __u64 range_id;  /* pairs RANGE_START with RANGE_END */
  __u64 payload;
  __u32 record_tid;
  __u32 correlation_id; /* the thread's last announced launch, 0 if none */
  __u32 domain_id;
  __u32 color;
  __u16 kind; /* PARCAGPU_NVTX_KIND_* */
  __u16 batch_index;
  __u32 batch_count;
  char message[PT_NVTX_MSG_LEN];
};

/* nvtx_resource_name(u32 kind, u64 id, ptr name). */
struct pt_nvtx_resource_event {
  struct pt_header h;
  __u64 id;
  __u32 kind; /* PARCAGPU_NVTX_RESOURCE_* */
  __u32 pad;
  char name[PT_NVTX_MSG_LEN];
};

/* Per-CPU counters (map "stats"), summed by userland. */
enum pt_stat {
  PT_STAT_RINGBUF_DROPS = 0,   /* events that found the ring buffer full */
  PT_STAT_READ_ERRORS,         /* every failed read below, summed */
  PT_STAT_READ_ERR_ARG,        /* bpf_usdt_arg failed */
  PT_STAT_READ_ERR_RECORD_PTR, /* activity_batch: records[i] unreadable */
  PT_STAT_READ_ERR_RECORD,     /* activity_batch: the 160-byte record unreadable */
  PT_STAT_READ_ERR_STRING,     /* a name / message / component string unreadable */
  PT_STAT_READ_ERR_BLOB,       /* stall_reason_map blob unreadable */
  PT_STAT_BATCH_RECORDS,       /* sum of activity_batch count arguments */
  PT_STAT_BATCH_OVER_CAP,      /* records beyond PARCAGPU_ACTIVITY_BATCH_MAX, not read */
  PT_STAT_RECORDS_OTHER_KIND,  /* records of kinds other than KERNEL / CONCURRENT_KERNEL */
  PT_STAT_PC_SAMPLE_RECORDS,   /* sum of pc_sample_batch count arguments */
  /* Probe firings, one counter per probe. */
  PT_STAT_FIRE_CUDA_CORRELATION,
  PT_STAT_FIRE_KERNEL_EXECUTED,
  PT_STAT_FIRE_ACTIVITY_BATCH,
  PT_STAT_FIRE_PC_SAMPLE_BATCH,
  PT_STAT_FIRE_STALL_REASON_MAP,
  PT_STAT_FIRE_CUBIN_LOADED,
  PT_STAT_FIRE_CUBIN_UNLOADED,
  PT_STAT_FIRE_GPU_CONFIG,
  PT_STAT_FIRE_ERROR,
  PT_STAT_FIRE_GRAPH_CAPTURE_LAUNCH,
  PT_STAT_FIRE_GRAPH_NODE_CLONE,
  PT_STAT_FIRE_MEMORY_BATCH,
  PT_STAT_MEMORY_RECORDS,      /* sum of memory_batch count arguments */
  PT_STAT_READ_ERR_MEMORY,     /* memory_batch: a record unreadable */
  PT_STAT_STACK_ERRORS,        /* bpf_get_stack failed (the event goes with an empty stack) */
  PT_STAT_STACKS_DROPPED,      /* no ring space for an event with its stack: sent without it */
  PT_STAT_STACK_COPY_BYTES,    /* user stack bytes copied for DWARF unwinding */
  PT_STAT_STACK_COPY_ERRORS,   /* the user stack could not be read even at the smallest size */
  PT_STAT_STACK_COPY_SHORT,    /* copies that reached the stack's end before stack_copy_bytes */
  PT_STAT_PY_STACKS,           /* launches in a Python process whose thread state was found */
  PT_STAT_PY_NO_THREAD,        /* ... whose thread had no PyThreadState (native stack only) */
  PT_STAT_PY_READ_ERRORS,      /* a thread-state or frame pointer was unreadable */
  PT_STAT_PY_TRUNCATED,        /* frame chains longer than PT_PY_FRAMES_MAX */
  PT_STAT_META_RINGBUF_DROPS,  /* metadata events (error, cubin_*, stall_reason_map, gpu_config)
                                  that found their own ring buffer (meta_events) full */
  PT_STAT_ERROR_DROPS,         /* ... of which error firings: lost, the user never sees them */
  PT_STAT_AUTOGRAD_FORWARD_STACKS, /* Nodes numbered on a Python thread: its frames kept */
  PT_STAT_AUTOGRAD_LINKED,     /* launches in an autograd node, the forward's frames found */
  PT_STAT_AUTOGRAD_FORWARD_MISSING, /* ... not found (evicted, or numbered before attach) */
  PT_STAT_AUTOGRAD_READ_ERRORS, /* the Node's vtable pointer or sequence_nr_ unreadable */
  PT_STAT_FIRE_NVTX_EVENT_BATCH,
  PT_STAT_FIRE_NVTX_RESOURCE_NAME,
  PT_STAT_NVTX_RECORDS,        /* sum of nvtx_event_batch count arguments */
  PT_STAT_NVTX_OVER_CAP,       /* records beyond PARCAGPU_NVTX_BATCH_MAX in one firing, not read */
  PT_STAT_READ_ERR_NVTX,       /* nvtx_event_batch: a record pointer or record unreadable */
  PT_STAT_NVTX_MESSAGE_FAULTS, /* ... a record's message unreadable (sent without it) */
  PT_STAT_MAX,
};

#endif /* PARCAGPU_TRACE_EVENTS_H */
