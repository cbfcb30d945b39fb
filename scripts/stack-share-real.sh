#!/usr/bin/env bash
# Whole stacks of a training step (issue 29): tools/bench/torch_block.py (a transformer block's
# forward, loss.backward() and AdamW), eager and as a CUDA-graph replay, for SECONDS each under the
# library at its default rates with `parcagpu-trace --pc` (default options, plus TRACE_ARGS)
# attached; prints where the launch stacks end by GPU time (scripts/stack_shares.py: under a line
# of the script, whole without one, cut inside a library) and the trace's drops.
# Usage: scripts/stack-share-real.sh [--seconds S] [--out DIR] [--min-complete P]
# Env: PARCAGPU_LIB, PARCAGPU_TRACE, PYTHON, TRACE_ARGS (extra parcagpu-trace options)
. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
SECONDS_RUN=30 OUT=/tmp/parcagpu-stack-share MIN_COMPLETE=
parse_options "--seconds=SECONDS_RUN --out=OUT --min-complete=MIN_COMPLETE" "$@"
need_lib_trace_root
mkdir -p "$OUT"
rc=0
for mode in eager graph; do
  "$TRACE" -l "$LIB" --pc --json --folded "$OUT/$mode.folded" ${TRACE_ARGS:-} \
    >"$OUT/$mode.json" 2>"$OUT/$mode.err" &
  tpid=$!
  wait_attached 60 "$tpid" "$OUT/$mode.err" || die "parcagpu-trace did not attach: $(cat "$OUT/$mode.err")"
  env -u PARCAGPU_RATE_LIMIT -u PARCAGPU_GRAPH_RATE_LIMIT CUDA_INJECTION64_PATH="$LIB" \
    "$PYTHON" "$ROOT/tools/bench/torch_block.py" --mode "$mode" --seconds "$SECONDS_RUN" \
    >"$OUT/$mode.app" 2>&1 || die "torch_block.py --mode $mode failed: $(tail -5 "$OUT/$mode.app")"
  sleep 2
  kill -INT "$tpid"; wait "$tpid"
  echo "== $mode ($SECONDS_RUN s, parcagpu-trace --pc ${TRACE_ARGS:-})"
  python3 - "$OUT/$mode.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
keys = ["correlations", "kernels_matched", "ringbuf_drops", "stacks_dropped", "dwarf_stacks",
        "dwarf_stacks_failed", "stack_copy_bytes", "stack_copies_to_stack_end"]
print("  " + ", ".join("%s %s" % (k, j.get(k, "-")) for k in keys))
PY
  python3 "$ROOT/scripts/stack_shares.py" "$OUT/$mode.folded" torch_block.py \
    ${MIN_COMPLETE:+--min-complete "$MIN_COMPLETE"} || rc=1
done
exit $rc
