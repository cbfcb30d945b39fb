#!/usr/bin/env bash
# The demo: parcagpu-mockapp (a fake CUDA application on a mock driver and a mock CUPTI, so no
# GPU is needed) runs under libparcagpu.so with parcagpu-trace attached; the demo says what ran,
# what was announced and why not everything, what was matched, GPU time by launch stack, and a
# verdict. Works from the source tree (after `make`) and from an installed package.
#   scripts/demo.sh                                   # from the source tree: build/
#   /usr/lib/parcagpu/demo/demo.sh                    # installed
#   DEMO_ARGS="--duration=10s --threads=4" scripts/demo.sh
#   CONSUMER=bpftrace scripts/demo.sh                 # the bpftrace script instead
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ -f "$here/../CMakeLists.txt" ]; then  # source tree
  BUILD=$(cd "$here/.." && pwd)/${BUILD:-build}
  LIB=${PARCAGPU_LIB:-$BUILD/lib/libparcagpu.so}
  APP=$BUILD/bin/parcagpu-mockapp
  TRACE=${PARCAGPU_TRACE:-$BUILD/bin/parcagpu-trace}
  BT=$here/parcagpu.bt
else  # installed: <prefix>/lib[/<multiarch>]/parcagpu/demo/demo.sh
  LIB=${PARCAGPU_LIB:-$here/../libparcagpu.so}
  APP=$here/bin/parcagpu-mockapp
  prefix=$here
  for _ in 1 2 3 4 5; do prefix=$(dirname "$prefix"); [ -x "$prefix/bin/parcagpu-trace" ] && break; done
  TRACE=${PARCAGPU_TRACE:-$prefix/bin/parcagpu-trace}
  BT=$prefix/share/parcagpu/parcagpu.bt
fi
CONSUMER=${CONSUMER:-parcagpu-trace}
THREADS=2 SECONDS_=3 RATE=500 GRAPH_RATE=100
DEMO_ARGS=${DEMO_ARGS:---duration=${SECONDS_}s --threads=$THREADS --launch-rate=$RATE --graph-rate=$GRAPH_RATE}
OUT=${OUT:-$(mktemp -d /tmp/parcagpu-demo.XXXXXX)}
mkdir -p "$OUT"
[ "$(id -u)" -eq 0 ] || { echo "demo: eBPF needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN)" >&2; exit 1; }
for f in "$LIB" "$APP"; do [ -e "$f" ] || { echo "demo: $f not found (run make first)" >&2; exit 1; }; done
LIB=$(realpath "$LIB")

# The library's rate limits: the defaults unless the environment sets them.
EAGER_LIMIT=${PARCAGPU_RATE_LIMIT:-100} GRAPH_LIMIT=${PARCAGPU_GRAPH_RATE_LIMIT:-20}

log=$OUT/consumer.log
if [ "$CONSUMER" = bpftrace ]; then
  bpftrace "$BT" "$LIB" >"$log" 2>&1 &
  ready="READY parcagpu.bt"
else
  "$TRACE" -l "$LIB" -n 3 --svg "$OUT/gpu.svg" --folded "$OUT/gpu.folded" >"$log" 2>&1 &
  ready="parcagpu-trace: attached"
fi
consumer=$!
for _ in $(seq 600); do grep -q "$ready" "$log" && break; kill -0 "$consumer" 2>/dev/null || break; sleep 0.1; done
grep -q "$ready" "$log" || { cat "$log"; echo "demo: consumer did not attach" >&2; exit 1; }

# shellcheck disable=SC2086
"$APP" "$LIB" $DEMO_ARGS >"$OUT/app.out" 2>"$OUT/app.err" || { cat "$OUT/app.err"; exit 1; }
sleep 0.5
kill -TERM "$consumer"; wait "$consumer" || true

num() { grep -o "\"$1\":[0-9]*" "$OUT/app.out" | head -1 | cut -d: -f2; }
launches=$(num launches) eager=$(num eager_launches) graphs=$(num graph_launches) kernels=$(num kernels_run)
echo "== ran: parcagpu-mockapp $DEMO_ARGS"
echo "   (a fake CUDA app on the mock driver and CUPTI: no GPU) with CUDA_INJECTION64_PATH=$LIB,"
echo "   and $CONSUMER attached to that file"
echo "== the app made $launches launches ($eager eager, $graphs graph), which ran $kernels kernels"
if [ "$CONSUMER" = bpftrace ]; then
  echo "== what bpftrace printed (last lines):"
  grep -v -e "uprobe_events" -e "failed to detach" -e RLIMIT "$log" | tail -n 15
  exit 0
fi
summary=$(grep -m1 "launches announced" "$log" || true)
announced=$(echo "$summary" | sed -n 's/.*launches announced \([0-9]*\).*/\1/p')
matched=$(echo "$summary" | sed -n 's/.*kernels matched \([0-9]*\) of \([0-9]*\).*/\1/p')
records=$(echo "$summary" | sed -n 's/.*kernels matched \([0-9]*\) of \([0-9]*\).*/\2/p')
threads=$(echo "$DEMO_ARGS" | sed -n 's/.*--threads=\([0-9]*\).*/\1/p'); threads=${threads:-1}
secs=$(echo "$DEMO_ARGS" | sed -n 's/.*--duration=\([0-9]*\)s*\( .*\)*$/\1/p'); secs=${secs:-2}
split=$(echo "$summary" | sed -n 's/.*launches announced [0-9]* (\([^)]*\)).*/\1/p')
echo "== announced ${announced:-0} of $launches launches ($split)."
echo "   By design: the library announces at most $EAGER_LIMIT eager and $GRAPH_LIMIT graph launches per"
echo "   second in the whole process (PARCAGPU_RATE_LIMIT, PARCAGPU_GRAPH_RATE_LIMIT; a second's burst on"
echo "   top), plus the few launches PC sampling samples, and collects GPU timing only for announced"
echo "   launches: a sample of the launches, at low cost."
echo "== matched ${matched:-0} of ${records:-0} kernel records to their launch; $(grep -m1 "  lost:" "$log" | sed 's/^ *//')"
echo "== GPU time by launch stack, as parcagpu-trace prints it (top 3):"
sed -n '/^GPU time by launch stack/,$p' "$log" | sed 's/^/   /'
echo "   flame graph: $OUT/gpu.svg   folded stacks: $OUT/gpu.folded"

verdict=OK reasons=()
[ "${announced:-0}" -gt 0 ] || { verdict=FAIL; reasons+=("nothing announced"); }
[ -n "$records" ] && [ "$records" -gt 0 ] && [ "$matched" = "$records" ] || { verdict=FAIL; reasons+=("kernels unmatched"); }
grep -q "  lost: nothing" "$log" || { verdict=FAIL; reasons+=("loss reported"); }
max=$(( threads * (secs + 1) * (EAGER_LIMIT + GRAPH_LIMIT) + 10 ))
[ "${announced:-0}" -le "$max" ] || { verdict=FAIL; reasons+=("announced more than the limits allow ($max)"); }
grep -qE "::launch_thread(\+0x[0-9a-f]+)? \(" "$log" || { verdict=FAIL; reasons+=("no launch stack names the app's code"); }
if [ "$verdict" = OK ]; then
  echo "verdict: OK: every kernel record matched its launch, the launch stacks name the app's code, and ${announced} of $launches launches were announced as the rate limits allow"
else
  echo "verdict: FAIL: ${reasons[*]} (consumer log: $log)"
  exit 1
fi
