#!/usr/bin/env bash
# Do PC samples keep flowing with the episodes (issue 17)? A PyTorch training step (tools/bench/
# torch_step.py, eager) for DURATION seconds under the library at its defaults with
# `parcagpu-trace --pc --json` attached. Checks: at least 50 sampled launches; every kernel with at
# least 10% of the GPU time (of the announced launches' kernels) has PC samples; every sample
# carries an announced launch's correlation ID or 0 (GPU-only; none of a launch never announced).
# Usage: scripts/pc-flow-torch-real.sh [DURATION_S]   (default 60)
# Env: PARCAGPU_LIB, PARCAGPU_TRACE, PYTHON (/opt/torch/.venv/bin/python), OUT (/tmp/parcagpu-pcflow)
. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
DURATION="${1:-60}"
OUT="${OUT:-/tmp/parcagpu-pcflow}"
mkdir -p "$OUT"
"$TRACE" -l "$LIB" --pc --json >"$OUT/trace.json" 2>"$OUT/trace.err" &
TPID=$!
wait_attached 60 "$TPID" "$OUT/trace.err"
env -u PARCAGPU_RATE_LIMIT -u PARCAGPU_GRAPH_RATE_LIMIT -u PARCAGPU_PC_SAMPLING \
  CUDA_INJECTION64_PATH="$LIB" "$PYTHON" "$ROOT/tools/bench/torch_step.py" --mode eager \
  --seconds "$DURATION" >"$OUT/app.out" 2>"$OUT/app.err"
echo "app exit $?: $(cat "$OUT/app.out")"
sleep 2
kill -INT "$TPID"; wait "$TPID"
python3 - "$OUT/trace.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
gpu = {}
for st in j.get("gpu_time_by_stack", []):
    for k in st.get("by_kernel", []):
        gpu[k["kernel"][:127]] = gpu.get(k["kernel"][:127], 0) + k["gpu_ns"]
total = sum(gpu.values()) or 1
# A consumer reads at most 128 bytes of a PC record's function name (the agent's ABI,
# docs/probe-abi.md): long C++ names arrive cut, so kernels are matched on that prefix.
NAME_MAX = 127
pc = {}
for k in j.get("pc", {}).get("kernels", []):
    e = pc.setdefault(k["function"][:NAME_MAX], {"samples": 0, "launches": 0, "by_launch": {}})
    e["samples"] += k.get("samples", 0)
    e["launches"] += k.get("launches", 0)
    for what, n in k.get("by_launch", {}).items():
        e["by_launch"][what] = e["by_launch"].get(what, 0) + n
launches = sum(k.get("launches", 0) for k in pc.values())
by = {}
for k in pc.values():
    for what, n in k.get("by_launch", {}).items():
        by[what] = by.get(what, 0) + n
print("announced launches %d, kernels matched %d; PC: %d records, %d sampled launches, samples by "
      "launch kind %s" % (j.get("correlations", 0), j.get("kernels_matched", 0),
                          j.get("pc", {}).get("records", 0), launches, by))
ok = launches >= 50 and by.get("unannounced", 0) == 0  # gpu_only (ID 0): the agent's GPU-only stacks
print("%-60s %7s %9s %9s" % ("kernel", "gpu_%", "samples", "launches"))
for name, ns in sorted(gpu.items(), key=lambda kv: -kv[1]):
    share = 100.0 * ns / total
    k = pc.get(name, {})
    print("%-60s %7.1f %9d %9d" % (name[:60], share, k.get("samples", 0), k.get("launches", 0)))
    if share >= 10 and k.get("samples", 0) == 0:
        ok = False
for name, k in sorted(pc.items(), key=lambda kv: -kv[1].get("samples", 0)):
    if name not in gpu:
        print("%-60s %7s %9d %9d  (PC samples, no GPU time by that name)" % (
            name[:60], "-", k.get("samples", 0), k.get("launches", 0)))
print("PCFLOW", "PASS" if ok else "FAIL")
PY
