#!/usr/bin/env bash
# Device call I (2026-11-26, two GPUs), the library with: learning resumed after a graph's first
# launch, every context joining an episode at its first launch (P23), graph uploads
# (cudaGraphUpload/cuGraphUpload) outside episodes, 2% episode duty.
# (1) issue 19 part (a), 40 s; (2) at once: GPU 0 the launch benchmark (5 rounds x 1.5M, none and
# agent, BENCH_DEBUG), GPU 1 the PyTorch step benchmark (none and agent, 5 rounds x 6 s).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
C=$PWD/.carry; chmod +x $C/bin/*
export PARCAGPU_LIB=$C/lib/libparcagpu.so PARCAGPU_AGENT=$C/bin/agent-consumer PARCAGPU_TRACE=$C/bin/parcagpu-trace
{ nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv; date -u; md5sum $PARCAGPU_LIB; } > $OUT/gpu-i.txt 2>&1
T0=$(date +%s)
MG_DEBUG=1 PARTS=a TWO_GPU_SECONDS=40 OUT=/tmp/o19 timeout 170 bash scripts/multi-gpu-real.sh > $OUT/multi-gpu-a.txt 2>&1
echo "multi-gpu a rc $? after $(( $(date +%s) - T0 )) s" >> $OUT/multi-gpu-a.txt
grep -a "parcagpu\[" /tmp/o19/a.app.err | cut -c1-300 | grep -v "windows stay open\|instantiation:\|instantiated:\|cubin" | head -80 >> $OUT/multi-gpu-a.txt
mkdir -p /tmp/la /tmp/lb; cp $PARCAGPU_LIB /tmp/la/; cp $PARCAGPU_LIB /tmp/lb/
left=$(( 580 - ($(date +%s) - T0) ))
CUDA_VISIBLE_DEVICES=0 PARCAGPU_LIB=/tmp/la/libparcagpu.so BENCH_DEBUG=1 ROUNDS=5 N=1500000 WARMUP=700000 VARIANTS="none agent" OUT=/tmp/bo0 \
  timeout $left bash scripts/bench-gpu-overhead.sh > $OUT/bench-i.txt 2>&1 &
CUDA_VISIBLE_DEVICES=1 timeout $left /opt/torch/.venv/bin/python scripts/bench-torch-step.py --lib /tmp/lb/libparcagpu.so --agent $PARCAGPU_AGENT \
  --variants "none agent" --rounds 5 --seconds 6 --warmup 6 --debug --out /tmp/ts > $OUT/torch-step-i.txt 2>&1
grep -aE "pc sampling|learning" /tmp/ts/agent.err | cut -c1-300 | tail -4 >> $OUT/torch-step-i.txt
wait
grep -a "pc sampling" /tmp/bo0/bench/programs.log 2>/dev/null | cut -c1-300 | tail -12 >> $OUT/bench-i.txt
ls /tmp/bo0 >> $OUT/bench-i.txt 2>&1
echo "total $(( $(date +%s) - T0 )) s" >> $OUT/gpu-i.txt
