#!/usr/bin/env bash
# Launch-overhead benchmark on the GPU (issue 11): ns per launch of an empty kernel, eager and for
# a captured 4-kernel graph, for these variants run interleaved in one run:
#   none          no injection
#   floor-res     empty-callback floor: an injection library that enables only the cbids parcagpu
#                 keeps on from the start (graph resources) and does nothing in its callback
#   floor-launch  empty-callback floor: the same library with every launch cbid of the table on
#                 (what any library called on every launch costs at least)
#   nocons        CUDA_INJECTION64_PATH=libparcagpu.so, no consumer attached
#   attached      the library, parcagpu-trace attached, default rate limits
#   all           the library, parcagpu-trace attached, rate limits raised (every launch announced)
#   (those library variants run with PARCAGPU_PC_SAMPLING=0: a consumer of launches and kernels)
#   agent         production: the library at its defaults (PC sampling on) with tools/agent's
#                 consumer attached, the production agent's exact probe set (pc_sample_batch
#                 included); needs --agent (default build/bin/agent-consumer)
#   agent-nopc    the same consumer with PARCAGPU_PC_SAMPLING=0: what PC sampling adds to the agent
# and, when asked for with --variants (for the cost breakdown):
#   fake          the library with its semaphores raised by the benchmark itself (the library's
#                 attached cost without the uprobe traps of a real consumer)
#   fake-corr     the same, cuda_correlation only (launches announced, no kernel timing)
#   base-nocons / base-attached / base-agent   another build (--base-lib), e.g. the previous
#                 release (base-agent: with tools/agent's consumer, as agent)
# Round i runs every variant once (order rotated by i; eager/graph order alternates), each
# (variant, mode) in its own process; the attached variants start one parcagpu-trace per run,
# system-wide, wait for its "attached N probes" line, and keep its JSON.
# Prints per variant and mode: median, min, max ns/launch, the ratio of the median to none's and
# the spread of the ratio (min/none-median .. max/none-median), then the targets (no consumer
# <= 1.05 eager and graph; attached at default rates <= 1.25 eager, <= 1.10 graph: MET / NOT
# MET), then what the consumer saw per variant.
#
# Usage: scripts/bench-gpu-overhead.sh [options]
#   --lib PATH        libparcagpu.so   (env PARCAGPU_LIB, default build/lib/libparcagpu.so)
#   --trace PATH      parcagpu-trace   (env PARCAGPU_TRACE, default build/bin/parcagpu-trace)
#   --agent PATH      agent-consumer   (env PARCAGPU_AGENT, default build/bin/agent-consumer)
#   --base-lib PATH   a second libparcagpu.so for the base-* variants (env BASE_LIB)
#   --out DIR         outputs go to DIR/bench (env OUT, default /tmp/parcagpu-gpu)
#   --rounds R        rounds (env ROUNDS, default 9)
#   -n N              launches per run (env N, default 300000); warm-up N/10 (env WARMUP)
#   --variants "..."  default "none floor-res floor-launch nocons attached all agent" (env VARIANTS)
#   --strict          exit 1 if a target is NOT MET
#   -h, --help
# Quick run: ROUNDS=3 N=50000 scripts/bench-gpu-overhead.sh
# Self-contained: builds tools/bench/launch_overhead.cu with nvcc and the floor library
# (tools/bench/cupti_floor.cc) with the host C++ compiler, unless given prebuilt.
# Env: NVCC, CUDA_ARCH (sm_90), BENCH_BIN (prebuilt launch_overhead: skip nvcc), FLOOR_LIB
#      (prebuilt libcupti-floor.so), CXX (c++), CUDA_HOME (/usr/local/cuda), DRAIN_S (1),
#      ATTACH_TIMEOUT_S (60), BENCH_PREFIX (command put before the program, e.g. "taskset -c 2"),
#      KEEP_GOING (1: go on after runs failed in round 1; default: stop after round 1),
#      BENCH_DEBUG (1: PARCAGPU_DEBUG=1 for the library's variants, its totals in programs.log).
# Exit: 0 every run measured (targets reported), 1 --strict and a target not met, 2 runs failed or
#       the benchmark could not start.
# Outputs in $OUT/bench: summary.txt (the printed report), runs.tsv (one line per run, with the
#   consumer's counters), json/rNN-VARIANT-MODE.json and .err (the consumer's JSON and stderr),
#   programs.log, build.log, launch_overhead, libcupti-floor.so.

. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
OUT="${OUT:-/tmp/parcagpu-gpu}"
ROUNDS="${ROUNDS:-9}"
N="${N:-300000}"
WARMUP="${WARMUP:-}"
VARIANTS="${VARIANTS:-none floor-res floor-launch nocons attached all agent}"
BASE_LIB="${BASE_LIB:-}"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
DRAIN_S="${DRAIN_S:-1}"
ATTACH_TIMEOUT_S="${ATTACH_TIMEOUT_S:-60}"
BENCH_PREFIX="${BENCH_PREFIX:-}"
STRICT=0

parse_options "--lib=LIB --trace=TRACE --agent=AGENT --base-lib=BASE_LIB --out=OUT --rounds=ROUNDS
  -n=N --variants=VARIANTS --strict=STRICT=1" "$@"

case "$ROUNDS" in ''|*[!0-9]*) die "--rounds must be a number" ;; esac
case "$N" in ''|*[!0-9]*) die "-n must be a number" ;; esac
read -r -a VLIST <<<"$VARIANTS"
needs_lib=0; needs_trace=0; needs_floor=0; needs_base=0; needs_agent=0
for v in "${VLIST[@]}"; do
  case "$v" in
    none) ;;
    floor-res|floor-launch) needs_floor=1 ;;
    nocons|fake|fake-corr) needs_lib=1 ;;
    attached|all) needs_lib=1; needs_trace=1 ;;
    agent|agent-nopc) needs_lib=1; needs_agent=1 ;;
    base-nocons) needs_base=1 ;;
    base-attached) needs_base=1; needs_trace=1 ;;
    base-agent) needs_base=1; needs_agent=1 ;;
    *) die "unknown variant: $v (none floor-res floor-launch nocons attached all agent agent-nopc fake fake-corr base-nocons base-attached base-agent)" ;;
  esac
done
[ "${#VLIST[@]}" -gt 0 ] || die "no variants"

B="$OUT/bench"
mkdir -p "$B/json" || die "cannot create $B"
rm -f "$B"/json/*.json "$B"/json/*.err "$B/runs.tsv" "$B/summary.txt" "$B/programs.log"
if [ "$needs_lib" = 1 ]; then
  [ -f "$LIB" ] || die "library not found: $LIB (--lib or PARCAGPU_LIB)"
  LIB=$(cd "$(dirname "$LIB")" && pwd)/$(basename "$LIB")
fi
if [ "$needs_base" = 1 ]; then
  [ -f "$BASE_LIB" ] || die "base library not found: ${BASE_LIB:-(none)} (--base-lib or BASE_LIB)"
  BASE_LIB=$(cd "$(dirname "$BASE_LIB")" && pwd)/$(basename "$BASE_LIB")
fi
if [ "$needs_trace" = 1 ]; then
  [ -x "$TRACE" ] || die "parcagpu-trace not found or not executable: $TRACE (--trace or PARCAGPU_TRACE)"
  [ "$(id -u)" = 0 ] || log "warning: not root; parcagpu-trace needs root for eBPF"
fi

if [ "$needs_agent" = 1 ]; then
  [ -x "$AGENT" ] || die "agent-consumer not found or not executable: $AGENT (--agent or PARCAGPU_AGENT)"
fi

# ---- build -------------------------------------------------------------------------------------
BIN="${BENCH_BIN:-}"
if [ -z "$BIN" ]; then
  NVCC="${NVCC:-}"
  if [ -z "$NVCC" ]; then
    if command -v nvcc >/dev/null 2>&1; then NVCC=nvcc
    elif [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then NVCC="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
    else die "nvcc not found (set NVCC or CUDA_HOME)"; fi
  fi
  log "building tools/bench/launch_overhead.cu with $NVCC -arch=$CUDA_ARCH"
  "$NVCC" -O2 -std=c++17 -arch="$CUDA_ARCH" -o "$B/launch_overhead" "$ROOT/tools/bench/launch_overhead.cu" \
      >"$B/build.log" 2>&1 || { cat "$B/build.log" >&2; die "build failed"; }
  BIN="$B/launch_overhead"
fi

FLOOR="${FLOOR_LIB:-}"
if [ "$needs_floor" = 1 ] && [ -z "$FLOOR" ]; then
  CXX="${CXX:-c++}"
  log "building tools/bench/cupti_floor.cc with $CXX"
  "$CXX" -std=c++17 -O2 -shared -fPIC -I"$ROOT/include" -I"$CUDA_HOME/include" \
      -I"$CUDA_HOME/extras/CUPTI/include" -o "$B/libcupti-floor.so" "$ROOT/tools/bench/cupti_floor.cc" \
      -ldl -lpthread >>"$B/build.log" 2>&1 || { cat "$B/build.log" >&2; die "floor build failed"; }
  FLOOR="$B/libcupti-floor.so"
fi
if [ "$needs_floor" = 1 ]; then
  [ -f "$FLOOR" ] || die "floor library not found: $FLOOR"
  FLOOR=$(cd "$(dirname "$FLOOR")" && pwd)/$(basename "$FLOOR")
fi

# ---- one run -----------------------------------------------------------------------------------
TPID=""
stop_consumer() {  # SIGTERM (SIGINT is ignored by background jobs of a non-interactive shell)
  [ -n "$TPID" ] || return 0
  if kill -0 "$TPID" 2>/dev/null; then
    kill -TERM "$TPID" 2>/dev/null
    for _ in $(seq 1 150); do kill -0 "$TPID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$TPID" 2>/dev/null && { log "parcagpu-trace ignored SIGTERM for 15 s; killing it"; kill -KILL "$TPID" 2>/dev/null; }
  fi
  wait "$TPID" 2>/dev/null
  TPID=""
}
trap 'stop_consumer' EXIT
trap 'stop_consumer; exit 2' INT TERM

start_consumer() {  # start_consumer JSON ERR LIB [agent]
  if [ "${4:-}" = agent ]; then "$AGENT" -l "$3" >"$1" 2>"$2" &
  else "$TRACE" -l "$3" --json >"$1" 2>"$2" &
  fi
  TPID=$!
  wait_attached "$ATTACH_TIMEOUT_S" "$TPID" "$2" && return 0
  tail -n 20 "$2" >&2
  die "the consumer did not attach (see $2)"
}

# Consumer counters of one JSON, tab-separated (NA when there is none).
CFIELDS="correlations kernel_records kernels_matched orphan_kernels orphan_correlations_eager orphan_correlations_graph ringbuf_drops read_errors events"
consumer_fields() {
  if [ -s "$1" ] && awk -f "$ROOT/tests/gpu/json_flatten.awk" "$1" >"$1.flat" 2>/dev/null; then
    awk -F'\t' -v fields="$CFIELDS" '
      { J[$1] = $2 }
      END { n = split(fields, F, " "); s = ""
            for (i = 1; i <= n; i++) s = s (i > 1 ? "\t" : "") ((F[i] in J) ? J[F[i]] : "NA")
            print s }' "$1.flat"
    rm -f "$1.flat"
  else
    echo "NA	NA	NA	NA	NA	NA	NA	NA	NA"
  fi
}

# The same counters from agent-consumer's JSON (totals over its processes: correlations,
# kernel_records, matched, orphan_kernels, orphan_correlations_eager/_graph, ringbuf_drops,
# read failures; events: PC records).
agent_fields() {
  if [ -s "$1" ] && command -v python3 >/dev/null 2>&1; then
    python3 - "$1" <<'PY' 2>/dev/null || echo "NA	NA	NA	NA	NA	NA	NA	NA	NA"
import json, sys
j = json.load(open(sys.argv[1]))
procs = list(j.get("pids", {}).values())
def tot(k): return sum(p.get(k, 0) for p in procs)
pc = sum(p.get("pc_samples", {}).get("records", 0) for p in procs)
print("\t".join(str(v) for v in (tot("correlations"), tot("kernel_records"), tot("matched"),
      tot("orphan_kernels"), tot("orphan_correlations_eager"), tot("orphan_correlations_graph"),
      tot("ringbuf_drops"), tot("read_failures"), pc)))
PY
  else
    echo "NA	NA	NA	NA	NA	NA	NA	NA	NA"
  fi
}

base_env=(env -u CUDA_INJECTION64_PATH -u PARCAGPU_LIB -u PARCAGPU_TRACE -u PARCAGPU_RATE_LIMIT
          -u PARCAGPU_GRAPH_RATE_LIMIT -u PARCAGPU_DISABLE_CBIDS -u PARCAGPU_DEBUG -u CUPTI_FLOOR
          -u PARCAGPU_PC_SAMPLING)
prog_args=(-n "$N")
[ -n "$WARMUP" ] && prog_args+=(--warmup "$WARMUP")
FAILED_RUNS=0

run_one() {  # run_one ROUND VARIANT MODE
  local r="$1" v="$2" m="$3" tag json err line ns rc envs extra=()
  tag=$(printf 'r%02d-%s-%s' "$r" "$v" "$m")
  json="$B/json/$tag.json"; err="$B/json/$tag.err"
  envs=("${base_env[@]}")
  case "$v" in
    floor-res) envs+=("CUDA_INJECTION64_PATH=$FLOOR" CUPTI_FLOOR=resource) ;;
    floor-launch) envs+=("CUDA_INJECTION64_PATH=$FLOOR" CUPTI_FLOOR=launch) ;;
    # parcagpu-trace also listens to pc_sample_batch; the targets are for a consumer of launches
    # and kernels, so PC sampling stays off (scripts/pc-sampling-real.sh measures it).
    nocons|attached) envs+=("CUDA_INJECTION64_PATH=$LIB" PARCAGPU_PC_SAMPLING=0) ;;
    all) envs+=("CUDA_INJECTION64_PATH=$LIB" PARCAGPU_PC_SAMPLING=0 PARCAGPU_RATE_LIMIT=100000000 PARCAGPU_GRAPH_RATE_LIMIT=100000000) ;;
    fake) envs+=("CUDA_INJECTION64_PATH=$LIB" PARCAGPU_PC_SAMPLING=0); extra=(--fake-consumer all) ;;
    fake-corr) envs+=("CUDA_INJECTION64_PATH=$LIB" PARCAGPU_PC_SAMPLING=0); extra=(--fake-consumer cuda_correlation) ;;
    base-nocons|base-attached|base-agent) envs+=("CUDA_INJECTION64_PATH=$BASE_LIB") ;;
    agent) envs+=("CUDA_INJECTION64_PATH=$LIB") ;;  # defaults: PC sampling on
    agent-nopc) envs+=("CUDA_INJECTION64_PATH=$LIB" PARCAGPU_PC_SAMPLING=0) ;;
  esac
  # BENCH_DEBUG=1: the library's totals at exit (PARCAGPU_DEBUG) land in programs.log.
  [ -n "${BENCH_DEBUG:-}" ] && [ "$v" != none ] && envs+=(PARCAGPU_DEBUG=1)
  case "$v" in
    attached|all) start_consumer "$json" "$err" "$LIB" ;;
    agent|agent-nopc) start_consumer "$json" "$err" "$LIB" agent ;;
    base-attached) start_consumer "$json" "$err" "$BASE_LIB" ;;
    base-agent) start_consumer "$json" "$err" "$BASE_LIB" agent ;;
  esac
  echo "=== $tag ===" >>"$B/programs.log"
  # shellcheck disable=SC2086  # BENCH_PREFIX is a command line by design
  line=$("${envs[@]}" $BENCH_PREFIX timeout 600 "$BIN" --mode "$m" "${prog_args[@]}" "${extra[@]}" 2>>"$B/programs.log")
  rc=$?
  echo "$line" >>"$B/programs.log"
  case "$v" in attached|all|base-attached|agent|agent-nopc|base-agent) sleep "$DRAIN_S"; stop_consumer ;; esac
  ns=$(echo "$line" | awk '/^LAUNCH_OVERHEAD/ { for (i = 1; i <= NF; i++) if ($i ~ /^ns_per_launch=/) { sub(/^ns_per_launch=/, "", $i); print $i } }')
  if [ "$rc" != 0 ] || [ -z "$ns" ]; then
    log "$tag: failed (exit $rc); see $B/programs.log"
    FAILED_RUNS=$((FAILED_RUNS + 1))
    ns=NA
  fi
  local cf="NA	NA	NA	NA	NA	NA	NA	NA	NA"
  case "$v" in attached|all|base-attached) cf=$(consumer_fields "$json") ;;
    agent|agent-nopc|base-agent) cf=$(agent_fields "$json") ;; esac
  printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$v" "$m" "$ns" "$cf" >>"$B/runs.tsv"
  printf '  %-13s %-5s %10s ns/launch\n' "$v" "$m" "$ns" >&2
}

# ---- summary -----------------------------------------------------------------------------------
summarize() {
  awk -F'\t' -v variants="$VARIANTS" -v strict="$STRICT" '
    function median(key,   n, i, j, t, a) {
      n = CNT[key]
      for (i = 1; i <= n; i++) a[i] = V[key, i]
      for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      MIN[key] = a[1]; MAX[key] = a[n]
      return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    NR == 1 { for (i = 5; i <= NF; i++) COL[i] = $i; ncol = NF; next }
    {
      key = $2 SUBSEP $3
      RUNS[key]++
      if ($4 != "NA") { CNT[key]++; V[key, CNT[key]] = $4 + 0 }
      for (i = 5; i <= ncol; i++) if ($i != "NA") { SUM[key, i] += $i; HAS[key, i] = 1; if (!((key, i) in MX) || $i > MX[key, i]) MX[key, i] = $i }
    }
    END {
      nv = split(variants, VL, " ")
      split("eager graph", ML, " ")
      for (a = 1; a <= nv; a++) for (b = 1; b <= 2; b++) { key = VL[a] SUBSEP ML[b]; if (CNT[key] > 0) MED[key] = median(key) }
      printf "%-13s %-6s %6s %10s %10s %10s %8s  %s\n", "variant", "mode", "rounds", "median_ns", "min_ns", "max_ns", "x_none", "spread"
      for (b = 1; b <= 2; b++) for (a = 1; a <= nv; a++) {
        key = VL[a] SUBSEP ML[b]; nkey = "none" SUBSEP ML[b]
        if (CNT[key] == 0) { printf "%-13s %-6s %6d %10s %10s %10s %8s\n", VL[a], ML[b], 0, "NA", "NA", "NA", "NA"; continue }
        ratio = (nkey in MED && MED[nkey] > 0) ? sprintf("%.3f", MED[key] / MED[nkey]) : "NA"
        spread = (nkey in MED && MED[nkey] > 0) ? sprintf("%.3f..%.3f", MIN[key] / MED[nkey], MAX[key] / MED[nkey]) : "NA"
        R[key] = ratio
        printf "%-13s %-6s %6d %10.1f %10.1f %10.1f %8s  %s\n", VL[a], ML[b], CNT[key], MED[key], MIN[key], MAX[key], ratio, spread
      }
      print ""
      print "targets (ratio of medians to none):"
      T[1] = "nocons eager 1.05 no consumer, eager"
      T[2] = "nocons graph 1.05 no consumer, graph"
      T[3] = "attached eager 1.25 attached, eager (default rates)"
      T[4] = "attached graph 1.10 attached, graph (default rates)"
      T[5] = "agent eager 1.30 agent probe set, PC on, eager"
      T[6] = "agent graph 1.15 agent probe set, PC on, graph"
      notmet = 0
      for (t = 1; t <= 6; t++) {
        split(T[t], f, " "); label = T[t]; sub(/^[^ ]+ [^ ]+ [^ ]+ /, "", label)
        key = f[1] SUBSEP f[2]
        if (!(key in R) || R[key] == "NA") { printf "  %-34s %8s  <= %s  %s\n", label, "NA", f[3], "NOT MEASURED"; continue }
        met = (R[key] + 0 <= f[3] + 0)
        if (!met) notmet++
        printf "  %-34s %8s  <= %s  %s\n", label, R[key], f[3], met ? "MET" : "NOT MET"
      }
      print ""
      print "consumer per variant (sums over rounds; correlations and k_matched: mean per run):"
      printf "  %-13s %-6s %5s %12s %12s %9s %9s %9s %7s %7s\n", "variant", "mode", "runs", "correlations", "k_matched", "orph_kern", "orph_eag", "orph_gr", "drops", "rd_err"
      for (a = 1; a <= nv; a++) {
        if (VL[a] != "attached" && VL[a] != "all" && VL[a] != "base-attached" && VL[a] != "agent" && VL[a] != "agent-nopc" && VL[a] != "base-agent") continue
        for (b = 1; b <= 2; b++) {
          key = VL[a] SUBSEP ML[b]
          if (!(key in RUNS)) continue
          printf "  %-13s %-6s %5d %12s %12s %9s %9s %9s %7s %7s\n", VL[a], ML[b], RUNS[key], \
            avg(key, 5), avg(key, 7), sm(key, 8), sm(key, 9), sm(key, 10), sm(key, 11), sm(key, 12)
        }
      }
      exit (strict && notmet) ? 1 : 0
    }
    function sm(key, i) { return ((key, i) in HAS) ? SUM[key, i] : "NA" }
    function avg(key, i) { return ((key, i) in HAS) ? sprintf("%.0f", SUM[key, i] / RUNS[key]) : "NA" }
  ' "$B/runs.tsv" >>"$B/summary.txt"
  local src=$?
  cat "$B/summary.txt"
  echo "(outputs in $B; $FAILED_RUNS failed runs)"
  return "$src"
}

# ---- rounds ------------------------------------------------------------------------------------
{
  echo "# parcagpu launch overhead, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "# gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  fi
  echo "# cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //') ($(nproc) cpus)"
  [ "$needs_lib" = 1 ] && echo "# lib: $LIB ($(wc -c <"$LIB") bytes)"
  [ "$needs_base" = 1 ] && echo "# base lib: $BASE_LIB"
  [ "$needs_floor" = 1 ] && echo "# floor: $FLOOR"
  [ "$needs_trace" = 1 ] && echo "# trace: $TRACE"
  echo "# rounds=$ROUNDS n=$N warmup=${WARMUP:-n/10} variants=\"$VARIANTS\"${BENCH_PREFIX:+ prefix=\"$BENCH_PREFIX\"}"
} >"$B/summary.txt"
# Interrupted (SIGTERM from `timeout`, ^C): stop the consumer and summarize the rounds done so far.
trap 'stop_consumer; log "interrupted: summary of the runs so far"; summarize; exit 2' INT TERM
printf 'round\tvariant\tmode\tns_per_launch\t%s\n' "$(echo "$CFIELDS" | tr ' ' '\t')" >"$B/runs.tsv"

nv=${#VLIST[@]}
start=$(date +%s)
for ((r = 1; r <= ROUNDS; r++)); do
  log "round $r/$ROUNDS"
  if [ $((r % 2)) = 1 ]; then modes=(eager graph); else modes=(graph eager); fi
  for ((j = 0; j < nv; j++)); do
    v=${VLIST[$(((r - 1 + j) % nv))]}
    for m in "${modes[@]}"; do run_one "$r" "$v" "$m"; done
  done
  if [ "$r" = 1 ]; then
    el=$(($(date +%s) - start))
    log "round 1 took ${el}s; about $((el * ROUNDS))s in all"
    if [ "$FAILED_RUNS" -gt 0 ] && [ -z "${KEEP_GOING:-}" ]; then
      log "runs failed in round 1: stopping (set KEEP_GOING=1 to go on); see $B/programs.log"
      break
    fi
  fi
done
log "done in $(($(date +%s) - start))s"

summarize
src=$?
[ "$FAILED_RUNS" = 0 ] || exit 2
exit "$src"
