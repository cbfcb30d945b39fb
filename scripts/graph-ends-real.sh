#!/usr/bin/env bash
# Made-up graph kernel ends on a real GPU (docs/cupti-facts.md fact 13): does any graph kernel
# record reach a consumer with an end CUPTI wrote after kernel activity went off? Runs
# tools/bench/torch_mixed.py (an eager training step and 4 replays of a captured decode forward
# per iteration, whose graph kernels take microseconds) at the library's defaults under
# parcagpu-trace --json-lines, without and with --pc, and prints for each run: announced graph
# launches, graph kernel records delivered, those lasting over 1 ms (none of this program's
# kernels does: a made-up end), the GPU time they claim against all, and the library's own
# counts (PARCAGPU_DEBUG: graph kernels with a made-up end, the grace it ended with).
#
# Usage: scripts/graph-ends-real.sh [--lib PATH] [--trace PATH] [--out DIR]
#   Env: SECONDS_RUN (25), MODES ("nopc pc").
# Exit: 0 no made-up end delivered, 1 some were, 2 could not run. Outputs under $OUT.

. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
OUT="${OUT:-/tmp/parcagpu-graph-ends}"
parse_options "--lib=LIB --trace=TRACE --out=OUT" "$@"
SECONDS_RUN="${SECONDS_RUN:-25}"
MODES="${MODES:-nopc pc}"
mkdir -p "$OUT" || die "cannot create $OUT"
need_lib_trace_root
[ -x "$PYTHON" ] || die "no python at $PYTHON"

verdict=0
for mode in $MODES; do
  flag=()
  [ "$mode" = pc ] && flag=(--pc)
  "$TRACE" -l "$LIB" "${flag[@]}" --json-lines > "$OUT/$mode.lines" 2> "$OUT/$mode.trace.err" &
  tpid=$!
  wait_attached 60 "$tpid" "$OUT/$mode.trace.err" || die "parcagpu-trace did not attach"
  env -u PARCAGPU_LIB CUDA_INJECTION64_PATH="$LIB" PARCAGPU_DEBUG=1 "$PYTHON" \
    "$ROOT/tools/bench/torch_mixed.py" --seconds "$SECONDS_RUN" \
    > "$OUT/$mode.program" 2> "$OUT/$mode.program.err" || die "torch_mixed.py failed ($mode)"
  sleep 2
  kill -INT "$tpid" 2>/dev/null
  wait "$tpid" 2>/dev/null
  "$PYTHON" - "$OUT/$mode.lines" "$OUT/$mode.program.err" "$mode" <<'EOF' || verdict=1
import json, re, sys
lines, err, mode = sys.argv[1:4]
kernels = [k for k in map(json.loads, open(lines)) if k.get("type") == "kernel" and "start" in k]
graph = [k for k in kernels if k.get("graph_id")]
long_ = [k for k in graph if k["end"] - k["start"] > 1_000_000]
total = sum(k["end"] - k["start"] for k in kernels)
claimed = sum(k["end"] - k["start"] for k in long_)
text = open(err, errors="replace").read()
made_up = re.findall(r"graph kernels with a made-up end=(\d+)", text)
grace = re.findall(r"graph completion:.* grace ms=([\d.]+)", text)
launches = re.findall(r"announced eager=(\d+) graph=(\d+)", text)
print(f"{mode}: announced graph launches {launches[-1][1] if launches else '?'}, "
      f"graph kernel records {len(graph)} of {len(kernels)}, over 1 ms {len(long_)} "
      f"({len({k['correlation_id'] for k in long_})} launches), claiming {claimed/1e6:.1f} of "
      f"{total/1e6:.1f} ms GPU time; library: made-up ends not delivered "
      f"{made_up[-1] if made_up else '?'}, grace {grace[-1] if grace else '?'} ms")
sys.exit(1 if long_ else 0)
EOF
done
exit $verdict
