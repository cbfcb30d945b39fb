#!/usr/bin/env bash
# Stand-in for pc_workload on a machine without a GPU (tests/gpu/pc_selftest.sh): the mock
# application under the library ($CUDA_INJECTION64_PATH), for one second, reported in
# pc_workload's format. Its kernels are the mock's, not pc_workload's.
B="${PARCAGPU_BUILD_DIR:?}"
start=$(date +%s.%N)
LD_LIBRARY_PATH="$B/mock" "$B/bin/parcagpu-mockapp" "$CUDA_INJECTION64_PATH" --duration=1s \
  --launch-rate=300 --graph-rate=100 >/dev/null 2>&1 || exit 2
end=$(date +%s.%N)
awk -v s="$start" -v e="$end" -v n="${1:-1}" 'BEGIN {
  printf "PC_WORKLOAD {\"iterations\":%d,\"elapsed_s\":%.6f,\"us_per_iteration\":%.3f,\"launches_per_iteration\":3,\"kernels_per_iteration\":4,\"sms\":132}\n", n, e - s, (e - s) * 1e6 / n }'
