// The one site of each probe (see usdt.h): every probe macro is expanded exactly once, here.
#include "base/usdt.h"

namespace parcagpu::usdt {

void cuda_correlation(uint32_t correlation_id, int32_t signed_cbid, const char *name) {
  PARCAGPU_CUDA_CORRELATION(correlation_id, signed_cbid, name);
}

void kernel_executed(uint64_t start, uint64_t end, uint32_t correlation_id, uint32_t device_id,
                     uint32_t stream_id, uint32_t graph_id, uint64_t graph_node_id,
                     const char *name) {
  PARCAGPU_KERNEL_EXECUTED(start, end, correlation_id, device_id, stream_id, graph_id,
                           graph_node_id, name);
}

void activity_batch(const void **records, uint32_t count) {
  PARCAGPU_ACTIVITY_BATCH(records, count);
}

void pc_sample_batch(const void **records, uint32_t count) {
  PARCAGPU_PC_SAMPLE_BATCH(records, count);
}

void stall_reason_map(const char *names, uint32_t count) {
  PARCAGPU_STALL_REASON_MAP(names, count);
}

void cubin_loaded(uint64_t crc, const char *cubin, uint64_t size) {
  PARCAGPU_CUBIN_LOADED(crc, cubin, size);
}

void cubin_unloaded(uint64_t crc) { PARCAGPU_CUBIN_UNLOADED(crc); }

void gpu_config(uint32_t device_id, uint32_t sampling_factor, uint32_t clock_khz,
                uint32_t sm_count) {
  PARCAGPU_GPU_CONFIG(device_id, sampling_factor, clock_khz, sm_count);
}

void error(int32_t code, const char *message, const char *component) {
  PARCAGPU_ERROR(code, message, component);
}

void graph_capture_launch(uint32_t correlation_id, int32_t signed_cbid, const char *name,
                          uint32_t graph_id, uint64_t graph_node_id) {
  PARCAGPU_GRAPH_CAPTURE_LAUNCH(correlation_id, signed_cbid, name, graph_id, graph_node_id);
}

void graph_node_clone(uint64_t original_node_id, uint64_t cloned_node_id, uint32_t exec_graph_id) {
  PARCAGPU_GRAPH_NODE_CLONE(original_node_id, cloned_node_id, exec_graph_id);
}

}  // namespace parcagpu::usdt
