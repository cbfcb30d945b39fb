/* parcagpu-trace's PC sampling view: the events pc_view.bpf.c sends to userland and its per-CPU
 * counters. Plain C, shared by the BPF program and the C++ side (pc_session.cc, pc_view.cc).
 *
 * A BPF object of its own, beside parcagpu_trace.bpf.c: it reads the PC sampling probes the way
 * the production consumer does (include/parcagpu/abi.h): per pc_sample_batch firing at most
 * PARCAGPU_PC_SAMPLE_BATCH_MAX record pointers, PARCAGPU_PC_SAMPLE_RECORD_SIZE bytes of each
 * record, up to 128 bytes of its functionName and PARCAGPU_STALL_REASON_MAX * 8 bytes from its
 * stallReason pointer; the 64 x 64 stall-reason blob; cubin_loaded's (crc, address, size), whose
 * bytes userland reads from /proc/PID/mem; gpu_config; and cuda_correlation, to tell samples of
 * announced launches from the others. */
#ifndef PARCAGPU_PC_VIEW_H
#define PARCAGPU_PC_VIEW_H

#include <linux/types.h>

#define PV_FUNCTION_NAME_LEN 128
#define PV_STALL_BYTES 512 /* PARCAGPU_STALL_REASON_MAX * sizeof(u32 index, u32 samples) */

enum pv_event_type {
  PV_EV_PC_RECORD = 1,
  PV_EV_STALL_REASON_MAP = 2,
  PV_EV_CUBIN_LOADED = 3,
  PV_EV_CUBIN_UNLOADED = 4,
  PV_EV_GPU_CONFIG = 5,
  PV_EV_CORRELATION = 6,
};

struct pv_header {
  __u32 type;
  __u32 pid;
};

/* One PC record of a pc_sample_batch firing, as read. `record` holds the 60 bytes of the
 * CUpti_PCSamplingPCData (CUDA 12.4+): size 0, cubinCrc 8, pcOffset 16, functionIndex 24,
 * pad 28, functionName 32, stallReasonCount 40, stallReason 48, correlationId 56. */
struct pv_pc_record_event {
  struct pv_header h;
  __u32 batch_index;
  __u32 batch_count;
  __u8 record[64];
  char function_name[PV_FUNCTION_NAME_LEN];
  __u32 stall[PV_STALL_BYTES / 4]; /* {index, samples} pairs; the first stallReasonCount count */
};

struct pv_stall_map_event {
  struct pv_header h;
  __u32 count;
  __u32 pad;
  char names[64 * 64];
};

/* cubin_loaded (ptr, size set), cubin_unloaded (0, 0). */
struct pv_cubin_event {
  struct pv_header h;
  __u64 crc;
  __u64 ptr;
  __u64 size;
};

struct pv_gpu_config_event {
  struct pv_header h;
  __u32 device_id;
  __u32 sampling_factor;
  __u32 clock_khz;
  __u32 sm_count;
};

struct pv_correlation_event {
  struct pv_header h;
  __u32 correlation_id;
  __s32 signed_cbid;
};

enum pv_stat {
  PV_STAT_RINGBUF_DROPS = 0,
  PV_STAT_BATCHES,         /* pc_sample_batch firings */
  PV_STAT_RECORDS,         /* records read */
  PV_STAT_OVER_CAP,        /* records past PARCAGPU_PC_SAMPLE_BATCH_MAX: not read */
  PV_STAT_ERR_ARG,         /* bpf_usdt_arg failed */
  PV_STAT_ERR_POINTER,     /* records[i] unreadable */
  PV_STAT_ERR_RECORD,      /* the 60 bytes unreadable */
  PV_STAT_ERR_NAME,        /* functionName unreadable */
  PV_STAT_ERR_STALL,       /* the 512 stall-reason bytes unreadable */
  PV_STAT_ERR_MAP,         /* the 64 x 64 stall-reason blob unreadable */
  PV_STAT_MAX,
};

#endif /* PARCAGPU_PC_VIEW_H */
