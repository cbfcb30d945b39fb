/* The one list of parcagpu's USDT probes. Everything else about a probe is generated from it:
 * the dtrace provider (src/base/probes.d, run through the C preprocessor at build time), the
 * library's firing functions and semaphore reads (src/base/usdt.h, usdt.cc), the consumer
 * snapshot the library acts on (src/base/consumers.h) and its debug line, and the argument specs
 * consumers and tests check the .note.stapsdt against (parcagpu::abi::kProbes in abi.h).
 * A new probe is one line here (and its description in docs/probe-abi.md).
 *
 * Plain preprocessor, no includes: a .d file, C, BPF C and C++ all read it.
 *
 * X(name, (parameters), (arguments), argument count, (argument sizes as in the SDT note:
 *   negative = signed)) */
#ifndef PARCAGPU_PROBE_LIST_H
#define PARCAGPU_PROBE_LIST_H

#define PARCAGPU_UNPAREN(...) __VA_ARGS__

#define PARCAGPU_PROBE_LIST(X)                                                                     \
  X(cuda_correlation, (uint32_t correlationId, int32_t signedCbid, const char *name),              \
    (correlationId, signedCbid, name), 3, (4, -4, 8))                                              \
  X(kernel_executed,                                                                               \
    (uint64_t start, uint64_t end, uint32_t correlationId, uint32_t deviceId, uint32_t streamId,   \
     uint32_t graphId, uint64_t graphNodeId, const char *name),                                    \
    (start, end, correlationId, deviceId, streamId, graphId, graphNodeId, name), 8,                \
    (8, 8, 4, 4, 4, 4, 8, 8))                                                                      \
  X(activity_batch, (const void **records, uint32_t count), (records, count), 2, (8, 4))           \
  X(pc_sample_batch, (const void **records, uint32_t count), (records, count), 2, (8, 4))          \
  X(stall_reason_map, (const char *names, uint32_t count), (names, count), 2, (8, 4))              \
  X(cubin_loaded, (uint64_t cubinCrc, const char *cubin, uint64_t cubinSize),                      \
    (cubinCrc, cubin, cubinSize), 3, (8, 8, 8))                                                    \
  X(cubin_unloaded, (uint64_t cubinCrc), (cubinCrc), 1, (8))                                       \
  X(gpu_config, (uint32_t deviceId, uint32_t samplingFactor, uint32_t clockKHz, uint32_t smCount), \
    (deviceId, samplingFactor, clockKHz, smCount), 4, (4, 4, 4, 4))                                \
  X(error, (int32_t code, const char *message, const char *component), (code, message, component), \
    3, (-4, 8, 8))                                                                                 \
  X(graph_capture_launch,                                                                          \
    (uint32_t correlationId, int32_t signedCbid, const char *name, uint32_t graphId,               \
     uint64_t graphNodeId),                                                                        \
    (correlationId, signedCbid, name, graphId, graphNodeId), 5, (4, -4, 8, 4, 8))                  \
  X(graph_node_clone, (uint64_t originalNodeId, uint64_t clonedNodeId, uint32_t execGraphId),      \
    (originalNodeId, clonedNodeId, execGraphId), 3, (8, 8, 4))                                     \
  X(memory_batch, (const void *records, uint32_t count), (records, count), 2, (8, 4))              \
  X(nvtx_event_batch, (const void **events, uint32_t count), (events, count), 2, (8, 4))           \
  X(nvtx_resource_name, (uint32_t kind, uint64_t id, const char *name), (kind, id, name), 3,       \
    (4, 8, 8))

#endif /* PARCAGPU_PROBE_LIST_H */
