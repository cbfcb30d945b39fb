#!/usr/bin/env bash
# Device call K (2026-11-26): where the agent variant's graph-launch cost goes between episodes:
# agent-nopc vs agent, 2 rounds of 1.5M graph launches, the library's debug totals kept whole.
set -u
C=$PWD/.carry; chmod +x $C/bin/*
export PARCAGPU_LIB=$C/lib/libparcagpu.so PARCAGPU_AGENT=$C/bin/agent-consumer PARCAGPU_TRACE=$C/bin/parcagpu-trace
export CUDA_VISIBLE_DEVICES=0
BENCH_DEBUG=1 ROUNDS=2 N=1500000 WARMUP=700000 VARIANTS="none agent-nopc agent" MODES=graph OUT=/tmp/bk \
  timeout 280 bash scripts/bench-gpu-overhead.sh > $OUT/bench-k.txt 2>&1
grep -a "parcagpu\[" /tmp/bk/bench/programs.log | grep -v "instantiation:\|instantiated:\|cubin" | cut -c1-400 > $OUT/bench-k-debug.txt
