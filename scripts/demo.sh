#!/usr/bin/env bash
# The main job on its built-in default: the mock CUDA application under libparcagpu.so, with our
# eBPF consumer attached system-wide, printing what it sees.
#   CONSUMER=bpftrace scripts/demo.sh     # the bpftrace script instead of parcagpu-trace
#   DEMO_ARGS="--duration=10s --threads=4" scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
LIB=$(realpath "$BUILD/lib/libparcagpu.so")
APP=$BUILD/bin/parcagpu-mockapp
CONSUMER=${CONSUMER:-parcagpu-trace}
DEMO_ARGS=${DEMO_ARGS:---duration=3s --threads=2 --launch-rate=500 --graph-rate=100}
[ "$(id -u)" -eq 0 ] || { echo "demo: eBPF needs root" >&2; exit 1; }

log=$(mktemp); trap 'rm -f "$log"' EXIT
if [ "$CONSUMER" = bpftrace ]; then
  bpftrace scripts/parcagpu.bt "$LIB" >"$log" 2>&1 &
  ready="READY parcagpu.bt"
else
  "$BUILD/bin/parcagpu-trace" -l "$LIB" >"$log" 2>&1 &
  ready="parcagpu-trace: attached"
fi
consumer=$!
for _ in $(seq 600); do grep -q "$ready" "$log" && break; sleep 0.1; done
grep -q "$ready" "$log" || { cat "$log"; echo "demo: consumer did not attach" >&2; exit 1; }
echo "== $CONSUMER attached; running: parcagpu-mockapp $LIB $DEMO_ARGS"
# shellcheck disable=SC2086
"$APP" "$LIB" $DEMO_ARGS
sleep 0.5
kill -TERM "$consumer"; wait "$consumer" || true
echo "== what $CONSUMER saw:"
if [ "$CONSUMER" = bpftrace ]; then
  grep -v -e "uprobe_events" -e "failed to detach" -e RLIMIT "$log" | tail -n 40
else
  cat "$log"
fi
