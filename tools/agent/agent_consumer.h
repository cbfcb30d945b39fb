/* The agent-faithful test consumer: what agent_consumer.bpf.c shares with its userland.
 * Plain C, included by the BPF program and by the C++ side.
 *
 * This consumer exists to see exactly what the production agent (Parca's, built on the
 * OpenTelemetry eBPF profiler) sees, and nothing more; docs/probe-abi.md describes that agent.
 * So it attaches one uprobe per probe name, at the LAST .note.stapsdt entry of that name, only
 * for the names the agent knows, with the note's semaphore as the uprobe's reference counter, and
 * it evaluates each note's argument specs itself (the spec table below, one entry per attached
 * probe, found through the uprobe's cookie). It copies from user memory exactly what the agent
 * copies and gives up where the agent gives up, counting each failed read. */
#ifndef PARCAGPU_AGENT_CONSUMER_H
#define PARCAGPU_AGENT_CONSUMER_H

#include <linux/types.h>

/* Probes the agent attaches, one BPF program each. The value is the uprobe cookie and the index
 * of the probe's argument spec in the "specs" map. */
enum ac_probe {
  AC_PROBE_CUDA_CORRELATION = 0,
  AC_PROBE_ACTIVITY_BATCH,
  AC_PROBE_KERNEL_EXECUTED, /* only when activity_batch cannot be attached */
  AC_PROBE_CUBIN_LOADED,
  AC_PROBE_PC_SAMPLE_BATCH,
  AC_PROBE_STALL_REASON_MAP,
  AC_PROBE_ERROR,
  AC_PROBE_GPU_CONFIG,
  AC_PROBE_MAX,
};

/* ---- USDT argument specs, parsed in userland from the note's "8@%rdi -4@-20(%rbp) 4@$3" ---- */
#define AC_MAX_ARGS 12 /* the agent's limit */

enum ac_arg_type {
  AC_ARG_CONST = 1,     /* "4@$128", "4@128": the value itself */
  AC_ARG_REG = 2,       /* "8@%rdi", "4@%ecx": a register (read from pt_regs) */
  AC_ARG_REG_DEREF = 3, /* "8@-16(%rbp)", "8@(%rax)": 8 bytes read at register + offset */
};

struct ac_arg_spec {
  __u64 val_off;  /* constant, or memory offset from the register */
  __u32 type;     /* enum ac_arg_type; 0 = the spec could not be parsed (read fails) */
  __u16 reg_off;  /* byte offset of the register in struct pt_regs */
  __u8 is_signed; /* the size was negative ("-4@...") */
  __u8 bitshift;  /* 64 - 8 * size: the value is shifted up and back to its size */
};

struct ac_probe_spec {
  struct ac_arg_spec args[AC_MAX_ARGS];
  __u32 nargs; /* 0 when the note's argument string could not be parsed: every read fails */
  __u32 pad;
};

/* ---- The agent's ring buffer ----
 * The agent puts every event of every probe it reads (all but cuda_correlation, which goes its
 * trace path) into ONE ring buffer, "cupti_events" in support/ebpf/cuda.ebpf.c, of 1 MiB; its
 * tracer/tracer.go scales it to 1 MiB << CUPTIEventScaleFactor (parca-agent's
 * --bpf-cupti-event-scale-factor, default 0). This consumer's "agent_ring" is that ring: the same
 * size (-s), holding per event exactly the bytes the agent's event takes (a BPF ring-buffer
 * record is its size rounded up to 8 plus an 8-byte header). Where our event carries more than the
 * agent's (kernel records: the firing time and context for the timestamp check), the agent ring
 * gets a slot of the agent's size and the full event goes to our own ring "events" (64 MiB), which
 * is not the agent's and must not fill up (AC_STAT_OWN_RING_DROPS). */
#define AC_AGENT_RING_BYTES 1048576u /* cupti_events' max_entries (cuda.ebpf.c), factor 0 */
/* The agent's events (cuda.ebpf.c structs), bytes each. */
#define AC_AGENT_KERNEL_EVENT_SIZE 304 /* struct kernel_event: 48 bytes and a 256-byte name */
#define AC_AGENT_PC_EVENT_SIZE 712     /* struct pc_sample_event: 72 + 128 + 64 x 8 */
#define AC_AGENT_CUBIN_EVENT_SIZE 32
#define AC_AGENT_GPU_CONFIG_EVENT_SIZE 24
#define AC_AGENT_STALL_MAP_EVENT_SIZE 4112 /* 16 + 64 x 64 */
#define AC_AGENT_ERROR_EVENT_SIZE 336      /* 16 + 256 + 64 */

/* ---- What the agent copies ---- */
#define AC_ACTIVITY_CAP 128  /* records read per activity_batch firing */
#define AC_ACTIVITY_CHUNK 64 /* ... in two tail-called chunks of 64 */
#define AC_PTR_GROUP 16      /* record pointers are read 16 at a time (128 bytes) */
#define AC_KERNEL_NAME_LEN 256
#define AC_PC_CAP 1024       /* records read per pc_sample_batch firing */
#define AC_PC_CHUNK 128      /* ... in 8 tail-called chunks of 128 */
#define AC_PC_RECORD_SIZE 60 /* CUpti_PCSamplingPCData up to and including correlationId */
#define AC_PC_FUNCTION_NAME_LEN 128
#define AC_STALL_REASONS 64  /* stall-reason entries copied per PC record (8 bytes each) */
#define AC_STALL_NAME_LEN 64 /* stall_reason_map: 64 names of 64 bytes */
#define AC_ERROR_MSG_LEN 256
#define AC_ERROR_COMPONENT_LEN 64

/* Offsets in a PC record (CUpti_PCSamplingPCData; checked against cupti_pcsampling.h by the unit
 * test). */
#define AC_PC_OFF_SIZE 0
#define AC_PC_OFF_CUBIN_CRC 8
#define AC_PC_OFF_PC_OFFSET 16
#define AC_PC_OFF_FUNCTION_INDEX 24
#define AC_PC_OFF_FUNCTION_NAME 32
#define AC_PC_OFF_STALL_REASON_COUNT 40
#define AC_PC_OFF_STALL_REASON 48
#define AC_PC_OFF_CORRELATION_ID 56

/* ---- Events (ring buffer "events"); each starts with type and pid ---- */
enum ac_event_type {
  AC_EV_CORRELATION = 1,
  AC_EV_KERNEL = 2, /* a kernel record read through activity_batch, or a kernel_executed firing */
  AC_EV_CUBIN = 3,  /* first cubin_loaded of a (pid, crc) */
  AC_EV_PC_SAMPLE = 4,
  AC_EV_STALL_MAP = 5,
  AC_EV_ERROR = 6,
  AC_EV_GPU_CONFIG = 7,  /* first gpu_config of a (pid, device) */
  AC_EV_KERNEL_SLOT = 8, /* agent ring: the room an agent's kernel event takes (data ignored) */
};

struct ac_correlation_event {
  __u32 type, pid;
  __u32 tid;
  __u32 correlation_id;
  __s32 signed_cbid;
  __u32 pad;
  __u64 ts; /* bpf_ktime_get_ns() at the firing: for the timestamp check (not the agent's) */
};

struct ac_kernel_event {
  __u32 type, pid;
  __u64 start, end, graph_node_id;
  __u64 ts; /* bpf_ktime_get_ns() at the firing that carried it: for the timestamp check */
  __u32 correlation_id, device_id, context_id, stream_id, graph_id;
  __u32 kind;       /* 3 or 10; 0 from kernel_executed */
  __u32 name_fault; /* the name could not be read (the agent names it "err") */
  __u32 pad;
  char name[AC_KERNEL_NAME_LEN];
};

struct ac_cubin_event {
  __u32 type, pid;
  __u64 crc, ptr, size;
};

struct ac_pc_sample_event {
  __u32 type, pid;
  __u8 record[64]; /* the AC_PC_RECORD_SIZE bytes copied from the record pointer */
  char function_name[AC_PC_FUNCTION_NAME_LEN];
  struct {
    __u32 index, samples;
  } stall[AC_STALL_REASONS];
};

struct ac_stall_map_event {
  __u32 type, pid;
  __u32 count; /* the probe's count, clamped to AC_STALL_REASONS as the agent does */
  __u32 pad;
  char names[AC_STALL_REASONS][AC_STALL_NAME_LEN];
};

struct ac_error_event {
  __u32 type, pid;
  __s32 code;
  __u32 pad;
  char message[AC_ERROR_MSG_LEN];
  char component[AC_ERROR_COMPONENT_LEN];
};

struct ac_gpu_config_event {
  __u32 type, pid;
  __u32 device_id, sampling_factor, clock_khz, sm_count;
};

/* ---- Per-pid counters (hash "pid_stats", key {pid, stat}) ---- */
enum ac_stat {
  AC_STAT_FIRINGS = 0,                  /* + enum ac_probe: firings per attached probe */
  AC_STAT_READ_FAIL_ARG = AC_PROBE_MAX, /* a USDT argument could not be evaluated */
  AC_STAT_READ_FAIL_RECORD_PTRS,        /* activity_batch: a group of 16 record pointers */
  AC_STAT_READ_FAIL_RECORD,             /* activity_batch: a 160-byte record */
  AC_STAT_READ_FAIL_KERNEL_NAME,        /* a kernel name (record or kernel_executed) */
  AC_STAT_READ_FAIL_PC_PTRS,            /* pc_sample_batch: a group of 16 record pointers */
  AC_STAT_READ_FAIL_PC_RECORD,          /* pc_sample_batch: a 60-byte record */
  AC_STAT_READ_FAIL_PC_FUNCTION,        /* pc_sample_batch: functionName (NULL included) */
  AC_STAT_READ_FAIL_PC_STALLS,          /* pc_sample_batch: 64 x 8 bytes at stallReason */
  AC_STAT_READ_FAIL_STALL_MAP,          /* stall_reason_map: the 64 x 64 blob */
  AC_STAT_READ_FAIL_ERROR_STRING,       /* error: message or component */
  AC_STAT_READ_FAIL_LAST = AC_STAT_READ_FAIL_ERROR_STRING,
  AC_STAT_BATCH_RECORDS,      /* sum of activity_batch counts */
  AC_STAT_BATCH_OVER_CAP,     /* records beyond the 128 the agent reads */
  AC_STAT_BATCH_ABANDONED,    /* records left unread after a failed pointer read */
  AC_STAT_BATCH_OTHER_KIND,   /* records of a kind other than KERNEL / CONCURRENT_KERNEL */
  AC_STAT_PC_RECORDS,         /* sum of pc_sample_batch counts */
  AC_STAT_PC_OVER_CAP,        /* records beyond the 1024 the agent reads */
  AC_STAT_PC_ABANDONED,       /* records left unread after a failed read (rest of the firing) */
  AC_STAT_PC_RING_FULL,       /* ... of them: the agent ring was full (that record and the rest) */
  AC_STAT_CUBIN_REPEATS,      /* cubin_loaded of a (pid, crc) already seen */
  AC_STAT_GPU_CONFIG_REPEATS, /* gpu_config of a (pid, device) already seen: ignored */
  AC_STAT_RING_FULL,          /* + enum ac_probe: reservations the full agent ring refused */
  /* Our own ring "events" full: the summary misses events (our fault, not the agent's loss). */
  AC_STAT_OWN_RING_DROPS = AC_STAT_RING_FULL + AC_PROBE_MAX,
  AC_STAT_MAX,
};

struct ac_stat_key {
  __u32 pid;
  __u32 stat;
};

#endif /* PARCAGPU_AGENT_CONSUMER_H */
