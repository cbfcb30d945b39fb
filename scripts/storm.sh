#!/usr/bin/env bash
# Attach/detach storm: one mock app runs under the library while parcagpu-trace attaches to it and
# goes away CYCLES times, in turn stopped by SIGINT, killed with SIGKILL (no clean detach: the
# kernel drops its uprobes), and ending by itself (-d). After each detach it prints what that
# consumer saw (duplicate correlations, orphan kernels and correlations, ring buffer drops; none
# for SIGKILL, which prints nothing) and the value of every probe semaphore, read from
# /proc/PID/mem at the addresses of the library's SDT notes: all must be back to 0. Not a test:
# the figures are for reading; the exit status is 1 if a semaphore stayed up or the app failed.
#
#   sudo scripts/storm.sh [CYCLES=100]
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES=${1:-100}
BUILD=${BUILD:-build}
LIB=$PWD/$BUILD/lib/libparcagpu.so
APP=$PWD/$BUILD/bin/parcagpu-mockapp
TRACE=$PWD/$BUILD/bin/parcagpu-trace

work=$(mktemp -d /tmp/parcagpu-storm.XXXXXX)
app_pid= trace_pid=
cleanup() {
  [ -n "$trace_pid" ] && kill -KILL "$trace_pid" 2>/dev/null || true
  [ -n "$app_pid" ] && kill "$app_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The semaphores of the library mapped in PID: "name=value ..." (SDT notes: link-time addresses;
# the library's base is the start of its mapping at file offset 0, its first PT_LOAD at 0).
semaphores() {
  python3 - "$1" "$LIB" <<'EOF'
import os, re, subprocess, sys
pid, lib = sys.argv[1], os.path.realpath(sys.argv[2])
notes = subprocess.run(["readelf", "-n", lib], capture_output=True, text=True).stdout
sems, provider, name = {}, None, None
for line in notes.splitlines():
    m = re.search(r"Provider: (\w+)", line)
    if m:
        provider = m.group(1)
    m = re.search(r"Name: (\w+)", line)
    if m:
        name = m.group(1)
    m = re.search(r"Semaphore: (0x[0-9a-f]+)", line)
    # The library's own probes (our static libstdc++ brings libstdcxx ones, without semaphores).
    if m and provider == "parcagpu" and int(m.group(1), 16) != 0:
        sems[name] = int(m.group(1), 16)
base = None
for line in open("/proc/%s/maps" % pid):
    f = line.split()
    if len(f) >= 6 and os.path.realpath(f[5]) == lib and int(f[2], 16) == 0:
        base = int(f[0].split("-")[0], 16)
        break
if base is None:
    print("library-not-mapped")
    sys.exit(0)
with open("/proc/%s/mem" % pid, "rb") as mem:
    out = []
    for n, a in sorted(sems.items()):
        mem.seek(base + a)
        out.append("%s=%d" % (n, int.from_bytes(mem.read(2), "little")))
print(" ".join(out))
EOF
}

# The app runs until the storm is over; its own summary comes at the end.
PARCAGPU_RATE_LIMIT=5000 PARCAGPU_GRAPH_RATE_LIMIT=1000 \
  "$APP" "$LIB" --threads=4 --launch-rate=4000 --graph-rate=400 --duration=3600s \
  >"$work/app.out" 2>"$work/app.err" &
app_pid=$!
for _ in $(seq 100); do
  grep -q "parcagpu" "/proc/$app_pid/maps" 2>/dev/null && break
  sleep 0.1
done
echo "storm: app pid $app_pid, $CYCLES cycles; before: $(semaphores "$app_pid")"
printf "%5s %-7s %6s %5s %6s %6s %6s  %s\n" cycle mode events dups orphK orphC drops semaphores
modes=(sigint sigkill duration)
bad=0 totals_dup=0 totals_orph=0 totals_drop=0
declare -A count
for cycle in $(seq 1 "$CYCLES"); do
  mode=${modes[$(( (cycle - 1) % 3 ))]}
  count[$mode]=$(( ${count[$mode]:-0} + 1 ))
  extra=()
  [ "$mode" = duration ] && extra=(-d 1)
  "$TRACE" -l "$LIB" -p "$app_pid" --json "${extra[@]}" \
    >"$work/t.json" 2>"$work/t.err" &
  trace_pid=$!
  for _ in $(seq 300); do
    grep -q "attached" "$work/t.err" 2>/dev/null && break
    kill -0 "$trace_pid" 2>/dev/null || break
    sleep 0.02
  done
  case $mode in
    sigint) sleep 0.$(( RANDOM % 8 + 2 )); kill -INT "$trace_pid" ;;
    sigkill) sleep 0.$(( RANDOM % 8 + 2 )); kill -KILL "$trace_pid" ;;
    duration) ;;
  esac
  wait "$trace_pid" 2>/dev/null || true
  trace_pid=
  sems=$(semaphores "$app_pid")
  if echo "$sems" | grep -qE "=[1-9]"; then
    sleep 0.2  # uprobe teardown of a killed process may lag: look once more
    sems="$(semaphores "$app_pid") (after 0.2 s)"
    echo "$sems" | grep -qE "=[1-9]" && bad=1
  fi
  if [ "$mode" = sigkill ]; then
    printf "%5d %-7s %6s %5s %6s %6s %6s  %s\n" "$cycle" "$mode" - - - - - "$sems"
  else
    read -r events dups ok oc drops < <(tail -n 1 "$work/t.json" | python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
print(j["events"], j["duplicate_correlations"], j["orphan_kernels"],
      j["orphan_correlations_eager"] + j["orphan_correlations_graph"], j["ringbuf_drops"])' \
      2>/dev/null || echo "? ? ? ? ?")
    printf "%5d %-7s %6s %5s %6s %6s %6s  %s\n" "$cycle" "$mode" "$events" "$dups" "$ok" "$oc" \
      "$drops" "$sems"
    [[ $dups =~ ^[0-9]+$ ]] && totals_dup=$(( totals_dup + dups ))
    [[ $ok =~ ^[0-9]+$ ]] && totals_orph=$(( totals_orph + ok + oc ))
    [[ $drops =~ ^[0-9]+$ ]] && totals_drop=$(( totals_drop + drops ))
  fi
done
kill -TERM "$app_pid"
wait "$app_pid" 2>/dev/null && app_rc=0 || app_rc=$?
app_pid=
echo "storm: ${count[sigint]:-0} SIGINT, ${count[sigkill]:-0} SIGKILL, ${count[duration]:-0} -d;" \
     "duplicates $totals_dup, orphans $totals_orph, drops $totals_drop (clean detaches);" \
     "semaphores $([ $bad -eq 0 ] && echo 'back to 0 after every detach' || echo 'LEFT RAISED')"
echo "app: exit status $app_rc (SIGTERM: 143), library lines:"
grep "parcagpu\[" "$work/app.err" | head -n 10 || echo "  none"
[ $bad -eq 0 ] && [ "$app_rc" -eq 143 ]
