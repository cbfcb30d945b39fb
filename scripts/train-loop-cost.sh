#!/usr/bin/env bash
# Issue 41: the cost of the library on a PyTorch transformer-block training loop
# (tools/bench/torch_block.py), with the production agent's probe set (build/bin/agent-consumer
# attached), against no library and against another build of the library (--base-lib), in
# interleaved rounds (the order rotated each round). Each run: the program's own warm-up, then
# SECS seconds of steps; prints steps per run, and per variant and mode the median steps and the
# ratio of none's median to it (the time per step relative to no library).
#
# Usage: scripts/train-loop-cost.sh --base-lib PATH [--lib PATH] [--agent PATH] [--out DIR]
#   Env: ROUNDS (3), SECS (6), MODES ("eager graph").
# Exit: 0, 2 could not run.

. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
OUT="${OUT:-/tmp/parcagpu-train-cost}"
BASE_LIB="${BASE_LIB:-}"
parse_options "--lib=LIB --agent=AGENT --base-lib=BASE_LIB --out=OUT" "$@"
ROUNDS="${ROUNDS:-3}"
SECS="${SECS:-6}"
MODES="${MODES:-eager graph}"
mkdir -p "$OUT" || die "cannot create $OUT"
[ -f "$LIB" ] && [ -f "$BASE_LIB" ] || die "need --lib and --base-lib"
[ -x "$AGENT" ] || die "no agent-consumer at $AGENT"
LIB=$(readlink -f "$LIB"); BASE_LIB=$(readlink -f "$BASE_LIB")
VARIANTS=(none lib base)
: > "$OUT/runs.tsv"
for r in $(seq 1 "$ROUNDS"); do
  for i in 0 1 2; do
    v=${VARIANTS[$(( (i + r) % 3 ))]}
    for m in $MODES; do
      envs=(env -u PARCAGPU_LIB -u PARCAGPU_TRACE -u PARCAGPU_AGENT)
      apid=""
      if [ "$v" != none ]; then
        lib=$LIB; [ "$v" = base ] && lib=$BASE_LIB
        envs+=(CUDA_INJECTION64_PATH="$lib")
        "$AGENT" -l "$lib" > "$OUT/r$r-$v-$m.agent.json" 2> "$OUT/r$r-$v-$m.agent.err" &
        apid=$!
        wait_attached 60 "$apid" "$OUT/r$r-$v-$m.agent.err" || die "agent-consumer did not attach"
      fi
      steps=$("${envs[@]}" "$PYTHON" "$ROOT/tools/bench/torch_block.py" --mode "$m" --seconds "$SECS" \
              2> "$OUT/r$r-$v-$m.err" | sed -n 's/^TORCH_BLOCK .*"steps": \([0-9]*\).*/\1/p')
      [ -n "$apid" ] && { sleep 1; kill -INT "$apid"; wait "$apid" 2>/dev/null; }
      [ -n "$steps" ] || die "run r$r $v $m failed: $(tail -3 "$OUT/r$r-$v-$m.err")"
      printf '%s\t%s\t%s\t%s\n' "$r" "$v" "$m" "$steps" | tee -a "$OUT/runs.tsv"
    done
  done
done
for m in $MODES; do
  awk -F'\t' -v m="$m" -v secs="$SECS" '
    $3 == m { n[$2]++; s[$2, n[$2]] = $4 }
    function median(v,   k, i, j, t, a) { k = n[v]; for (i = 1; i <= k; i++) a[i] = s[v, i]
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
    END { base = median("none")
      for (v in n) printf "%-6s %-5s median %d steps in %s s  (%.1f ms/step)  x%.3f of none\n", m, v, median(v), secs, 1000 * secs / median(v), base / median(v) }' "$OUT/runs.tsv"
done
