#!/usr/bin/env bash
# Device call H (2026-11-26, two GPUs): (1) tests/gpu/pc_twoctx_facts.cu: which kernels of a
# second GPU give PC records; (2) issue 19 part (b) again (the judge now reads rank lines that
# ran together); (3) issue 17's launch benchmark, runs 1 and 2 at once, one per GPU (each its own
# library copy), 7 rounds of 1.5M launches (about a minute per variant and mode over the rounds).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
C=$PWD/.carry; chmod +x $C/bin/*
export PARCAGPU_LIB=$C/lib/libparcagpu.so PARCAGPU_AGENT=$C/bin/agent-consumer PARCAGPU_TRACE=$C/bin/parcagpu-trace
{ nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv; date -u; md5sum $PARCAGPU_LIB; } > $OUT/gpu-h.txt 2>&1
T0=$(date +%s)
CU=/usr/local/cuda/targets/x86_64-linux
/usr/local/cuda/bin/nvcc -O2 -std=c++17 -arch=sm_90 -I$CU/include -o /tmp/pc_twoctx_facts tests/gpu/pc_twoctx_facts.cu -lcuda -L$CU/lib -lcupti > $OUT/twoctx-facts.txt 2>&1
LD_LIBRARY_PATH=$CU/lib timeout 60 /tmp/pc_twoctx_facts >> $OUT/twoctx-facts.txt 2>&1
echo "facts rc $? after $(( $(date +%s) - T0 )) s" >> $OUT/twoctx-facts.txt
PARTS=b OUT=/tmp/o19b timeout 200 bash scripts/multi-gpu-real.sh > $OUT/multi-gpu-b.txt 2>&1
echo "multi-gpu b rc $? after $(( $(date +%s) - T0 )) s" >> $OUT/multi-gpu-b.txt
mkdir -p /tmp/la /tmp/lb; cp $PARCAGPU_LIB /tmp/la/; cp $PARCAGPU_LIB /tmp/lb/
left=$(( 585 - ($(date +%s) - T0) ))
for g in 0 1; do
  L=/tmp/la; [ $g = 1 ] && L=/tmp/lb
  CUDA_VISIBLE_DEVICES=$g PARCAGPU_LIB=$L/libparcagpu.so ROUNDS=7 N=1500000 WARMUP=700000 VARIANTS="none agent" OUT=/tmp/bo$g \
    timeout $left bash scripts/bench-gpu-overhead.sh > $OUT/bench-run$((g + 1)).txt 2>&1 &
done
wait
echo "total $(( $(date +%s) - T0 )) s" >> $OUT/gpu-h.txt
