#!/usr/bin/env bash
# Where the library's GPU memory in a PyTorch process comes from (issue 27 item 3): runs
# tools/bench/torch_memory_phases.py one variant at a time on one idle GPU and prints, per
# variant, the device's used MiB after each phase (context, cuBLAS, model built and captured,
# replays) and, under the library, its first PC sampling Enables and Disables among them
# (PARCAGPU_DEBUG).
#
# Usage: scripts/gpu-memory-phases-real.sh [VARIANT ...]
#   VARIANT: NAME:MODE[:ENV=VALUE,...] where MODE is alone (no library), agent (the library at
#   its defaults with agent-consumer attached) or nocons (the library, no consumer); the ENV
#   pairs go to the program (CUDA_MODULE_LOADING=EAGER, PARCAGPU_PC_SAMPLING=0, ...) and
#   PHASES_ARGS=... to the harness (e.g. PHASES_ARGS=--idle-after-context=5).
#   Default: alone:alone agent:agent
# Env: PARCAGPU_LIB, PARCAGPU_AGENT, PYTHON, OUT (/tmp/parcagpu-memory-phases)
. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
[ "${1:-}" = -h ] || [ "${1:-}" = --help ] && { usage; exit 0; }
OUT="${OUT:-/tmp/parcagpu-memory-phases}"
mkdir -p "$OUT"
LIB=$(readlink -f "$LIB") || die "no library $LIB"
[ $# -gt 0 ] || set -- alone:alone agent:agent

run_variant() {
  local name=$1 mode=$2 pairs=$3 apid="" args="" kv
  local -a envs=(env -u CUDA_INJECTION64_PATH)
  IFS=, read -ra kvs <<<"$pairs"
  for kv in "${kvs[@]}"; do
    case "$kv" in PHASES_ARGS=*) args=${kv#PHASES_ARGS=} ;; ?*) envs+=("$kv") ;; esac
  done
  [ "$mode" = alone ] || envs+=(CUDA_INJECTION64_PATH="$LIB" PARCAGPU_DEBUG=1)
  if [ "$mode" = agent ]; then
    "$AGENT" -l "$LIB" >"$OUT/$name.agent.json" 2>"$OUT/$name.agent.err" &
    apid=$!
    wait_attached 60 "$apid" "$OUT/$name.agent.err" || die "$name: consumer did not attach"
  fi
  # shellcheck disable=SC2086
  (cd "$ROOT/tools/bench" && "${envs[@]}" "$PYTHON" torch_memory_phases.py $args) \
    >"$OUT/$name.log" 2>&1
  [ -z "$apid" ] || { kill -INT "$apid"; wait "$apid"; }
  echo "== $name ($mode${pairs:+ $pairs})"
  # The phases with the library's first PC sampling lines among them, in the order written.
  awk '/^PHASE / { sub(/^PHASE /, "  "); print; next }
       /PC sampling (enabled|disabled)/ && n++ < 6 { print "    lib: " $0 }' "$OUT/$name.log"
}

for v in "$@"; do
  IFS=: read -r name mode pairs <<<"$v"
  run_variant "$name" "$mode" "${pairs:-}"
done
