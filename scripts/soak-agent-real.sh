#!/usr/bin/env bash
# Graph-replay soak on a real GPU with the production agent's probe set (issue 17): a PyTorch
# training step (or SOAK_APP) captured as a CUDA graph and replayed for DURATION under the
# library at its defaults (PC sampling on) with tools/agent's consumer attached. Every INTERVAL: the process's
# GPU memory (nvidia-smi), the application's and the consumer's resident memory. At the end, the
# consumer's counts: launches announced, kernel records, matched, orphans, kernel records with an
# invalid timestamp (upstream users saw GPU memory growth and invalid timestamps after ~25M
# records of sustained graph replay, parcagpu#23), PC records and their correlation IDs.
#
# Usage: scripts/soak-agent-real.sh [DURATION_S [INTERVAL_S]]   (default 540 30)
# Env: PARCAGPU_LIB, PARCAGPU_AGENT, PYTHON (/opt/torch/.venv/bin/python), OUT (/tmp/parcagpu-soak),
#      CUDA_VISIBLE_DEVICES (one index: the soak's GPU, whose memory is sampled; soaks side by side
#      each need their own copy of the library as PARCAGPU_LIB, the consumer attaching by file),
#      SOAK_PC_OFF (1: the library with PARCAGPU_PC_SAMPLING=0, the control for what PC sampling adds),
#      SOAK_ALONE (1: the program alone, no library and no consumer: the control for GPU memory;
#      sampled alike, no agent verdict),
#      SOAK_APP (another program to soak instead of the PyTorch step, run as `$SOAK_APP DURATION`,
#      for example tests/gpu/graph_soak, a C++ graph replay through the driver API)
# Prints the samples and a verdict line: GPU memory and RSS flat (last within 5% or 64 MiB of the
# sample after the first minute), no invalid timestamp, no orphan kernel.
. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
DURATION="${1:-540}"
INTERVAL="${2:-30}"
OUT="${OUT:-/tmp/parcagpu-soak}"
mkdir -p "$OUT"
if [ -n "${SOAK_APP:-}" ]; then
  read -ra APP <<<"$SOAK_APP"
  APP+=("$DURATION")
else
  APP=("$PYTHON" "$ROOT/tools/bench/torch_step.py" --mode graph --seconds "$DURATION")
fi
if [ -n "${SOAK_ALONE:-}" ]; then
  APID=$$  # no consumer: its column is this shell's
  env -u CUDA_INJECTION64_PATH "${APP[@]}" >"$OUT/app.out" 2>"$OUT/app.err" &
else
  "$AGENT" -l "$LIB" >"$OUT/agent.json" 2>"$OUT/agent.err" &
  APID=$!
  wait_attached 60 "$APID" "$OUT/agent.err" ||
    { cat "$OUT/agent.err"; echo "soak: consumer did not attach"; exit 2; }
  env -u PARCAGPU_RATE_LIMIT -u PARCAGPU_GRAPH_RATE_LIMIT -u PARCAGPU_PC_SAMPLING \
    CUDA_INJECTION64_PATH="$LIB" ${SOAK_PC_OFF:+PARCAGPU_PC_SAMPLING=0} "${APP[@]}" \
    >"$OUT/app.out" 2>"$OUT/app.err" &
fi
PID=$!
rss() { awk '/^VmRSS/ { print int($2 / 1024) }' "/proc/$1/status" 2>/dev/null || echo NA; }
# The process's GPU memory; where nvidia-smi lists no processes (some VMs), the GPU's in use. With
# CUDA_VISIBLE_DEVICES one index (soaks side by side, one per GPU), that GPU's.
SMI_GPU=()
[[ "${CUDA_VISIBLE_DEVICES:-}" =~ ^[0-9]+$ ]] && SMI_GPU=(-i "$CUDA_VISIBLE_DEVICES")
gpu() {
  local m
  m=$(nvidia-smi "${SMI_GPU[@]}" --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
        awk -F', *' -v p="$1" '$1 == p { print $2 }')
  [ -n "$m" ] || m=$(nvidia-smi "${SMI_GPU[@]}" --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)
  echo "${m:-NA}"
}
printf '%6s %12s %12s %14s\n' t_s gpu_mib app_rss_mib agent_rss_mib | tee "$OUT/samples.txt"
t=0
while kill -0 "$PID" 2>/dev/null; do
  sleep "$INTERVAL"; t=$((t + INTERVAL))
  kill -0 "$PID" 2>/dev/null || break
  printf '%6d %12s %12s %14s\n' "$t" "$(gpu "$PID")" "$(rss "$PID")" "$(rss "$APID")" | tee -a "$OUT/samples.txt"
done
wait "$PID"; rc=$?
echo "app exit $rc: $(cat "$OUT/app.out")"
if [ -n "${SOAK_ALONE:-}" ]; then
  echo "alone: GPU MiB first $(sed -n 2p "$OUT/samples.txt" | awk '{print $2}') last $(tail -1 "$OUT/samples.txt" | awk '{print $2}')"
  exit "$rc"
fi
sleep 2
kill -INT "$APID"; wait "$APID"
python3 - "$OUT/agent.json" "$OUT/samples.txt" "$ROOT/scripts" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
from agent_json import AgentTotals
tot = AgentTotals(sys.argv[1])
print("agent: correlations %d, kernel records %d, matched %d, orphan kernels %d, invalid "
      "timestamps %d, impossible records %d, PC records %d %s, read failures %d, ring-buffer drops %d" % (
          tot("correlations"), tot("kernel_records"), tot("matched"), tot("orphan_kernels"),
          tot("invalid_timestamps"), tot("impossible_kernel_records"), tot.pc_records, tot.ids, tot("read_failures"), tot("ringbuf_drops")))
rows = [l.split() for l in open(sys.argv[2]).read().splitlines()[1:]]
rows = [r for r in rows if len(r) == 4 and "NA" not in r and r[1] != ""]
flat = True
if len(rows) >= 3:
    base = rows[1] if int(rows[1][0]) >= 60 else rows[0]
    for col, name in ((1, "gpu"), (2, "app rss"), (3, "agent rss")):
        a, b = float(base[col]), float(rows[-1][col])
        ok = b <= max(a * 1.05, a + 64)
        flat &= ok
        print("%s MiB: %s at %ss -> %s at %ss %s" % (name, base[col], base[0], rows[-1][col], rows[-1][0],
                                                     "flat" if ok else "GREW"))
ok = flat and tot("invalid_timestamps") == 0 and tot("impossible_kernel_records") == 0 and tot("orphan_kernels") == 0 and tot("matched") > 0
print("SOAK", "PASS" if ok else "FAIL")
PY
