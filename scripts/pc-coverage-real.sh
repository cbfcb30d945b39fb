#!/usr/bin/env bash
# Issue 43 item 1 on a real GPU: at the default settings, within SECONDS_RUN (60) s, does every
# kernel with at least 2% of the GPU time have PC samples? For each program: alone under
# torch.profiler (Kineto, no library: which kernels are hot), then under the library at its
# defaults with parcagpu-trace --pc attached (the consumer at the agent's defaults), its JSON
# written at exit. Programs (PROGRAMS, default all three):
#   block-eager  tools/bench/torch_block.py --mode eager: a transformer-block training loop
#   block-graph  the same step captured once and replayed
#   mixed        tools/bench/torch_mixed.py: an eager training step and 4 replays of a captured
#                inference forward per iteration
# Prints per program (scripts/pc_coverage_verdict.py): the kernels with >= 2% of the GPU time by
# torch.profiler, how many have PC samples, and each missing one with the reason parcagpu-trace
# gives (kernels_not_sampled: not_in_episodes, not_in_cubins, ...); and the library's PC totals
# (episodes, windows, enabled ms: the cost, at most 2% of the wall time in episodes).
#
# Usage: scripts/pc-coverage-real.sh [--lib PATH] [--trace PATH] [--out DIR]
#   Env: SECONDS_RUN (60), PROFILE_SECONDS (5), PROGRAMS ("block-eager block-graph mixed"),
#   SKIP_TRUTH (1: keep an earlier PROGRAM.kineto.json).
# Exit: 0 every hot kernel of every program sampled, 1 one was not, 2 could not run.

. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
OUT="${OUT:-/tmp/parcagpu-pc-coverage}"
SECONDS_RUN="${SECONDS_RUN:-60}"
PROFILE_SECONDS="${PROFILE_SECONDS:-5}"
PROGRAMS="${PROGRAMS:-block-eager block-graph mixed}"
start_real_run "--lib=LIB --trace=TRACE --out=OUT" "$@"
[ -x "$PYTHON" ] || die "no python at $PYTHON"

for p in $PROGRAMS; do
  torch_truth "$p"
  log "$p: under the library at the defaults, parcagpu-trace --pc attached, $SECONDS_RUN s"
  rm -f "$OUT/$p.json"
  "$TRACE" -l "$LIB" --pc -n 1000 --json="$OUT/$p.json" > "$OUT/$p.report" 2> "$OUT/$p.trace.err" &
  tpid=$!
  wait_attached 60 "$tpid" "$OUT/$p.report" "$OUT/$p.trace.err" || die "parcagpu-trace did not attach"
  torch_traced "$p" "$tpid"
  [ -s "$OUT/$p.json" ] || die "parcagpu-trace wrote no $OUT/$p.json: $(tail -3 "$OUT/$p.trace.err")"
  grep -E "parcagpu\[[0-9]+\]: pc sampling: episodes=" "$OUT/$p.program.err" | tail -1 |
    sed -E "s/^.*(episodes=[0-9]+).*(enables=.*)$/  $p: \1 \2/" >&2
done
"$PYTHON" "$ROOT/scripts/pc_coverage_verdict.py" "$OUT" $PROGRAMS
