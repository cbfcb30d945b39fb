#!/usr/bin/env bash
# Issue 27 on a real GPU: is the whole program told true where eager and graph launches mix?
# Every run at the DEFAULT rate limits with the production configuration: build/bin/agent-consumer
# (the agent's probe set, pc_sample_batch included) attached, and parcagpu-trace --pc --json
# beside it for GPU time by kernel.
#
#  a) tests/gpu/mixed_gpu_time.cu: per step two eager kernels (cudaLaunchKernel, cuLaunchKernel)
#     and one graph of three other kernels (cudaGraphLaunch, cuGraphLaunch, cuGraphLaunch_ptsz in
#     turn), equal GPU time on each side. Once with every launch announced (limits raised, PC
#     sampling off: the truth), once at the defaults. Verdict: each side's share of GPU time
#     within 5 points of the truth's (~50%), every cbid's announced fraction within 0.67-1.5x
#     of the overall fraction (from the agent's counts).
#  b) tools/bench/torch_mixed.py (an eager training step and 4 replays of a captured decode forward
#     per iteration): alone under torch.profiler (no library: the truth), then under the library
#     at the defaults. Verdict: half the sum of absolute differences of per-kernel GPU-time
#     shares within 10 points.
# Both: impossible kernel records and losses as each consumer counts them.
#
# Usage: scripts/mixed-real.sh [--lib PATH] [--trace PATH] [--agent PATH] [--out DIR]
#   Env: SECONDS_A (15), SECONDS_B (15), PROFILE_SECONDS (3), PARTS (ab: which parts run; the
#   verdict needs both), NVCC, CUDA_ARCH (sm_90).
# Exit: 0 every verdict held, 1 one failed, 2 could not run. Outputs under $OUT.

. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
OUT="${OUT:-/tmp/parcagpu-mixed}"
: "${SECONDS_A:=15}" "${SECONDS_B:=15}" "${PROFILE_SECONDS:=3}"
start_real_run "--lib=LIB --trace=TRACE --agent=AGENT --out=OUT" "$@"
[ -x "$AGENT" ] || die "no agent-consumer at $AGENT"
[ -x "$PYTHON" ] || die "no python at $PYTHON"

# The programs run without the scripts' own PARCAGPU_* variables (the library warns of unknown
# ones through its error probe).
CLEAN=(-u PARCAGPU_LIB -u PARCAGPU_TRACE -u PARCAGPU_AGENT)
PIDS=()
start_consumers() {  # $1: run name
  "$AGENT" -l "$LIB" > "$OUT/$1.agent.json" 2> "$OUT/$1.agent.err" &
  PIDS=($!)
  "$TRACE" -l "$LIB" --pc --json -n 1000 > "$OUT/$1.trace.json" 2> "$OUT/$1.trace.err" &
  PIDS+=($!)
  wait_attached 60 "${PIDS[0]}" "$OUT/$1.agent.json" "$OUT/$1.agent.err" || { log "agent did not attach"; return 1; }
  wait_attached 60 "${PIDS[1]}" "$OUT/$1.trace.json" "$OUT/$1.trace.err" || { log "trace did not attach"; return 1; }
}
stop_consumers() {
  sleep 2
  kill -INT "${PIDS[@]}" 2>/dev/null
  wait "${PIDS[@]}" 2>/dev/null
  PIDS=()
}

NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
BIN="$OUT/mixed_gpu_time"
"$NVCC" -O2 -std=c++17 -arch="$CUDA_ARCH" -o "$BIN" "$ROOT/tests/gpu/mixed_gpu_time.cu" -lcuda \
  > "$OUT/build.log" 2>&1 || die "nvcc failed: $(tail -3 "$OUT/build.log")"

run_a() {  # $1: all | default
  local -a env=(CUDA_INJECTION64_PATH="$LIB")
  [ "$1" = all ] && env+=(PARCAGPU_PC_SAMPLING=0 PARCAGPU_RATE_LIMIT=100000000
                          PARCAGPU_GRAPH_RATE_LIMIT=100000000)
  start_consumers "a-$1" || return 1
  env "${CLEAN[@]}" "${env[@]}" "$BIN" "$SECONDS_A" > "$OUT/a-$1.program" 2> "$OUT/a-$1.program.err"
  local rc=$?
  stop_consumers
  [ $rc -eq 0 ] || { log "mixed_gpu_time failed: $(tail -3 "$OUT/a-$1.program.err")"; return 1; }
}
PARTS="${PARTS:-ab}"
if [[ "$PARTS" == *a* ]]; then
  log "a) eager kernels and a graph of others, ${SECONDS_A} s: every launch announced"
  run_a all || die "run a/all failed"
  log "a) the same at the default rates"
  run_a default || die "run a/default failed"
fi
[[ "$PARTS" == *b* ]] || exit 0

log "b) PyTorch eager steps and graph replays: alone under torch.profiler, ${PROFILE_SECONDS} s"
env "${CLEAN[@]}" "$PYTHON" "$ROOT/tools/bench/torch_mixed.py" --seconds "$PROFILE_SECONDS" --profile "$OUT/b-kineto.json" \
  > "$OUT/b-kineto.program" 2> "$OUT/b-kineto.program.err" || die "torch.profiler run failed: $(tail -3 "$OUT/b-kineto.program.err")"
log "b) the same under the library at the default rates, ${SECONDS_B} s"
start_consumers b-default || die "consumers did not start"
env "${CLEAN[@]}" CUDA_INJECTION64_PATH="$LIB" "$PYTHON" "$ROOT/tools/bench/torch_mixed.py" --seconds "$SECONDS_B" \
  > "$OUT/b-default.program" 2> "$OUT/b-default.program.err"
rc=$?
stop_consumers
[ $rc -eq 0 ] || die "torch run failed: $(tail -3 "$OUT/b-default.program.err")"

"$PYTHON" "$ROOT/scripts/mixed_verdict.py" "$OUT" | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
