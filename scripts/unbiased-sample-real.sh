#!/usr/bin/env bash
# Issue 16 on a real GPU: is the sample the library announces at the DEFAULT rate limits uniform?
#
#  a) tests/gpu/mixed_apis.cu: rounds of cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch and
#     cuGraphLaunch (same exec), in equal numbers, ~1000 rounds/s for 10 s, at the default rates,
#     once with a classic consumer (parcagpu-trace with the library's PC sampling off: sampling
#     windows) and once with the production agent's probe set (build/bin/agent-consumer, which
#     attaches pc_sample_batch: callbacks on continuously; needs its libbpf: if it cannot run, it
#     is said and skipped), and with parcagpu-trace --pc (the same mode). Prints per cbid: launched, announced,
#     fraction, and its ratio to the role's fraction (eager: 211, -307; graph: 311, -514);
#     verdict: every ratio within 0.5x-2x.
#  b) a GPU-bound PyTorch loop (x.mul(2).add_(1) on 64M floats and a 4096^3 GEMM, synchronized
#     each step) for 12 s under parcagpu-trace at the default rates (PC sampling on, as
#     parcagpu-trace attaches pc_sample_batch; and off: windows), and once with every launch
#     announced (limits raised, PC off): the truth. Prints each kernel's share of GPU time in
#     each run; verdict: every share within 10 points of the truth.
#
# Usage: scripts/unbiased-sample-real.sh [--lib PATH] [--trace PATH] [--agent PATH] [--out DIR]
#        [--python PATH]
#   defaults: build/lib/libparcagpu.so, build/bin/parcagpu-trace, build/bin/agent-consumer,
#   /tmp/parcagpu-unbiased, /opt/torch/.venv/bin/python. Env: NVCC, CUDA_ARCH (sm_90), SECONDS_A
#   (10), RATE_A (1000), SECONDS_B (12).
# Needs root (eBPF), nvcc, python3 (the torch venv's serves for the JSON too). About 2.5 min.
# Exit: 0 both verdicts held, 1 a verdict failed, 2 could not run. Outputs under $OUT.

. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
AGENT="${AGENT_CONSUMER:-$AGENT}"
OUT="${OUT:-/tmp/parcagpu-unbiased}"
PY="${TORCH_PYTHON:-$PYTHON}"
: "${SECONDS_A:=10}" "${RATE_A:=1000}" "${SECONDS_B:=12}"
start_real_run "--lib=LIB --trace=TRACE --agent=AGENT --out=OUT --python=PY" "$@"
[ -x "$PY" ] || PY=$(command -v python3) || die "no python"

# Starts a consumer ($1: out file, rest: command) and waits until it says it attached.
CPID=""
start_consumer() {
  local out="$1"; shift
  "$@" > "$out" 2> "$out.err" &
  CPID=$!
  wait_attached 60 "$CPID" "$out" "$out.err" && return 0
  kill -0 "$CPID" 2>/dev/null || { log "consumer died: $(tail -3 "$out.err")"; return 1; }
  log "consumer did not attach"; return 1
}
stop_consumer() { kill -INT "$CPID" 2>/dev/null; wait "$CPID" 2>/dev/null; CPID=""; }

# ---- a) the four launch APIs ----
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
BIN="$OUT/mixed_apis"
"$NVCC" -O2 -std=c++17 -arch="$CUDA_ARCH" -o "$BIN" "$ROOT/tests/gpu/mixed_apis.cu" -lcuda \
  > "$OUT/build.log" 2>&1 || die "nvcc failed: $(tail -3 "$OUT/build.log")"

run_a() {  # $1 = classic | agent
  local kind="$1" json="$OUT/a-$1.json"
  local -a env=(CUDA_INJECTION64_PATH="$LIB")
  if [ "$kind" = classic ]; then
    env+=(PARCAGPU_PC_SAMPLING=0)
    start_consumer "$json" "$TRACE" -l "$LIB" --json || return 1
  elif [ "$kind" = pc ]; then
    start_consumer "$json" "$TRACE" -l "$LIB" --json --pc || return 1
  else
    [ -x "$AGENT" ] || { log "no agent-consumer at $AGENT: agent run skipped"; return 1; }
    start_consumer "$json" "$AGENT" -l "$LIB" || return 1
  fi
  env "${env[@]}" "$BIN" "$SECONDS_A" "$RATE_A" > "$OUT/a-$kind.program" 2> "$OUT/a-$kind.program.err"
  local rc=$?
  sleep 2
  stop_consumer
  [ $rc -eq 0 ] || { log "mixed_apis failed: $(tail -3 "$OUT/a-$kind.program.err")"; return 1; }
}
log "a) four launch APIs, ${SECONDS_A} s at ${RATE_A} rounds/s: classic consumer"
run_a classic || die "run a/classic failed"
log "a) the same with the agent's probe set"
AGENT_OK=1
run_a agent || AGENT_OK=0
log "a) the same with parcagpu-trace --pc (also attaches pc_sample_batch)"
run_a pc || die "run a/pc failed"

# ---- b) PyTorch ----
cat > "$OUT/torch_loop.py" <<'EOF'
import sys, time, torch
seconds = float(sys.argv[1])
x = torch.randn(64 * 1024 * 1024, device="cuda")
a = torch.randn(4096, 4096, device="cuda")
b = torch.randn(4096, 4096, device="cuda")
for _ in range(20):
    y = x.mul(2).add_(1); c = a @ b
torch.cuda.synchronize()
steps, end = 0, time.time() + seconds
while time.time() < end:
    y = x.mul(2).add_(1)
    c = a @ b
    torch.cuda.synchronize()
    steps += 1
print("TORCH_STEPS", steps)
EOF
run_b() {  # $1 = default | default_nopc | all
  local kind="$1" json="$OUT/b-$1.json"
  local -a env=(CUDA_INJECTION64_PATH="$LIB")
  [ "$kind" != default ] && env+=(PARCAGPU_PC_SAMPLING=0)
  [ "$kind" = all ] && env+=(PARCAGPU_RATE_LIMIT=100000000 PARCAGPU_GRAPH_RATE_LIMIT=100000000)
  start_consumer "$json" "$TRACE" -l "$LIB" --json || return 1
  env "${env[@]}" "$PY" "$OUT/torch_loop.py" "$SECONDS_B" > "$OUT/b-$kind.program" 2> "$OUT/b-$kind.program.err"
  local rc=$?
  sleep 2
  stop_consumer
  [ $rc -eq 0 ] || { log "torch loop failed: $(tail -3 "$OUT/b-$kind.program.err")"; return 1; }
}
for k in all default default_nopc; do
  log "b) PyTorch loop, ${SECONDS_B} s: $k"
  run_b "$k" || die "run b/$k failed"
done

"$PY" - "$OUT" "$AGENT_OK" "$ROOT/scripts" <<'EOF' | tee "$OUT/summary.txt"
import json, sys, os
out, agent_ok = sys.argv[1], sys.argv[2] == "1"
sys.path.insert(0, sys.argv[3])
from trace_json import gpu_ns_by_kernel, last_json
ok = True
launched = None
for l in open(os.path.join(out, "a-classic.program")):
    if l.startswith("MIXED_APIS "):
        launched = {int(k): v for k, v in json.loads(l.split(" ", 1)[1]).items() if k != "rounds"}
role = {211: "eager", -307: "eager", 311: "graph", -514: "graph"}
print("a) four launch APIs in equal numbers, default rates (%d of each)" % launched[211])
kinds = ["classic", "pc"] + (["agent"] if agent_ok else [])
for kind in kinds:
    j = last_json(os.path.join(out, "a-%s.json" % kind))
    if kind == "agent":
        by = {}
        for p in j["pids"].values():
            for k, v in p["correlations_by_cbid"].items():
                by[int(k)] = by.get(int(k), 0) + v
    else:
        by = {int(k): v for k, v in j["correlations_by_cbid"].items()}
    tot = {}
    for c, n in launched.items():
        t = tot.setdefault(role[c], [0, 0]); t[0] += by.get(c, 0); t[1] += n
    print("  %s consumer:" % kind)
    print("    cbid  role   announced / launched  fraction  x role's")
    for c in sorted(launched):
        f = by.get(c, 0) / launched[c]
        rf = tot[role[c]][0] / tot[role[c]][1]
        ratio = f / rf if rf else 0
        good = 0.5 <= ratio <= 2
        ok &= good
        print("    %5d %-6s %6d / %6d  %8.4f  x%.2f %s" % (c, role[c], by.get(c, 0), launched[c], f,
                                                         ratio, "" if good else "  <-- FAIL"))
if not agent_ok:
    print("  agent consumer: not run (no agent-consumer binary, or it could not start: %s)"
          % os.path.join(out, "a-agent.json.err"))

def shares(path):
    j = last_json(path)
    g = gpu_ns_by_kernel(j)
    t = sum(g.values()) or 1
    return {k: v / t for k, v in g.items()}, j.get("correlations", 0)
truth, n_all = shares(os.path.join(out, "b-all.json"))
print("\nb) PyTorch GPU-bound loop: share of GPU time by kernel")
runs = [("default", "default rates, PC consumer"), ("default_nopc", "default rates, windows")]
res = {k: shares(os.path.join(out, "b-%s.json" % k)) for k, _ in runs}
print("  %-60s %12s %s" % ("kernel", "truth(%d)" % n_all,
                            " ".join("%14s" % ("%s(%d)" % (k, res[k][1])) for k, _ in runs)))
for name in sorted(truth, key=lambda n: -truth[n]):
    if truth[name] < 0.001:
        continue
    cells = []
    for k, _ in runs:
        v = res[k][0].get(name, 0)
        good = abs(v - truth[name]) < 0.10
        ok &= good
        cells.append("%13.1f%%%s" % (100 * v, "" if good else "!"))
    print("  %-60s %11.1f%% %s" % (name[:60], 100 * truth[name], " ".join(cells)))
print("\nverdict: %s" % ("PASS (every cbid within 0.5x-2x of its role; every kernel within 10 points)"
                         if ok else "FAIL"))
sys.exit(0 if ok else 1)
EOF
exit "${PIPESTATUS[0]}"
