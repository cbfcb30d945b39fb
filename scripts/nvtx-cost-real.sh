#!/usr/bin/env bash
# What an NVTX range costs with the library (issue 46 item 2: "the cost with NVTX off is nil; with
# it on, measured"): tools/bench/nvtx_cost.py times PAIRS range_push/range_pop pairs (ROUNDS
# rounds, median) in four processes: no injection at all; the library injected for CUDA only
# (NVTX off: NVTX_INJECTION64_PATH unset); the library as NVTX's injection too, nobody reading
# the ranges (CUPTI's NVTX handlers run, the library subscribes to none); and with parcagpu-trace
# --nvtx attached (the library collects every range). Prints ns per pair for each and the
# difference to the first.
# Usage: scripts/nvtx-cost-real.sh [--pairs N] [--rounds N] [--out DIR]
# Env: PARCAGPU_LIB, PARCAGPU_TRACE, PYTHON (default /opt/torch/.venv/bin/python)
. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
PAIRS=200000 ROUNDS=5 OUT=/tmp/parcagpu-nvtx-cost
start_real_run "--pairs=PAIRS --rounds=ROUNDS --out=OUT" "$@"
bench="$ROOT/tools/bench/nvtx_cost.py"
clean() {
  env -u CUDA_INJECTION64_PATH -u NVTX_INJECTION64_PATH -u PARCAGPU_LIB -u PARCAGPU_TRACE \
    -u PARCAGPU_AGENT "$@"
}
clean "$PYTHON" "$bench" "$PAIRS" "$ROUNDS" >"$OUT/none.json" || die "no-injection run failed"
clean CUDA_INJECTION64_PATH="$LIB" "$PYTHON" "$bench" "$PAIRS" "$ROUNDS" >"$OUT/cuda-only.json" ||
  die "CUDA-only run failed"
clean CUDA_INJECTION64_PATH="$LIB" NVTX_INJECTION64_PATH="$LIB" "$PYTHON" "$bench" "$PAIRS" \
  "$ROUNDS" >"$OUT/nvtx-unread.json" || die "NVTX-injected run failed"
"$TRACE" -l "$LIB" --nvtx >"$OUT/trace.txt" 2>"$OUT/trace.err" &
tpid=$!
wait_attached 60 "$tpid" "$OUT/trace.err" || die "parcagpu-trace did not attach"
clean CUDA_INJECTION64_PATH="$LIB" NVTX_INJECTION64_PATH="$LIB" "$PYTHON" "$bench" "$PAIRS" \
  "$ROUNDS" >"$OUT/nvtx-read.json" || die "NVTX-read run failed"
sleep 1
kill -INT "$tpid"; wait "$tpid"
python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
runs = [("none", "no injection"), ("cuda-only", "library, NVTX off"),
        ("nvtx-unread", "library as NVTX injection, no range consumer"),
        ("nvtx-read", "library as NVTX injection, parcagpu-trace --nvtx")]
base = None
for name, label in runs:
    r = json.load(open(os.path.join(out, name + ".json")))
    ns = r["ns_per_pair"]
    base = ns if base is None else base
    print("  %-48s %8.1f ns per push/pop pair (%+.1f ns)  rounds %s" % (label, ns, ns - base,
          r["rounds_ns"]))
PY
