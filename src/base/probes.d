/* USDT probes of provider "parcagpu". The argument types are the production consumer's contract
 * (see include/parcagpu/abi.h and docs/probe-abi.md): their sizes and signedness end up in
 * the .note.stapsdt argument specs, which the consumer's BPF reads. Never change one silently. */
provider parcagpu {
  probe cuda_correlation(uint32_t correlationId, int32_t signedCbid, const char *name);
  probe kernel_executed(uint64_t start, uint64_t end, uint32_t correlationId, uint32_t deviceId,
                        uint32_t streamId, uint32_t graphId, uint64_t graphNodeId, const char *name);
  probe activity_batch(const void **records, uint32_t count);
  probe pc_sample_batch(const void **records, uint32_t count);
  probe stall_reason_map(const char *names, uint32_t count);
  probe cubin_loaded(uint64_t cubinCrc, const char *cubin, uint64_t cubinSize);
  probe cubin_unloaded(uint64_t cubinCrc);
  probe gpu_config(uint32_t deviceId, uint32_t samplingFactor, uint32_t clockKHz, uint32_t smCount);
  probe error(int32_t code, const char *message, const char *component);
  /* Graph capture-site attribution (ours, beyond the production ABI): a launch recorded into a
   * graph during stream capture, and each node cloned into an executable graph. */
  probe graph_capture_launch(uint32_t correlationId, int32_t signedCbid, const char *name,
                             uint32_t graphId, uint64_t graphNodeId);
  probe graph_node_clone(uint64_t originalNodeId, uint64_t clonedNodeId, uint32_t execGraphId);
};
