/* parcagpu probe ABI: what a consumer of the USDT probes of provider "parcagpu" may rely on.
 *
 * This header is plain C (no libc includes), so a BPF program can include it as well as C++.
 * Every number here is the production consumer's contract (the Parca agent's BPF program,
 * docs/probe-abi.md):
 * probe names, argument order and types, the kernel activity record offsets and the batch limits.
 * Changing one breaks GPU profiling in production; tests/unit/lib/abi_test.cc and
 * tests/integration/test_probe_notes.py pin them against the CUPTI headers and against the
 * library's .note.stapsdt.
 */
#ifndef PARCAGPU_ABI_H
#define PARCAGPU_ABI_H

#define PARCAGPU_PROVIDER "parcagpu"

#include "parcagpu/probe_list.h"

/* Probes, their arguments in order (u32 = uint32_t, s32 = int32_t, u64 = uint64_t, ptr = 8 bytes):
 *
 * cuda_correlation(u32 correlationId, s32 signedCbid, ptr name)
 *     A launch, fired on its API EXIT. signedCbid < 0: driver API cbid, > 0: runtime API cbid.
 *     name: the kernel symbol when CUPTI gives one, else the API function name.
 * kernel_executed(u64 start, u64 end, u32 correlationId, u32 deviceId, u32 streamId,
 *                 u32 graphId, u64 graphNodeId, ptr name)
 *     One kernel's GPU timing, per kernel (alternative to activity_batch).
 * activity_batch(ptr records, u32 count)
 *     records: const void *[count], each a CUPTI kernel activity record (layout below).
 *     count <= PARCAGPU_ACTIVITY_BATCH_MAX.
 * pc_sample_batch(ptr records, u32 count)
 *     records: const void *[count] of CUpti_PCSamplingPCData
 *     (PARCAGPU_PC_SAMPLE_RECORD_SIZE bytes).
 * stall_reason_map(ptr names, u32 count)
 *     One blob of PARCAGPU_STALL_REASON_MAX names of PARCAGPU_STALL_REASON_NAME_LEN bytes.
 * cubin_loaded(u64 cubinCrc, ptr cubin, u64 cubinSize)
 * cubin_unloaded(u64 cubinCrc)
 * gpu_config(u32 deviceId, u32 samplingFactor, u32 clockKHz, u32 smCount)
 * error(s32 code, ptr message, ptr component)
 *
 * Capture-site attribution (parcagpu's own, beyond the production consumer's set):
 * graph_capture_launch(u32 correlationId, s32 signedCbid, ptr name, u32 graphId, u64 graphNodeId)
 *     A launch recorded into graph graphId as node graphNodeId during stream capture; it never
 *     runs under correlationId, so no cuda_correlation is fired for it. Take the stack here.
 * graph_node_clone(u64 originalNodeId, u64 clonedNodeId, u32 execGraphId)
 *     A node cloned into executable graph execGraphId at instantiation. Kernels of that exec
 *     carry clonedNodeId as graphNodeId; follow the chain back to the captured node.
 *
 * Copies and fills (parcagpu's own, beyond the production consumer's set):
 * memory_batch(ptr records, u32 count)
 *     records: `count` contiguous memory records of PARCAGPU_MREC_SIZE bytes (layout below), one
 *     per memcpy or memset the GPU ran for a launch announced by cuda_correlation (its cbid one of
 *     the copy/fill cbids of cbid_table.h). count <= PARCAGPU_MEMORY_BATCH_MAX. Copy and fill
 *     launches are announced only while memory_batch has a consumer.
 *
 * Kernels reach activity_batch / kernel_executed only for launches announced by cuda_correlation
 * first; a graph launch announces once and all its kernels carry its correlation ID.
 * Metadata probes (stall_reason_map, cubin_loaded, gpu_config) fire again when a consumer attaches.
 */

/* Batch limits. */
#define PARCAGPU_ACTIVITY_BATCH_MAX 128
#define PARCAGPU_PC_SAMPLE_BATCH_MAX 1024
#define PARCAGPU_PC_SAMPLE_RECORD_SIZE 60
#define PARCAGPU_STALL_REASON_MAX 64
#define PARCAGPU_STALL_REASON_NAME_LEN 64

/* The kernel activity record as the consumer reads it: it copies PARCAGPU_KREC_SIZE bytes from
 * each activity_batch pointer. Same offsets in CUpti_ActivityKernel5 .. CUpti_ActivityKernel10. */
#define PARCAGPU_KREC_SIZE 160
#define PARCAGPU_KREC_OFF_KIND 0            /* u32: 3 = KERNEL, 10 = CONCURRENT_KERNEL */
#define PARCAGPU_KREC_OFF_START 16          /* u64 ns */
#define PARCAGPU_KREC_OFF_END 24            /* u64 ns */
#define PARCAGPU_KREC_OFF_DEVICE_ID 40      /* u32 */
#define PARCAGPU_KREC_OFF_CONTEXT_ID 44     /* u32 */
#define PARCAGPU_KREC_OFF_STREAM_ID 48      /* u32 */
#define PARCAGPU_KREC_OFF_CORRELATION_ID 92 /* u32 */
#define PARCAGPU_KREC_OFF_NAME 104          /* const char * in the traced process */
#define PARCAGPU_KREC_OFF_GRAPH_NODE_ID 144 /* u64 */
#define PARCAGPU_KREC_OFF_GRAPH_ID 156      /* u32 */

/* The memory record of memory_batch: parcagpu's own fixed layout (CUPTI's memcpy, peer copy and
 * memset records differ in size and offsets from one kind and version to the next). */
#define PARCAGPU_MEMORY_BATCH_MAX 64
#define PARCAGPU_MREC_SIZE 48
/* kind: u32, 1 = MEMCPY, 2 = MEMSET, 22 = MEMCPY2 (peer). copy kind: u8, CUpti_ActivityMemcpyKind
 * (1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ...), 0 for a fill. src/dst kind: u8, CUpti_ActivityMemoryKind
 * of the source and destination (a fill: the memory filled, in both). */
#define PARCAGPU_MREC_OFF_KIND 0
#define PARCAGPU_MREC_OFF_COPY_KIND 4
#define PARCAGPU_MREC_OFF_SRC_KIND 5
#define PARCAGPU_MREC_OFF_DST_KIND 6
#define PARCAGPU_MREC_OFF_FLAGS 7           /* u8: bit 0 = asynchronous */
#define PARCAGPU_MREC_OFF_BYTES 8           /* u64 */
#define PARCAGPU_MREC_OFF_START 16          /* u64 ns */
#define PARCAGPU_MREC_OFF_END 24            /* u64 ns */
#define PARCAGPU_MREC_OFF_DEVICE_ID 32      /* u32 */
#define PARCAGPU_MREC_OFF_STREAM_ID 36      /* u32 */
#define PARCAGPU_MREC_OFF_CORRELATION_ID 40 /* u32 */
/* peer device: u32, a peer copy's other device (else = deviceId) */
#define PARCAGPU_MREC_OFF_PEER_DEVICE_ID 44
#define PARCAGPU_MREC_FLAG_ASYNC 1

#define PARCAGPU_KIND_MEMCPY 1
#define PARCAGPU_KIND_MEMSET 2
#define PARCAGPU_KIND_MEMCPY2 22
#define PARCAGPU_KIND_KERNEL 3
#define PARCAGPU_KIND_CONCURRENT_KERNEL 10

/* NVTX ranges and marks (parcagpu's own, beyond the production consumer's set; the layout is the
 * one of the upstream library's NVTX branch, parca-dev/parcagpu aec9dd5, so a consumer written for
 * it reads ours).
 * nvtx_event_batch(ptr events, u32 count)
 *     events: const void *[count], each an NVTX event record of PARCAGPU_NVTX_REC_SIZE bytes
 *     (layout below), all of one thread, in the order the thread made them.
 *     count <= PARCAGPU_NVTX_BATCH_MAX. The record's message pointer stays readable until the
 *     probe returns (the library's own copy, at most PARCAGPU_NVTX_MESSAGE_MAX bytes and a NUL).
 * nvtx_resource_name(u32 kind, u64 id, ptr name)
 *     A name the application gave a thread, stream or device (PARCAGPU_NVTX_RESOURCE_*). */
#define PARCAGPU_NVTX_BATCH_MAX 256
#define PARCAGPU_NVTX_MESSAGE_MAX 239
#define PARCAGPU_NVTX_REC_SIZE 56
#define PARCAGPU_NVTX_OFF_TIMESTAMP 0       /* u64 ns, CLOCK_MONOTONIC (bpf_ktime_get_ns's clock) */
#define PARCAGPU_NVTX_OFF_TID 8             /* u32, the kernel's thread ID */
#define PARCAGPU_NVTX_OFF_CORRELATION_ID 12 /* u32, the thread's last announced launch, or 0 */
#define PARCAGPU_NVTX_OFF_DOMAIN_ID 16      /* u32, 0 = the default domain */
#define PARCAGPU_NVTX_OFF_KIND 20           /* u16, PARCAGPU_NVTX_KIND_* */
#define PARCAGPU_NVTX_OFF_FLAGS 22          /* u16, 0 */
#define PARCAGPU_NVTX_OFF_COLOR 24          /* u32 ARGB, 0 if unset */
#define PARCAGPU_NVTX_OFF_DEVICE_ID 28      /* u32, 0xffffffff if unknown */
#define PARCAGPU_NVTX_OFF_PAYLOAD 32        /* u64, the raw payload bits */
#define PARCAGPU_NVTX_OFF_RANGE_ID 40       /* u64, pairs RANGE_START with RANGE_END; 0 otherwise */
#define PARCAGPU_NVTX_OFF_MESSAGE 48        /* const char * in the traced process */
#define PARCAGPU_NVTX_KIND_RANGE_PUSH 1
#define PARCAGPU_NVTX_KIND_RANGE_POP 2
#define PARCAGPU_NVTX_KIND_RANGE_START 3
#define PARCAGPU_NVTX_KIND_RANGE_END 4
#define PARCAGPU_NVTX_KIND_MARK 5
#define PARCAGPU_NVTX_RESOURCE_OS_THREAD 1
#define PARCAGPU_NVTX_RESOURCE_CUDA_STREAM 2
#define PARCAGPU_NVTX_RESOURCE_CUDA_DEVICE 3
#define PARCAGPU_NVTX_RESOURCE_CUDA_KERNEL 4

/* Names the consumer reads, and the stand-in for a longer one.
 *
 * The production consumer keeps a PC record's functionName up to PARCAGPU_PC_FUNCTION_NAME_MAX
 * bytes and a kernel record's name up to PARCAGPU_KERNEL_NAME_MAX (its reads of 128 and 256
 * bytes, NUL included). Cut there, long C++ kernel names (templates, anonymous namespaces) lose
 * what tells them apart: kernels whose first bytes agree would be merged, and the cut name matches
 * no symbol of the cubin. So the library hands over a name longer than the limit as a stand-in
 * of exactly the limit's length: the name's first (limit - PARCAGPU_NAME_HASH_SUFFIX_LEN) bytes,
 * then '#' and the 16 lowercase hex digits of parcagpu_name_hash() of the whole name. '#' is in
 * no mangled name, so a stand-in is recognised by it; the full name is the cubin's function
 * symbol with that hash (for a PC record, also the symbol at its functionIndex: CUPTI's
 * "unique symbol index in the module" of the cubin with its cubinCrc). Names within the limit
 * are handed over unchanged. */
#define PARCAGPU_PC_FUNCTION_NAME_MAX 127
#define PARCAGPU_KERNEL_NAME_MAX 255
#define PARCAGPU_NAME_HASH_MARK '#'
#define PARCAGPU_NAME_HASH_SUFFIX_LEN 17 /* '#' and 16 hex digits */

/* 64-bit FNV-1a of a NUL-terminated name. */
static inline unsigned long long parcagpu_name_hash(const char *name) {
  unsigned long long h = 14695981039346656037ull;
  for (; *name; ++name) h = (h ^ (unsigned char)*name) * 1099511628211ull;
  return h;
}

/* Writes the stand-in of `name` (longer than `limit` bytes) to `out` (limit + 1 bytes),
 * NUL-terminated. */
static inline void parcagpu_name_stand_in(const char *name, unsigned long limit, char *out) {
  static const char kHex[] = "0123456789abcdef";
  const unsigned long keep = limit - PARCAGPU_NAME_HASH_SUFFIX_LEN;
  unsigned long long h = parcagpu_name_hash(name);
  unsigned long i;
  for (i = 0; i < keep; ++i) out[i] = name[i];
  out[keep] = PARCAGPU_NAME_HASH_MARK;
  for (i = 0; i < 16; ++i) out[keep + 16 - i] = kHex[(h >> (4 * i)) & 0xf];
  out[limit] = 0;
}

/* Whether `name` (`len` bytes) is a stand-in; if so its hash in *hash. */
static inline int parcagpu_name_is_stand_in(const char *name, unsigned long len,
                                            unsigned long long *hash) {
  unsigned long long h = 0;
  unsigned long i;
  if (len < PARCAGPU_NAME_HASH_SUFFIX_LEN ||
      name[len - PARCAGPU_NAME_HASH_SUFFIX_LEN] != PARCAGPU_NAME_HASH_MARK)
    return 0;
  for (i = len - PARCAGPU_NAME_HASH_SUFFIX_LEN + 1; i < len; ++i) {
    const char c = name[i];
    if (c >= '0' && c <= '9')
      h = h << 4 | (unsigned long long)(c - '0');
    else if (c >= 'a' && c <= 'f')
      h = h << 4 | (unsigned long long)(c - 'a' + 10);
    else
      return 0;
  }
  *hash = h;
  return 1;
}

#ifdef __cplusplus
#include <cstddef>
#include <cstdint>

namespace parcagpu::abi {

/* Argument sizes as they appear in the SDT note: negative = signed (as in "-4@%eax"). */
struct ProbeSpec {
  const char *name;
  int nargs;
  int arg_sizes[8];
};

/* Generated from the one probe list (probe_list.h). */
#define PARCAGPU_PROBE_SPEC(name, params, args, nargs, sizes) \
  {#name, nargs, {PARCAGPU_UNPAREN sizes}},
inline constexpr ProbeSpec kProbes[] = {PARCAGPU_PROBE_LIST(PARCAGPU_PROBE_SPEC)};
#undef PARCAGPU_PROBE_SPEC

}  // namespace parcagpu::abi

#if defined(__has_include)
#if __has_include(<cupti_activity.h>)
#include <cupti_activity.h>
#define PARCAGPU_ABI_CHECK_RECORD(T)                                                             \
  static_assert(offsetof(T, kind) == PARCAGPU_KREC_OFF_KIND, #T ".kind");                        \
  static_assert(offsetof(T, start) == PARCAGPU_KREC_OFF_START, #T ".start");                     \
  static_assert(offsetof(T, end) == PARCAGPU_KREC_OFF_END, #T ".end");                           \
  static_assert(offsetof(T, deviceId) == PARCAGPU_KREC_OFF_DEVICE_ID, #T ".deviceId");           \
  static_assert(offsetof(T, contextId) == PARCAGPU_KREC_OFF_CONTEXT_ID, #T ".contextId");        \
  static_assert(offsetof(T, streamId) == PARCAGPU_KREC_OFF_STREAM_ID, #T ".streamId");           \
  static_assert(offsetof(T, correlationId) == PARCAGPU_KREC_OFF_CORRELATION_ID,                  \
                #T ".correlationId");                                                            \
  static_assert(offsetof(T, name) == PARCAGPU_KREC_OFF_NAME, #T ".name");                        \
  static_assert(offsetof(T, graphNodeId) == PARCAGPU_KREC_OFF_GRAPH_NODE_ID, #T ".graphNodeId"); \
  static_assert(offsetof(T, graphId) == PARCAGPU_KREC_OFF_GRAPH_ID, #T ".graphId");              \
  static_assert(sizeof(T) >= PARCAGPU_KREC_SIZE, #T " is shorter than the consumer's copy")
PARCAGPU_ABI_CHECK_RECORD(CUpti_ActivityKernel10);
#if __has_include(<cupti_activity_deprecated.h>)
#include <cupti_activity_deprecated.h>
PARCAGPU_ABI_CHECK_RECORD(CUpti_ActivityKernel5);
PARCAGPU_ABI_CHECK_RECORD(CUpti_ActivityKernel6);
PARCAGPU_ABI_CHECK_RECORD(CUpti_ActivityKernel7);
PARCAGPU_ABI_CHECK_RECORD(CUpti_ActivityKernel8);
PARCAGPU_ABI_CHECK_RECORD(CUpti_ActivityKernel9);
#endif
static_assert(CUPTI_ACTIVITY_KIND_KERNEL == PARCAGPU_KIND_KERNEL, "kind KERNEL");
static_assert(CUPTI_ACTIVITY_KIND_MEMCPY == PARCAGPU_KIND_MEMCPY, "kind MEMCPY");
static_assert(CUPTI_ACTIVITY_KIND_MEMSET == PARCAGPU_KIND_MEMSET, "kind MEMSET");
static_assert(CUPTI_ACTIVITY_KIND_MEMCPY2 == PARCAGPU_KIND_MEMCPY2, "kind MEMCPY2");
static_assert(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL == PARCAGPU_KIND_CONCURRENT_KERNEL,
              "kind CONCURRENT_KERNEL");
#endif
#endif

#endif /* __cplusplus */
#endif /* PARCAGPU_ABI_H */
