/* parcagpu-trace's PC sampling (--pc): the events pc_sampling.bpf.c sends to userland and its
 * per-CPU counters. Plain C, shared by the BPF program and the C++ side (pc_bpf_session.cc,
 * pc_profile.cc).
 *
 * A BPF object of its own, beside parcagpu_trace.bpf.c, for what the tracer's programs do not
 * carry: per pc_sample_batch firing at most PARCAGPU_PC_SAMPLE_BATCH_MAX record pointers,
 * PARCAGPU_PC_SAMPLE_RECORD_SIZE bytes of each record, up to 128 bytes of its functionName and
 * PARCAGPU_STALL_REASON_MAX * 8 bytes from its stallReason pointer, and the 64 x 64 stall-reason
 * blob, read the way the production consumer reads them (include/parcagpu/abi.h). Its events go
 * into the tracer's ring buffer (the map is shared), start with struct pt_header and have types
 * from PT_EV_EXTENSION_BASE on; cuda_correlation, cubin_loaded / cubin_unloaded and gpu_config come
 * from the tracer's own events (trace_events.h), whose bytes the extension reads too. */
#ifndef PARCAGPU_PC_EVENTS_H
#define PARCAGPU_PC_EVENTS_H

#include <linux/types.h>

#include "trace_events.h"

#define PV_FUNCTION_NAME_LEN 128
#define PV_STALL_BYTES 512 /* PARCAGPU_STALL_REASON_MAX * sizeof(u32 index, u32 samples) */

enum pv_event_type {
  PV_EV_PC_RECORD = PT_EV_EXTENSION_BASE,
  PV_EV_STALL_REASON_MAP,
};

/* One PC record of a pc_sample_batch firing, as read. `record` holds the 60 bytes of the
 * CUpti_PCSamplingPCData (CUDA 12.4+): size 0, cubinCrc 8, pcOffset 16, functionIndex 24,
 * pad 28, functionName 32, stallReasonCount 40, stallReason 48, correlationId 56. */
struct pv_pc_record_event {
  struct pt_header h;
  __u32 batch_index;
  __u32 batch_count;
  __u8 record[64];
  char function_name[PV_FUNCTION_NAME_LEN];
  __u32 stall[PV_STALL_BYTES / 4]; /* {index, samples} pairs; the first stallReasonCount count */
};

struct pv_stall_map_event {
  struct pt_header h;
  __u32 count;
  __u32 pad;
  char names[64 * 64];
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
  PV_STAT_META_RINGBUF_DROPS, /* stall-reason names that found the metadata ring buffer full */
  PV_STAT_MAX,
};

#endif /* PARCAGPU_PC_EVENTS_H */
