#!/usr/bin/env bash
# parcagpu-trace --nvtx on a GPU (issue 46 item 2, the consumer's side): GPU time by NVTX range of
# a PyTorch program, against torch.profiler's. A small MLP trains STEPS steps, each
# torch.cuda.nvtx.range_push("step") > "forward" / "backward" / "optimizer", each range also a
# record_function of the same name; then EMIT steps inside torch.autograd.profiler.emit_nvtx()
# (a range per autograd op, on the autograd engine's thread too). Run twice: under the library
# (CUDA_INJECTION64_PATH = NVTX_INJECTION64_PATH = the library, every launch announced) with
# parcagpu-trace --nvtx --folded attached, and alone under torch.profiler.
# Prints the GPU time under each range (the second [nvtx] frame: forward, backward, optimizer;
# emit_nvtx's op ranges deeper down are folded into theirs) as ms and share of all GPU time from
# both, and the difference in points; then parcagpu-trace's nvtx_* counters and the distinct
# [nvtx] frames (emit_nvtx's included). Reading it: the three shares within a few points of the
# profiler's (kernels launched inside a record_function, by CUPTI correlation). Ranges are per
# thread on both sides: the backward's kernels are launched by autograd's engine thread, outside
# the main thread's "backward", so both put most of them under "(no range)" (parcagpu-trace under
# "(other ranges)" for the emit_nvtx steps: the engine thread's op ranges); nvtx_unmatched_* and
# nvtx_*_over_cap 0; ringbuf_drops 0.
# Usage: scripts/trace-nvtx-real.sh [--steps N] [--emit N] [--out DIR]
# Env: PARCAGPU_LIB, PARCAGPU_TRACE, PYTHON (default /opt/torch/.venv/bin/python)
. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
STEPS=200 EMIT=3 OUT=/tmp/parcagpu-trace-nvtx
start_real_run "--steps=STEPS --emit=EMIT --out=OUT" "$@"

cp "$ROOT/tools/bench/torch_profiled.py" "$OUT/"
cat >"$OUT/ranges.py" <<'PY'
import sys, torch
from torch_profiled import run_or_profile
steps, emit, mode, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(512, 1024, device="cuda")

class rng:
    def __init__(self, name): self.name = name
    def __enter__(self):
        torch.cuda.nvtx.range_push(self.name)
        self.rf = torch.profiler.record_function(self.name)
        self.rf.__enter__()
    def __exit__(self, *a):
        self.rf.__exit__(*a)
        torch.cuda.nvtx.range_pop()

def step():
    with rng("step"):
        with rng("forward"):
            loss = model(x).square().mean()
        with rng("backward"):
            loss.backward()
        with rng("optimizer"):
            opt.step()
            opt.zero_grad()

def run():
    for _ in range(steps):
        step()
    # emit_nvtx is the autograd profiler too: not inside torch.profiler (plain steps there).
    if mode == "profiler":
        for _ in range(emit):
            step()
    else:
        with torch.autograd.profiler.emit_nvtx():
            for _ in range(emit):
                step()
    torch.cuda.synchronize()

run_or_profile(run, mode, out)
print("done", steps, emit)
PY

"$TRACE" -l "$LIB" --nvtx --json -n 1000 --stack-bytes=8192 --ringbuf-mb=512 \
  --folded "$OUT/trace.folded" >"$OUT/trace.json" 2>"$OUT/trace.err" &
tpid=$!
wait_attached 60 "$tpid" "$OUT/trace.err" || die "parcagpu-trace did not attach: $(cat "$OUT/trace.err")"
log "under the library and parcagpu-trace --nvtx: $STEPS + $EMIT (emit_nvtx) steps"
PARCAGPU_RATE_LIMIT=100000000 PARCAGPU_GRAPH_RATE_LIMIT=100000000 CUDA_INJECTION64_PATH="$LIB" \
  NVTX_INJECTION64_PATH="$LIB" PARCAGPU_DEBUG=1 \
  "$PYTHON" "$OUT/ranges.py" "$STEPS" "$EMIT" parcagpu "" >"$OUT/parcagpu.app" 2>&1 ||
  die "ranges.py under the library failed: $(tail -5 "$OUT/parcagpu.app")"
sleep 2
kill -INT "$tpid"; wait "$tpid"
log "alone under torch.profiler"
"$PYTHON" "$OUT/ranges.py" "$STEPS" "$EMIT" profiler "$OUT/profiler.json" >"$OUT/profiler.app" 2>&1 ||
  die "ranges.py under torch.profiler failed: $(tail -5 "$OUT/profiler.app")"

python3 - "$OUT/trace.folded" "$OUT/trace.json" "$OUT/profiler.json" <<'PY'
import bisect, json, sys
folded, trace, prof = open(sys.argv[1]).read(), json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
RANGES = ("forward", "backward", "optimizer")
ours, frames = {}, set()
for line in folded.splitlines():
    stack, _, ns = line.rpartition(" ")
    nv = [f[len("[nvtx] "):] for f in stack.split(";") if f.startswith("[nvtx] ")]
    frames.update(nv)
    if nv[:1] == ["step"]:
        key = nv[1] if len(nv) >= 2 and nv[1] in RANGES else "step"
    else:
        key = "(other ranges)" if nv else "(no range)"  # emit_nvtx's ops on autograd's thread
    ours[key] = ours.get(key, 0) + int(ns)
# torch.profiler: a GPU event's launch (same correlation) inside a record_function of a range,
# on the launching thread: the innermost of RANGES enclosing the launch's start.
ev = prof.get("traceEvents", [])
ann = {}
for e in ev:
    if e.get("cat") == "user_annotation" and e.get("name") in RANGES + ("step",):
        ann.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e.get("dur", 0), e["name"]))
launch = {e["args"]["correlation"]: e for e in ev
          if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
theirs = {}
for e in ev:
    if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
        continue
    l = launch.get(e.get("args", {}).get("correlation"))
    key = "(no range)"
    if l:
        inside = [a for a in ann.get(l["tid"], []) if a[0] <= l["ts"] <= a[1]]
        inner = [a for a in inside if a[2] in RANGES]
        key = min(inner, key=lambda a: a[1] - a[0])[2] if inner else ("step" if inside else key)
    theirs[key] = theirs.get(key, 0) + int(e.get("dur", 0) * 1000)
to, tt = sum(ours.values()), sum(theirs.values())
print("== GPU time by NVTX range: parcagpu-trace --nvtx (folded) vs torch.profiler (record_function)")
print("  %-14s %12s %8s | %12s %8s | %s" % ("range", "ms", "share", "ms", "share", "points"))
for k in RANGES + ("step", "(other ranges)", "(no range)"):
    o, t = ours.get(k, 0), theirs.get(k, 0)
    so, st = (100.0 * o / to if to else 0), (100.0 * t / tt if tt else 0)
    print("  %-14s %12.3f %7.1f%% | %12.3f %7.1f%% | %+.1f" % (k, o / 1e6, so, t / 1e6, st, so - st))
print("  all GPU time: parcagpu %.3f ms, torch.profiler %.3f ms" % (to / 1e6, tt / 1e6))
print("== parcagpu-trace: " + ", ".join("%s=%s" % (k, v) for k, v in sorted(trace.items())
      if k.startswith("nvtx_") or k in ("ringbuf_drops", "kernels_matched", "orphan_correlations_eager")))
emitted = sorted(f for f in frames if f not in RANGES + ("step",))
print("  [nvtx] frames: %d distinct; emit_nvtx's e.g. %s" % (len(frames), ", ".join(emitted[:6]) or "none"))
PY
