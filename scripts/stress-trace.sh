#!/usr/bin/env bash
# Stress figures for the consumer path: parcagpu-mockapp --stress (no sleeps) with rate limits
# raised so every launch is announced, parcagpu-trace attached. Prints what the tool sustained
# and what it lost. A benchmark, not a test: it reports, it does not judge.
#   scripts/stress-trace.sh [SECONDS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
SECS=${1:-20}
THREADS=${2:-8}
LIB=$(realpath "$BUILD/lib/libparcagpu.so")
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
"$BUILD/bin/parcagpu-trace" -l "$LIB" --json >"$out/trace.json" 2>"$out/trace.err" &
tr=$!
for _ in $(seq 600); do grep -q "attached" "$out/trace.err" && break; sleep 0.1; done
PARCAGPU_RATE_LIMIT=1000000000 PARCAGPU_GRAPH_RATE_LIMIT=1000000000 \
  "$BUILD/bin/parcagpu-mockapp" "$LIB" --stress --threads="$THREADS" --duration="${SECS}s" \
  >"$out/app.out" 2>"$out/app.err"
kill -TERM "$tr"; wait "$tr" || true
python3 - "$out/app.out" "$out/trace.json" <<'PY'
import json, sys
app = [json.loads(l.split(" ", 1)[1]) for l in open(sys.argv[1]) if l.startswith("MOCKAPP_SUMMARY ")][0]
t = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
print("mock app: %d launches in %.1f s (%.0f launches/s), %d kernels run, %d records written, %d dropped by CUPTI"
      % (app["launches"], app["elapsed_s"], app["launches_per_s"], app["kernels_run"],
         app["records_written"], app["records_dropped"]))
print("parcagpu-trace: %d events in %.1f s = %.0f events/s; correlations %d, kernel records %d, matched %d"
      % (t["events"], t["duration_s"], t["events_per_s"], t["correlations"], t["kernel_records"],
         t["kernels_matched"]))
print("losses: ring-buffer drops %d, read errors %d, orphan kernels %d, orphan correlations %d eager / %d graph"
      % (t["ringbuf_drops"], t["read_errors"], t["orphan_kernels"], t["orphan_correlations_eager"],
         t["orphan_correlations_graph"]))
PY
