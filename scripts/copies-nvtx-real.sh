#!/usr/bin/env bash
# Copies, fills and NVTX ranges on the GPU (issue 46 item 4): a PyTorch training step (an MLP,
# AdamW) fed by a DataLoader with pinned memory (host-to-device copies, non_blocking), the
# gradients zeroed by fills, a `.item()` per step (a device-to-host copy that blocks), each phase
# inside an NVTX range (torch.cuda.nvtx) and a record_function of the same name. Run twice, STEPS
# steps each: under the library with parcagpu-trace attached (every launch announced:
# PARCAGPU_RATE_LIMIT unlimited, so its totals are whole), and under torch.profiler alone.
# Prints the GPU time and bytes of copies and fills by kind from both, and their difference in
# points of the profiler's (issue 46: within 5); the CPU time blocked in copy calls that wait
# from both (`.item()`, a DtoH cudaMemcpyAsync to pageable memory, and a DtoH cudaMemcpy per step
# made through ctypes, a synchronous API); then the ranges each shows.
# Usage: scripts/copies-nvtx-real.sh [--steps N] [--out DIR]
# Env: PARCAGPU_LIB, PARCAGPU_TRACE, PYTHON (default /opt/torch/.venv/bin/python)
. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
STEPS=200 OUT=/tmp/parcagpu-copies-nvtx
parse_options "--steps=STEPS --out=OUT" "$@"
PYTHON=${PYTHON:-/opt/torch/.venv/bin/python}
need_lib_trace_root
mkdir -p "$OUT"

cp "$ROOT/tools/bench/torch_profiled.py" "$OUT/"
cat >"$OUT/step.py" <<'PY'
import ctypes, json, sys, torch
from torch_profiled import run_or_profile
from torch.utils.data import DataLoader, TensorDataset
steps, mode, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
torch.manual_seed(0)
data = TensorDataset(torch.randn(steps * 64, 1024), torch.randint(0, 10, (steps * 64,)))
loader = DataLoader(data, batch_size=64, pin_memory=True, num_workers=0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(),
                            torch.nn.Linear(2048, 10)).cuda()
opt = torch.optim.AdamW(model.parameters())
buf = torch.empty(4 << 20, device="cuda")

def cudart():
    # The runtime PyTorch loaded (its wheel's libcudart), so the copy is on PyTorch's context.
    for line in open("/proc/self/maps"):
        path = line.split()[-1]
        if "libcudart.so" in path:
            return ctypes.CDLL(path)
    return ctypes.CDLL("libcudart.so.12")
rt = cudart()
host4 = ctypes.create_string_buffer(4)

def sync_read(t):
    # cudaMemcpy DtoH (kind 2): synchronous, on the legacy default stream PyTorch launches on, so
    # it waits for the step's queued kernels: what parcagpu measures as CPU blocked.
    rc = rt.cudaMemcpy(host4, ctypes.c_void_p(t.data_ptr()), ctypes.c_size_t(4), ctypes.c_int(2))
    if rc != 0:
        raise RuntimeError("cudaMemcpy failed: %d" % rc)

def rng(name):
    class R:
        def __enter__(self):
            torch.cuda.nvtx.range_push(name)
            self.rf = torch.profiler.record_function(name)
            self.rf.__enter__()
        def __exit__(self, *a):
            self.rf.__exit__(*a)
            torch.cuda.nvtx.range_pop()
    return R()

def run():
    losses = []
    for x, y in loader:
        with rng("step"):
            with rng("h2d"):
                x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            with rng("zero"):
                opt.zero_grad(set_to_none=False)  # fills
                buf.zero_()                        # a fill of 16 MiB
            with rng("forward"):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            with rng("backward"):
                loss.backward()
            with rng("optimizer"):
                opt.step()
            with rng("sync_read"):
                sync_read(loss.detach().float())   # D2H cudaMemcpy, blocks on the step
            with rng("item"):
                losses.append(loss.item())           # D2H copy, blocks
    torch.cuda.synchronize()

run_or_profile(run, mode, out)
print("done", steps)
PY

# Every launch announced: each announcement carries a stack copy, so a small one and a large ring
# (the default 128 KiB copies in a 32 MiB ring dropped 7,483 events of 200 steps on an H200).
# --nvtx: the ranges as [nvtx] frames (the library collects NVTX only with that consumer), and
# NVTX_INJECTION64_PATH the library, which forwards NVTX's injection to libcupti's.
"$TRACE" -l "$LIB" --json -n 1000 --stack-bytes=8192 --ringbuf-mb=512 --nvtx >"$OUT/trace.json" \
  2>"$OUT/trace.err" &
tpid=$!
wait_attached 60 "$tpid" "$OUT/trace.err" || die "parcagpu-trace did not attach: $(cat "$OUT/trace.err")"
PARCAGPU_RATE_LIMIT=100000000 PARCAGPU_GRAPH_RATE_LIMIT=100000000 CUDA_INJECTION64_PATH="$LIB" \
  NVTX_INJECTION64_PATH="$LIB" \
  "$PYTHON" "$OUT/step.py" "$STEPS" parcagpu "" >"$OUT/parcagpu.app" 2>&1 ||
  die "step.py under the library failed: $(tail -5 "$OUT/parcagpu.app")"
sleep 2
kill -INT "$tpid"; wait "$tpid"
"$PYTHON" "$OUT/step.py" "$STEPS" profiler "$OUT/profiler.json" >"$OUT/profiler.app" 2>&1 ||
  die "step.py under torch.profiler failed: $(tail -5 "$OUT/profiler.app")"

python3 - "$OUT/trace.json" "$OUT/profiler.json" "$STEPS" <<'PY'
import json, re, sys
trace, prof, steps = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
mem = trace.get("memory", {})
ours = {}
for row in mem.get("by_stack", []):
    k = "memset" if row["what"] == "[memset]" else row["what"].strip("[]").replace("memcpy ", "")
    o = ours.setdefault(k, [0, 0, 0])
    o[0] += row["count"]; o[1] += row["bytes"]; o[2] += row["gpu_ns"]
theirs = {}
for e in prof.get("traceEvents", []):
    if e.get("cat") not in ("gpu_memcpy", "gpu_memset"):
        continue
    name = e.get("name", "")
    k = "memset" if e["cat"] == "gpu_memset" else (re.search(r"Memcpy (\w+)", name) or [0, "?"])[1]
    t = theirs.setdefault(k, [0, 0, 0])
    t[0] += 1; t[1] += int(e.get("args", {}).get("bytes", 0)); t[2] += int(e.get("dur", 0) * 1000)
print("== copies and fills, %d steps: parcagpu-trace (every launch announced) vs torch.profiler" % steps)
print("  %-8s %10s %14s %12s | %10s %14s %12s | %s" % ("kind", "count", "bytes", "GPU ms",
      "count", "bytes", "GPU ms", "GPU time diff, points of the profiler's"))
for k in sorted(set(ours) | set(theirs)):
    o, t = ours.get(k, [0, 0, 0]), theirs.get(k, [0, 0, 0])
    diff = "%+.1f" % (100.0 * (o[2] - t[2]) / t[2]) if t[2] else "-"
    print("  %-8s %10d %14d %12.3f | %10d %14d %12.3f | %s" % (k, o[0], o[1], o[2] / 1e6,
          t[0], t[1], t[2] / 1e6, diff))
to, tt = sum(v[2] for v in ours.values()), sum(v[2] for v in theirs.values())
# Shares of all GPU time (kernels, copies, fills), the figure a sampled profile can be held to.
ours_all = sum(r.get("gpu_ns", 0) for r in trace.get("gpu_time_by_stack", []))
theirs_all = sum(int(e.get("dur", 0) * 1000) for e in prof.get("traceEvents", [])
                 if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
if ours_all and theirs_all:
    print("  copies and fills, share of all GPU time: parcagpu %.1f%%, torch.profiler %.1f%%, "
          "%+.1f points" % (100.0 * to / ours_all, 100.0 * tt / theirs_all,
                            100.0 * (to / ours_all - tt / theirs_all)))
print("  total GPU time of copies and fills: parcagpu %.3f ms, torch.profiler %.3f ms, %s points"
      % (to / 1e6, tt / 1e6, "%+.1f" % (100.0 * (to - tt) / tt) if tt else "-"))
print("== CPU blocked in copy calls that wait (a synchronous API, or pageable host memory)")
print("  parcagpu-trace: %.3f ms in %d calls (their GPU time %.3f ms); all copy and fill calls %.3f ms"
      % (mem.get("sync_blocked_ns", 0) / 1e6, mem.get("sync_count", 0),
         mem.get("sync_gpu_ns", 0) / 1e6, mem.get("call_ns", 0) / 1e6))
rows = sorted((r for r in mem.get("by_stack", []) if r.get("sync_blocked_ns")),
              key=lambda r: -r["sync_blocked_ns"])
for r in rows[:6]:
    print("    %-16s %6d calls %10.3f ms blocked  at %s" % (r["what"], r["sync_count"],
          r["sync_blocked_ns"] / 1e6, " < ".join(r["frames"][:3])))
# torch.profiler: the runtime calls of the same rule, by the correlation of each call with its
# GPU copy ("Memcpy DtoH (Device -> Pageable)").
pageable = {e.get("args", {}).get("correlation") for e in prof.get("traceEvents", [])
            if e.get("cat") == "gpu_memcpy" and "Pageable" in e.get("name", "")}
waits = {}
for e in prof.get("traceEvents", []):
    if e.get("cat") != "cuda_runtime":
        continue
    n = e.get("name", "")
    sync_api = n.startswith(("cudaMemcpy", "cudaMemset")) and "Async" not in n
    if sync_api or (n.startswith("cudaMemcpy") and e.get("args", {}).get("correlation") in pageable):
        w = waits.setdefault(n + ("" if sync_api else " (pageable)"), [0, 0.0])
        w[0] += 1; w[1] += float(e.get("dur", 0)) / 1e3
print("  torch.profiler, those calls (cuda_runtime events): %.3f ms in %d calls%s" % (
      sum(w[1] for w in waits.values()), sum(w[0] for w in waits.values()),
      "".join("; %s %.3f ms x%d" % (n, w[1], w[0]) for n, w in sorted(waits.items()))))
ss = [float(e.get("dur", 0)) / 1e3 for e in prof.get("traceEvents", [])
      if e.get("cat") == "cuda_runtime" and e.get("name") == "cudaStreamSynchronize"]
print("  (no copy: cudaStreamSynchronize %.3f ms in %d calls)" % (sum(ss), len(ss)))
nv = sorted({f for row in trace.get("gpu_time_by_stack", []) for f in row.get("frames", [])
             if f.startswith("[nvtx]")})
print("== ranges: parcagpu-trace shows %d [nvtx] frames%s" % (len(nv), ": " + ", ".join(nv) if nv else
      " (none: see trace.err, parcagpu.app)"))
# GPU time by outermost-but-one range (step > h2d, zero, forward, ...), against the profiler's
# GPU time of the kernels, copies and fills launched inside each record_function of that name.
by_range = {}
for row in trace.get("gpu_time_by_stack", []):
    nvtx = [f[len("[nvtx] "):] for f in row.get("frames", []) if f.startswith("[nvtx] ")]
    key = nvtx[-2] if len(nvtx) >= 2 else (nvtx[-1] if nvtx else "(no range)")  # root last
    by_range[key] = by_range.get(key, 0) + row.get("gpu_ns", 0)
print("   parcagpu-trace GPU time by range (ms): " + ", ".join(
      "%s %.3f" % (k, v / 1e6) for k, v in sorted(by_range.items(), key=lambda kv: -kv[1])))
print("   nvtx counters: " + ", ".join("%s=%s" % (k, v) for k, v in sorted(trace.items())
      if k.startswith("nvtx_")))
ranges = sorted({e["name"] for e in prof.get("traceEvents", []) if e.get("cat") == "user_annotation"})
print("   torch.profiler shows %d ranges: %s" % (len(ranges), ", ".join(ranges)))
print("   trace: kernels matched %s, orphan correlations %s, ring-buffer drops %s" % (
      trace.get("kernels_matched"), trace.get("orphan_correlations_eager"), trace.get("ringbuf_drops")))
PY
