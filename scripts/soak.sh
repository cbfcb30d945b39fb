#!/usr/bin/env bash
# Soak: the mock app replays the capture and conditional scenarios (with graph and eager
# launches between them) in a loop under the library, every launch announced, with
# parcagpu-trace attached, and the resident memory of both is printed over time. Not a test:
# the figures are for reading (both columns should stay flat once warmed up).
#
#   sudo scripts/soak.sh [SECONDS=300] [INTERVAL=10] [THREADS=4]
#
# Prints "t_s app_rss_kib trace_rss_kib" every INTERVAL seconds, then first/last/max of each and
# the consumer's JSON summary (orphans, drops). Needs the plain build (make).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-300}
INTERVAL=${2:-10}
THREADS=${3:-4}
BUILD=${BUILD:-build}
LIB=$PWD/$BUILD/lib/libparcagpu.so
APP=$PWD/$BUILD/bin/parcagpu-mockapp
TRACE=$PWD/$BUILD/bin/parcagpu-trace
for f in "$LIB" "$APP" "$TRACE"; do [ -x "$f" ] || [ -f "$f" ] || { echo "soak: $f missing (make)" >&2; exit 1; }; done

work=$(mktemp -d /tmp/parcagpu-soak.XXXXXX)
trace_pid= app_pid=
cleanup() {
  [ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null || true
  [ -n "$trace_pid" ] && kill "$trace_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo -; }

"$TRACE" -l "$LIB" --json >"$work/trace.json" 2>"$work/trace.err" &
trace_pid=$!
for _ in $(seq 200); do
  grep -q "attached" "$work/trace.err" 2>/dev/null && break
  sleep 0.1
done
grep -q "attached" "$work/trace.err" || { cat "$work/trace.err" >&2; exit 1; }

PARCAGPU_RATE_LIMIT=100000000 PARCAGPU_GRAPH_RATE_LIMIT=100000000 \
  "$APP" "$LIB" --threads="$THREADS" --loop --duration="${DURATION}s" \
  --scenario=capture,conditional,graph-runtime,eager-runtime,graph-driver-ptsz \
  >"$work/app.out" 2>"$work/app.err" &
app_pid=$!

echo "soak: ${DURATION} s, ${THREADS} threads replaying capture,conditional,graph-runtime,eager-runtime,graph-driver-ptsz; app pid $app_pid, parcagpu-trace pid $trace_pid"
printf "%6s %14s %14s\n" t_s app_rss_kib trace_rss_kib
start=$(date +%s)
series=()
while kill -0 "$app_pid" 2>/dev/null; do
  t=$(( $(date +%s) - start ))
  a=$(rss_kib "$app_pid"); c=$(rss_kib "$trace_pid")
  [ "$a" = - ] && break
  printf "%6d %14s %14s\n" "$t" "$a" "$c"
  series+=("$a $c")
  sleep "$INTERVAL"
done
wait "$app_pid" && app_rc=0 || app_rc=$?
app_pid=
kill -TERM "$trace_pid" 2>/dev/null || true
wait "$trace_pid" 2>/dev/null || true
trace_pid=

printf "%s\n" "${series[@]}" | awk '
  NR == 1 { fa = $1; fc = $2 }
  { la = $1; lc = $2; if ($1 > ma) ma = $1; if ($2 > mc) mc = $2 }
  END { printf "app:   first %d KiB, last %d KiB, max %d KiB\n", fa, la, ma;
        printf "trace: first %d KiB, last %d KiB, max %d KiB\n", fc, lc, mc }'
echo "app exit status $app_rc; $(grep -o '"launches":[0-9]*' "$work/app.out" | head -1), $(grep -o '"kernels_run":[0-9]*' "$work/app.out" | head -1)"
grep "parcagpu\[" "$work/app.err" | head -5 || true
echo "parcagpu-trace: $(tail -n 1 "$work/trace.json" | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
print(" ".join("%s=%s" % (k, j.get(k)) for k in ("correlations", "kernel_records", "kernels_matched",
      "orphan_kernels", "orphan_correlations_eager", "orphan_correlations_graph",
      "ringbuf_drops", "duplicate_correlations")))' 2>/dev/null || echo "no JSON summary")"
exit "$app_rc"
