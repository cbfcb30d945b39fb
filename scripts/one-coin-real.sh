#!/usr/bin/env bash
# Issue 41 on a real GPU: with one coin per launch (every launch tosses it while a consumer
# listens), is GPU time by kernel at the DEFAULT rate limits what torch.profiler says? For each
# program: alone under torch.profiler (Kineto, no library: the truth), then under the library at
# its defaults with parcagpu-trace --pc --json-lines attached (the production configuration: a PC
# consumer). Programs (PROGRAMS, default all three):
#   block-eager  tools/bench/torch_block.py --mode eager: a transformer-block training loop
#   block-graph  the same step captured once and replayed
#   mixed        tools/bench/torch_mixed.py: an eager training step and 4 replays of a captured
#                inference forward per iteration
# Verdicts (scripts/one_coin_verdict.py): per program, half the sum of absolute differences of
# per-kernel GPU-time shares within 3 points; for mixed, the graph side (kernels correlated to a
# graph launch: Kineto's correlation IDs, the library's launch cbid) within 3 points of Kineto's.
#
# Usage: scripts/one-coin-real.sh [--lib PATH] [--trace PATH] [--out DIR]
#   Env: SECONDS_RUN (40), PROFILE_SECONDS (5), PROGRAMS ("block-eager block-graph mixed"),
#   TAG (appended to the library run's file names, so that runs of several calls pool), SKIP_TRUTH
#   (1: keep an earlier PROGRAM.kineto.json).
# Exit: 0 every verdict held, 1 one failed, 2 could not run. Outputs under $OUT.

. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
OUT="${OUT:-/tmp/parcagpu-one-coin}"
: "${SECONDS_RUN:=40}" "${PROFILE_SECONDS:=5}" "${PROGRAMS:=block-eager block-graph mixed}"
start_real_run "--lib=LIB --trace=TRACE --out=OUT" "$@"
[ -x "$PYTHON" ] || die "no python at $PYTHON"

for p in $PROGRAMS; do
  torch_truth "$p"
  log "$p: under the library at the defaults, parcagpu-trace --pc attached, $SECONDS_RUN s"
  "$TRACE" -l "$LIB" --pc --json-lines > "$OUT/$p.lines${TAG:-}" 2> "$OUT/$p.trace.err" &
  tpid=$!
  wait_attached 60 "$tpid" "$OUT/$p.lines${TAG:-}" "$OUT/$p.trace.err" || die "parcagpu-trace did not attach"
  torch_traced "$p" "$tpid"
  grep -E "parcagpu\[[0-9]+\]: launches:" "$OUT/$p.program.err" | sed "s/^/  $p: /" >&2
done
"$PYTHON" "$ROOT/scripts/one_coin_verdict.py" "$OUT" $PROGRAMS
