#!/usr/bin/env bash
# Device call G (2026-11-26, nvidia-h100-x2): issue 19 parts (a) 40 s and (b) with the library
# that resumes learning after a graph's first launch; then, at once, issue 17's PC flow (60 s,
# GPU 0, its own library copy) and the PyTorch step benchmark (GPU 1: none and agent, 7 rounds x
# 6 s per mode, medians and means). Outputs under $OUT.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
C=$PWD/.carry; chmod +x $C/bin/*
export PARCAGPU_LIB=$C/lib/libparcagpu.so PARCAGPU_AGENT=$C/bin/agent-consumer PARCAGPU_TRACE=$C/bin/parcagpu-trace
{ nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv; uname -r; nproc; date -u; md5sum $PARCAGPU_LIB; } > $OUT/gpu.txt 2>&1
T0=$(date +%s)
MG_DEBUG=1 PARTS="a b" TWO_GPU_SECONDS=40 OUT=/tmp/o19 timeout 260 bash scripts/multi-gpu-real.sh > $OUT/multi-gpu.txt 2>&1
echo "multi-gpu rc $? after $(( $(date +%s) - T0 )) s" >> $OUT/multi-gpu.txt
grep -a "parcagpu\[" /tmp/o19/a.app.err | cut -c1-300 | grep -v "windows stay open\|instantiation:\|instantiated:\|cubin" | head -80 >> $OUT/multi-gpu.txt
mkdir -p /tmp/pflib && cp $PARCAGPU_LIB /tmp/pflib/libparcagpu.so
left=$(( 560 - ($(date +%s) - T0) ))
D=60; [ $((left - 60)) -lt 60 ] && D=$((left - 60))
if [ $D -ge 20 ]; then
  CUDA_VISIBLE_DEVICES=0 PARCAGPU_LIB=/tmp/pflib/libparcagpu.so PARCAGPU_DEBUG=1 OUT=/tmp/pf timeout $((D + 40)) bash scripts/pc-flow-torch-real.sh $D > $OUT/pc-flow.txt 2>&1 &
fi
R=7; [ $left -lt 330 ] && R=5
CUDA_VISIBLE_DEVICES=1 timeout $((left - 5)) /opt/torch/.venv/bin/python scripts/bench-torch-step.py --lib $PARCAGPU_LIB --agent $PARCAGPU_AGENT \
  --variants "none agent" --rounds $R --seconds 6 --warmup 6 --debug --out /tmp/ts > $OUT/torch-step.txt 2>&1
echo "torch-step rc $? after $(( $(date +%s) - T0 )) s" >> $OUT/torch-step.txt
grep -aE "pc sampling|episode|learning" /tmp/ts/agent.err | cut -c1-300 | tail -8 >> $OUT/torch-step.txt
wait
echo "pc-flow ($D s) done after $(( $(date +%s) - T0 )) s" >> $OUT/pc-flow.txt
grep -aE "pc sampling|learning" /tmp/pf/app.err | cut -c1-300 | tail -8 >> $OUT/pc-flow.txt
echo "total $(( $(date +%s) - T0 )) s" >> $OUT/gpu.txt
