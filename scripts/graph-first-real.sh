#!/usr/bin/env bash
# Issue 28 item 3 on a GPU: kernels first run inside a graph late in a program (after PC
# sampling's learning) give PC samples by default, and the graph pays nothing for it
# (docs/pc-sampling.md P32, P33). tests/gpu/graph_first (eager launches, then a graph of 32 kernels
# of its own replayed) runs ROUNDS times each, interleaved: alone; under the library with
# parcagpu-trace --pc and PARCAGPU_PC_GRAPH_SHADOWS=1 (the graph's kernels registered through
# the library's own exec; off by default, docs/pc-sampling.md P35); and the same with PARCAGPU_PC_GRAPH_SHADOWS=0 (the graph's
# kernels give no records). An episode comes about every 8 s (the 2% duty cap): rounds of 30 s
# show the graph's kernels sampled every time, rounds of 4 s only where one fell in the replays.
# Prints
# each run's launch and GPU ns per replay, the library's PC totals and the trace's samples of the
# graph's kernels (late_work<1..4>).
#
# Usage: scripts/graph-first-real.sh [ROUNDS [SECONDS]]   (default 2 4)
# Env: PARCAGPU_LIB, PARCAGPU_TRACE, GRAPH_FIRST (a built tests/gpu/graph_first; else built here
#      with nvcc), OUT (/tmp/parcagpu-graph-first)
. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
need_lib_trace_root
ROUNDS="${1:-2}"
SECS="${2:-4}"
OUT="${OUT:-/tmp/parcagpu-graph-first}"
mkdir -p "$OUT"
PROG="${GRAPH_FIRST:-$OUT/graph_first}"
[ -x "$PROG" ] || nvcc -O2 -std=c++17 -arch="$CUDA_ARCH" -o "$PROG" "$ROOT/tests/gpu/graph_first.cu" -lcuda ||
  die "cannot build graph_first"
for r in $(seq 1 "$ROUNDS"); do
  for v in alone shadows noshadows; do
    if [ "$v" = alone ]; then
      echo "$v round $r: $("$PROG" "$SECS")"
      continue
    fi
    lib="$OUT/lib-$v.so"
    cp "$LIB" "$lib"
    "$TRACE" -l "$lib" --pc --json="$OUT/$v-$r.json" >"$OUT/$v-$r.txt" 2>"$OUT/$v-$r-trace.err" &
    T=$!
    wait_attached 60 "$T" "$OUT/$v-$r-trace.err" || die "parcagpu-trace did not attach ($v)"
    line=$(env CUDA_INJECTION64_PATH="$lib" PARCAGPU_DEBUG=1 \
      PARCAGPU_PC_GRAPH_SHADOWS=$([ "$v" = shadows ] && echo 1 || echo 0) \
      "$PROG" "$SECS" 2>"$OUT/$v-$r-app.err")
    sleep 1
    kill -INT "$T"
    wait "$T"
    echo "$v round $r: $line"
    grep -o "graphs registered=[0-9]*\|graphs not registered=[0-9]*\|graphs first launched while enabled=[0-9]*\|graphs instantiated while enabled=[0-9]*\|non-user samples=[0-9]*\|gpu-only (not announced)=[0-9]*" \
      "$OUT/$v-$r-app.err" | tr '\n' ' ' | sed 's/^/    library: /'
    echo
    python3 - "$OUT/$v-$r.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
k = {x["function"]: x["samples"] for x in j.get("pc", {}).get("kernels", [])}
late = {f: n for f, n in k.items() if "late_work" in f}
print("    trace: PC samples of the graph's kernels %d (%d kernels), of early_work %d, orphans %d" % (
    sum(late.values()), len(late), sum(n for f, n in k.items() if "early_work" in f),
    j.get("orphan_kernels", -1)))
PY
  done
done
