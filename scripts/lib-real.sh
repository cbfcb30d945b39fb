# What every script run on a GPU machine starts with (scripts/*-real.sh, bench-gpu-overhead.sh):
# sourced first, as `. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"`. Sets strict mode, ROOT (the
# repository), the default programs (LIB, TRACE, AGENT, PYTHON: each from its environment variable
# PARCAGPU_LIB, PARCAGPU_TRACE, PARCAGPU_AGENT, PYTHON, else the build's), CUDA_ARCH (sm_90) and
# SELF (the script's name, for its messages), and defines:
#   log MSG...          MSG on stderr, after "SELF: "
#   die MSG...          log MSG, exit 2 (the scripts' "could not run")
#   usage               the script's header comment (its lines 2 up to the first empty line)
#   parse_options SPEC ARGS...
#                       the command line by a table: SPEC is "OPT=VAR ..." (OPT takes a value, put
#                       in VAR) or "OPT=VAR=VALUE" (a flag: VAR=VALUE); -h/--help prints usage and
#                       exits 0; anything else dies
#   need_lib_trace_root LIB made absolute, TRACE executable, running as root (eBPF); else die
#   start_real_run SPEC ARGS...
#                       a measurement's start: parse_options SPEC ARGS, create $OUT (its default
#                       set before), need_lib_trace_root
#   torch_program NAME  the arguments of a PyTorch program of tools/bench: block-eager,
#                       block-graph (torch_block.py), mixed (torch_mixed.py)
#   torch_truth NAME    that program alone under torch.profiler for PROFILE_SECONDS (no library:
#                       the truth), into $OUT/NAME.kineto.json; skipped with SKIP_TRUTH=1
#   torch_traced NAME TPID
#                       that program for SECONDS_RUN under the library (PARCAGPU_DEBUG=1) into
#                       $OUT/NAME.program(.err), then the consumer TPID stopped (SIGINT); dies if
#                       the program failed
#   wait_attached SECONDS PID FILE...
#                       until a FILE says "attached N probes" (parcagpu-trace and agent-consumer's
#                       ready line): 0; 1 if PID exits first or SECONDS pass
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LIB="${PARCAGPU_LIB:-$ROOT/build/lib/libparcagpu.so}"
TRACE="${PARCAGPU_TRACE:-$ROOT/build/bin/parcagpu-trace}"
AGENT="${PARCAGPU_AGENT:-$ROOT/build/bin/agent-consumer}"
PYTHON="${PYTHON:-/opt/torch/.venv/bin/python}"
CUDA_ARCH="${CUDA_ARCH:-sm_90}"
SELF=$(basename "$0" .sh)

log() { echo "$SELF: $*" >&2; }
die() { log "$*"; exit 2; }
usage() { sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0"; }

parse_options() {
  local spec=" ${1//[[:space:]]/ } " opt
  shift
  while [ $# -gt 0 ]; do
    case "$1" in -h|--help) usage; exit 0 ;; esac
    [[ "$spec" == *" $1="* ]] || die "unknown argument: $1 (see --help)"
    opt=${spec#*" $1="}
    opt=${opt%% *}
    if [[ "$opt" == *=* ]]; then
      printf -v "${opt%%=*}" '%s' "${opt#*=}"
      shift
    else
      [ $# -ge 2 ] || die "$1 needs a value"
      printf -v "$opt" '%s' "$2"
      shift 2
    fi
  done
}

need_lib_trace_root() {
  LIB=$(readlink -f "$LIB") || die "no library $LIB"
  [ -x "$TRACE" ] || die "no parcagpu-trace at $TRACE"
  [ "$(id -u)" -eq 0 ] || die "run as root (eBPF)"
}

start_real_run() {
  parse_options "$@"
  mkdir -p "$OUT" || die "cannot create $OUT"
  need_lib_trace_root
}

torch_program() {
  case "$1" in
    block-eager) echo "$ROOT/tools/bench/torch_block.py --mode eager" ;;
    block-graph) echo "$ROOT/tools/bench/torch_block.py --mode graph" ;;
    mixed) echo "$ROOT/tools/bench/torch_mixed.py" ;;
    *) die "unknown program: $1" ;;
  esac
}

torch_truth() {
  [ "${SKIP_TRUTH:-0}" = 1 ] && return 0
  local cmd
  read -r -a cmd <<<"$(torch_program "$1")"
  log "$1: alone under torch.profiler, $PROFILE_SECONDS s"
  env -u PARCAGPU_LIB -u PARCAGPU_TRACE -u PARCAGPU_AGENT "$PYTHON" "${cmd[@]}" \
    --seconds "$PROFILE_SECONDS" --profile "$OUT/$1.kineto.json" > "$OUT/$1.kineto.out" 2>&1 ||
    die "$1 under torch.profiler failed: $(tail -3 "$OUT/$1.kineto.out")"
}

torch_traced() {
  local cmd rc
  read -r -a cmd <<<"$(torch_program "$1")"
  env -u PARCAGPU_LIB -u PARCAGPU_TRACE -u PARCAGPU_AGENT CUDA_INJECTION64_PATH="$LIB" \
    PARCAGPU_DEBUG=1 "$PYTHON" "${cmd[@]}" --seconds "$SECONDS_RUN" > "$OUT/$1.program" \
    2> "$OUT/$1.program.err"
  rc=$?
  sleep 2
  kill -INT "$2" 2>/dev/null
  wait "$2" 2>/dev/null
  [ $rc -eq 0 ] || die "$1 under the library failed: $(tail -3 "$OUT/$1.program.err")"
}

wait_attached() {
  local seconds=$1 pid=$2
  shift 2
  for _ in $(seq 1 $((seconds * 10))); do
    grep -Eq 'attached [0-9]+ probes' "$@" 2>/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
