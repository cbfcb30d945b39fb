#!/usr/bin/env bash
# Issue 28 item 3 on a GPU: which kernels of a graph replay give PC samples. The transformer
# block's training step captured as a CUDA graph (tools/bench/torch_block.py --mode graph) runs SECONDS
# under parcagpu-trace --pc twice: at the library's defaults and with PARCAGPU_PC_GRAPHS=1 (the
# graph's first launch may come while PC sampling is enabled); then scripts/pc_breadth.py over
# both JSON summaries: per kernel with 2% of the GPU time, its samples and top stall reasons.
#
# Usage: scripts/pc-graph-breadth-real.sh [SECONDS]   (default 60)
# Env: PARCAGPU_LIB, PARCAGPU_TRACE, PYTHON, OUT (/tmp/parcagpu-pc-graphs)
. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
need_lib_trace_root
SECS="${1:-60}"
OUT="${OUT:-/tmp/parcagpu-pc-graphs}"
mkdir -p "$OUT"
for v in graphs default; do
  lib="$OUT/lib-$v.so"
  cp "$LIB" "$lib"  # the trace attaches by file: each run its own
  "$TRACE" -l "$lib" --pc --json="$OUT/$v.json" -n 1000 >"$OUT/$v.txt" 2>"$OUT/$v-trace.err" &
  T=$!
  wait_attached 60 "$T" "$OUT/$v-trace.err" || die "parcagpu-trace did not attach ($v)"
  env -u PARCAGPU_RATE_LIMIT -u PARCAGPU_GRAPH_RATE_LIMIT CUDA_INJECTION64_PATH="$lib" PARCAGPU_DEBUG=1 \
    PARCAGPU_PC_GRAPHS=$([ "$v" = graphs ] && echo 1 || echo 0) \
    "$PYTHON" "$ROOT/tools/bench/torch_block.py" --mode graph --seconds "$SECS" >"$OUT/$v-app.out" 2>"$OUT/$v-app.err"
  sleep 1
  kill -INT "$T"
  wait "$T"
  echo "== $v: $(cat "$OUT/$v-app.out")"
  grep "parcagpu\[[0-9]*\]: pc sampling:" "$OUT/$v-app.err" | sed 's/^/   /'
done
python3 "$ROOT/scripts/pc_breadth.py" graphs="$OUT/graphs.json" default="$OUT/default.json"
