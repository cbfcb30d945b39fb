#!/usr/bin/env bash
# CPU-only self-test of the GPU scripts' plumbing and judgement: runs
# scripts/graph-repro-real.sh and scripts/bench-gpu-overhead.sh with a fake parcagpu-trace and fake
# programs (no GPU, no eBPF, no nvcc), scenario by scenario, and checks their verdicts and exit
# codes. It proves the checks and the process handling, not the library: that needs the H100.
#
# Usage: tests/gpu/selftest.sh        (exit 0 if every scenario behaves)
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
T=$(mktemp -d /tmp/parcagpu-gpu-selftest.XXXXXX)
[ -n "${KEEP:-}" ] || trap 'rm -rf "$T"' EXIT
failures=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; failures=$((failures + 1)); }

# ---- fakes -------------------------------------------------------------------------------------
touch "$T/libparcagpu.so"

# The tables graph_repro prints (tests/gpu/graph_repro.cu), legacy and per-thread builds, are in
# tests/gpu/selftest-tables/.
TABLES="$ROOT/tests/gpu/selftest-tables"

# Fake programs: print their table; under PARCAGPU_DISABLE_CBIDS leave a mark for the consumer.
for which in legacy ptsz; do
  cat >"$T/prog-$which" <<EOF
#!/usr/bin/env bash
[ -n "\${PARCAGPU_DISABLE_CBIDS:-}" ] && touch "$T/refused"
[ -n "\${PARCAGPU_LIB:-}\${PARCAGPU_TRACE:-}" ] && { echo "script settings leaked into the program env" >&2; exit 2; }
[ "\${PARCAGPU_RATE_LIMIT:-}" = 100000000 ] || { echo "rate limit not raised" >&2; exit 2; }
[ -n "\${CUDA_INJECTION64_PATH:-}" ] || exit 0
echo "fake graph_repro ($which) under \$CUDA_INJECTION64_PATH" >&2
cat "$TABLES/$which.tsv"
EOF
  chmod +x "$T/prog-$which"
done

# JSON for a scenario: kernels_by_name from the tables, every kernel matched except overrides.
#   mkjson OUT "kernel=records:matched ..." key=value...   (top-level numbers; cbid map below)
mkjson() {
  local out="$1" overrides="$2"; shift 2
  awk -F'\t' -v ov="$overrides" -v kv="$*" '
    BEGIN { n = split(ov, O, " "); for (i = 1; i <= n; i++) { split(O[i], a, "="); OVR[a[1]] = a[2] }
            m = split(kv, K, " "); for (i = 1; i <= m; i++) { split(K[i], b, "="); TOP[b[1]] = b[2] } }
    /^#/ || $1 == "phase" || $3 == "-" { next }
    { if ($3 in OVR) { split(OVR[$3], rm, ":"); REC[$3] = rm[1]; MAT[$3] = rm[2] } else { REC[$3] = $4; MAT[$3] = $4 }
      ORDER[++nk] = $3 }
    END {
      printf "{"
      d = ""
      for (k in TOP) if (k !~ /^cb/) { printf "%s\"%s\": %s", d, k, TOP[k]; d = ", " }
      printf "%s\"correlations_by_cbid\": {", d; d2 = ""
      for (k in TOP) if (k ~ /^cb/) { printf "%s\"%s\": %s", d2, substr(k, 3), TOP[k]; d2 = ", " }
      printf "}, \"pids\": [100, 101], \"gpu_config\": {}, \"kernels_by_name\": {"
      for (i = 1; i <= nk; i++) printf "%s\"%s\": {\"records\": %d, \"matched\": %d}", (i > 1 ? ", " : ""), ORDER[i], REC[ORDER[i]], MAT[ORDER[i]]
      printf "}, \"matched_by_cbid\": {}}\n"
    }' "$TABLES/legacy.tsv" "$TABLES/ptsz.tsv" >"$out"
}

# Fake parcagpu-trace: announce attachment, wait for SIGTERM, print the scenario's JSON.
cat >"$T/parcagpu-trace" <<EOF
#!/usr/bin/env bash
lib=""
while [ \$# -gt 0 ]; do case "\$1" in -l) lib="\$2"; shift 2 ;; *) shift ;; esac; done
out() {
  if [ -f "$T/refused" ] && [ -f "$T/scenario-refused.json" ]; then cat "$T/scenario-refused.json"
  elif [ -f "$T/scenario.json" ]; then cat "$T/scenario.json"
  else echo '{"correlations": 1, "orphan_kernels": 0, "orphan_correlations_eager": 0, "orphan_correlations_graph": 0, "ringbuf_drops": 0, "read_errors": 0}'; fi
  exit 0
}
trap out TERM INT
sleep 0.3
echo "parcagpu-trace: attached 9 probes to \$lib" >&2
while :; do sleep 0.05; done
EOF
chmod +x "$T/parcagpu-trace"

export PARCAGPU_LIB="$T/libparcagpu.so" PARCAGPU_TRACE="$T/parcagpu-trace"
export GRAPH_REPRO_BIN="$T/prog-legacy" GRAPH_REPRO_PTSZ_BIN="$T/prog-ptsz" DRAIN_S=0

# Correlation counts of a full run: the cbid map only matters for -514/-515.
BASE="correlations=300 kernel_records=260 kernels_matched=240 ringbuf_drops=0 read_errors=0 errors=0 events=900 duration_s=3.1 cb-514=12 cb-515=4 cb311=22 cb211=60"

# repro SCENARIO_NAME EXPECTED_RC [grep-patterns that must appear...] -- [script args]
repro() {
  local name="$1" want="$2"; shift 2
  local pats=() args=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do pats+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  args=("$@")
  rm -f "$T/refused"
  # The scenarios exercise the known-failure plumbing with the list the script had before the
  # library handled capture and conditional graphs (its default is empty now).
  KNOWN_FAILURES="${KNOWN_FAILURES-capture conditional}" OUT="$T/out-$name" \
    "$ROOT/scripts/graph-repro-real.sh" "${args[@]}" >"$T/$name.txt" 2>&1
  local rc=$?
  if [ "$rc" != "$want" ]; then bad "repro $name: exit $rc, expected $want"; sed 's/^/     | /' "$T/$name.txt"; return; fi
  for p in "${pats[@]}"; do
    grep -Eq -- "$p" "$T/$name.txt" || { bad "repro $name: output lacks /$p/"; sed 's/^/     | /' "$T/$name.txt"; return; }
  done
  ok "repro $name (exit $rc)"
}

# 1. Today's library: captured launches announced (10 eager orphans = 6 + 4), conditional kernels
#    dropped and its launches orphaned (2), host-only graph launches orphaned (3).
mkjson "$T/scenario.json" "_Z18k_conditional_bodyPjPiy=0:0 _Z18k_conditional_condPjPiy=0:0" \
  "$BASE orphan_kernels=0 orphan_correlations_eager=10 orphan_correlations_graph=5"
repro today-strict 1 '^capture +capture .*KNOWN-FAIL +6 orphan eager' '^ptsz_capture .*KNOWN-FAIL +4 orphan eager' \
  '^hostonly .* FAIL +3 orphan graph' '^conditional .*KNOWN-FAIL +10 of 10 kernels unmatched \(0 records reached the consumer\); 2 orphan graph correlations$' \
  'verdict: RED: failing phases: hostonly;'
KNOWN_FAILURES="capture conditional hostonly" repro today-hostonly-known 0 '^hostonly .*KNOWN-FAIL' 'verdict: GREEN \(18 phases pass, 4 known failures\)'

# 2. Host-only graphs suppressed: only capture and conditional left.
mkjson "$T/scenario.json" "_Z18k_conditional_bodyPjPiy=0:0 _Z18k_conditional_condPjPiy=0:0" \
  "$BASE orphan_kernels=0 orphan_correlations_eager=10 orphan_correlations_graph=2"
repro hostonly-fixed 0 '^hostonly .* PASS' '^conditional .*KNOWN-FAIL .*2 orphan graph' 'verdict: GREEN'

# 3. Issue 5 done: nothing left; the known failures are reported as passing.
mkjson "$T/scenario.json" "" "$BASE orphan_kernels=0 orphan_correlations_eager=0 orphan_correlations_graph=0"
repro issue5-done 0 'known failures that pass now: capture conditional ptsz_capture' \
  '^capture .*PASS +known failure passes now' 'verdict: GREEN \(22 phases pass, 0 known failures\)'

# 4. Conditional kernels delivered with ID 0 (orphan kernels the consumer cannot match).
mkjson "$T/scenario.json" "_Z18k_conditional_bodyPjPiy=10:0 _Z18k_conditional_condPjPiy=10:0" \
  "$BASE orphan_kernels=20 orphan_correlations_eager=10 orphan_correlations_graph=2"
repro cond-orphan-kernels 0 '^conditional .*KNOWN-FAIL .*20 orphan kernels' '\[PASS\] orphan kernels: 20, all attributed'

# 5. An eager orphan nobody explains, a lost eager kernel, ring-buffer drops: red.
mkjson "$T/scenario.json" "_Z13k_cooperativePjPiy=7:7" \
  "$BASE orphan_kernels=0 orphan_correlations_eager=11 orphan_correlations_graph=0 ringbuf_drops=3"
repro unexplained 1 '^cooperative .* FAIL +1 of 8 kernels unmatched \(7 records' \
  '\[FAIL\] orphan eager correlations: 11, of which 1 no phase explains' '\[FAIL\] ring buffer drops: 3'

# 6. Driver graph cbids refused: no -514/-515, cuGraphLaunch kernels never delivered.
mkjson "$T/scenario-refused.json" "_Z17k_cu_graph_launchPjPiy=0:0 _Z22k_ptsz_cu_graph_launchPjPiy=0:0" \
  "correlations=280 ringbuf_drops=0 read_errors=0 cb311=22 cb211=60 orphan_kernels=0 orphan_correlations_eager=10 orphan_correlations_graph=0"
repro refused 1 '\[FAIL\] -514 \(cuGraphLaunch\) correlation events: 0, expected >= 4' \
  '\[FAIL\] -515 \(cuGraphLaunch_ptsz\) correlation events: 0, expected >= 4' '^cu_graph_launch .* FAIL' -- --refuse-driver-graph
repro expect-red 0 'expect-red: OK' -- --expect-red
# ... and --expect-red must complain when the refused run stays green (knob ignored).
cp "$T/scenario.json" "$T/scenario-refused.json.keep"
mkjson "$T/scenario.json" "" "$BASE orphan_kernels=0 orphan_correlations_eager=0 orphan_correlations_graph=0"
cp "$T/scenario.json" "$T/scenario-refused.json"
repro expect-red-but-green 1 'expect-red: NOT OK: stayed green' -- --expect-red

# 7. Plumbing: consumer never attaches -> exit 2; garbage JSON -> exit 2.
printf '#!/usr/bin/env bash\necho "no bpf here" >&2; exit 1\n' >"$T/trace-broken"; chmod +x "$T/trace-broken"
PARCAGPU_TRACE="$T/trace-broken" repro no-attach 2 'did not attach'
echo '{"correlations": 3, ' >"$T/scenario.json"
repro bad-json 2 'does not parse'

# ---- benchmark script ---------------------------------------------------------------------------
cat >"$T/bench-prog" <<'EOF'
#!/usr/bin/env bash
mode=eager; n=0
while [ $# -gt 0 ]; do case "$1" in --mode) mode="$2"; shift 2 ;; -n) n="$2"; shift 2 ;; *) shift ;; esac; done
base=4000; [ "$mode" = graph ] && base=4500
f=100
case "${CUPTI_FLOOR:-}" in
  resource) f=102 ;;
  launch) f=125 ;;
  *)
    if [ -n "${CUDA_INJECTION64_PATH:-}" ]; then
      f=103
      if [ -f "$SELFTEST_DIR/attached" ]; then f=$((f + 5)); fi
      if [ "${PARCAGPU_RATE_LIMIT:-}" = 100000000 ]; then f=$((f + 60)); fi
    fi ;;
esac
ns=$((base * f / 100 + RANDOM % 50))
echo "LAUNCH_OVERHEAD mode=$mode n=$n warmup=1000 kernels_per_launch=$([ "$mode" = graph ] && echo 4 || echo 1) total_ns=$((ns * n)) ns_per_launch=$ns.0"
EOF
chmod +x "$T/bench-prog"
cat >"$T/bench-trace" <<EOF
#!/usr/bin/env bash
trap 'rm -f "$T/attached"; echo "{\"correlations\": 100, \"orphan_kernels\": 0, \"orphan_correlations_eager\": 4, \"orphan_correlations_graph\": 0, \"ringbuf_drops\": 0, \"read_errors\": 0, \"kernels_matched\": 96, \"kernel_records\": 96, \"events\": 300}"; exit 0' TERM INT
touch "$T/attached"
echo "parcagpu-trace: attached 9 probes to lib" >&2
while :; do sleep 0.05; done
EOF
chmod +x "$T/bench-trace"
cat >"$T/bench-agent" <<EOF
#!/usr/bin/env bash
trap 'rm -f "$T/attached"; echo "{\"pids\": {\"42\": {\"correlations\": 90, \"kernel_records\": 80, \"matched\": 80, \"orphan_kernels\": 0, \"orphan_correlations_eager\": 0, \"orphan_correlations_graph\": 0, \"ringbuf_drops\": 0, \"read_failures\": 0, \"pc_samples\": {\"records\": 7}}}}"; exit 0' TERM INT
touch "$T/attached"
echo "agent-consumer: attached 7 probes to lib" >&2
while :; do sleep 0.05; done
EOF
chmod +x "$T/bench-agent"
touch "$T/fake-floor.so"
SELFTEST_DIR="$T" BENCH_BIN="$T/bench-prog" PARCAGPU_TRACE="$T/bench-trace" PARCAGPU_AGENT="$T/bench-agent" \
  FLOOR_LIB="$T/fake-floor.so" \
  ROUNDS=3 N=1000 DRAIN_S=0 OUT="$T/out-bench" "$ROOT/scripts/bench-gpu-overhead.sh" >"$T/bench.txt" 2>&1
rc=$?
if [ "$rc" = 0 ] && grep -Eq '^nocons +eager .* 1\.0[1-4][0-9] +1\.0[0-9]{2}\.\.1\.0[0-9]{2}$' "$T/bench.txt" \
   && grep -Eq '^floor-launch +graph .* 1\.2[3-6][0-9] ' "$T/bench.txt" \
   && grep -Eq '^floor-res +eager .* 1\.0[0-3][0-9] ' "$T/bench.txt" \
   && grep -Eq 'no consumer, eager .* <= 1\.05 +MET' "$T/bench.txt" \
   && grep -Eq 'attached, graph .* <= 1\.10 +MET' "$T/bench.txt" \
   && grep -Eq '^all +eager .* 1\.6[6-9][0-9] ' "$T/bench.txt" \
   && grep -Eq '^attached +graph +3 ' "$T/bench.txt" \
   && grep -Eq '^  agent +graph +3 +90 +80 +0 +0 +0 +0 +0$' "$T/bench.txt" \
   && grep -Eq 'agent probe set, PC on, eager .* <= 1\.30 ' "$T/bench.txt" \
   && [ "$(find "$T/out-bench" -name '*.json' | wc -l)" = 18 ]; then
  ok "bench (exit $rc)"
else
  bad "bench: exit $rc or unexpected output"; sed 's/^/     | /' "$T/bench.txt"
fi

echo
if [ "$failures" = 0 ]; then echo "selftest: all scenarios behave"; exit 0; fi
echo "selftest: $failures failing"
exit 1
