#!/usr/bin/env bash
# NVTX ranges of a PyTorch program on a GPU, collected by the library (issue 46 item 2). A small
# MLP trains STEPS steps, each `torch.cuda.nvtx.range_push("step N")` > "forward", "backward",
# "optimizer" (range_pop after each), one `torch.cuda.nvtx.mark("start")` first, then EMIT more
# steps the same way inside `torch.autograd.profiler.emit_nvtx()` (a range per autograd op, on the
# autograd engine's thread too). Run under CUDA_INJECTION64_PATH=NVTX_INJECTION64_PATH=the library
# (the library as NVTX's injection, forwarding to its libcupti), then again with
# NVTX_INJECTION64_PATH=the libcupti the first run loaded (CUPTI's own injection), each with a
# bpftrace consumer of nvtx_event_batch, nvtx_resource_name, cuda_correlation and error that
# counts every record by kind, message, thread and correlation ID.
# Prints, per run: the events by kind; the program's own ranges found against what it made; the
# emit_nvtx ranges; threads, batches, records carrying a correlation ID; errors said by the library.
# Reading it: push == pop and start == end (every range closed, all delivered by exit), "ours"
# equal to "made" (every range_push of the program arrived, its message intact), emit_nvtx ranges
# > 0 on 2 or more threads, records with a correlation ID > 0 (ranges tied to announced
# launches), no error line; both runs alike.
# Usage: scripts/nvtx-real.sh [--steps N] [--emit N] [--out DIR]
# Env: PARCAGPU_LIB, PYTHON (default /opt/torch/.venv/bin/python); needs bpftrace and root.
. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
STEPS=20 EMIT=3 OUT=/tmp/parcagpu-nvtx-real
parse_options "--steps=STEPS --emit=EMIT --out=OUT" "$@"
LIB=$(readlink -f "$LIB") || die "no library $LIB"
[ "$(id -u)" -eq 0 ] || die "run as root (eBPF)"
command -v bpftrace >/dev/null || die "needs bpftrace (scripts/install-deps.sh installs it)"
mkdir -p "$OUT" || die "cannot create $OUT"

cat >"$OUT/ranges.py" <<'PY'
import json, sys, torch
steps, emit = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                            torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 1024, device="cuda")
torch.cuda.nvtx.mark("start")

def step(i):
    torch.cuda.nvtx.range_push("step %d" % i)
    torch.cuda.nvtx.range_push("forward")
    loss = model(x).square().mean()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("backward")
    loss.backward()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("optimizer")
    opt.step()
    opt.zero_grad()
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_pop()

for i in range(steps):
    step(i)
with torch.autograd.profiler.emit_nvtx():
    for i in range(steps, steps + emit):
        step(i)
torch.cuda.synchronize()
n = steps + emit
print("MADE " + json.dumps({"step": n, "forward": n, "backward": n, "optimizer": n, "start": 1}))
PY

cat >"$OUT/count.bt" <<'BT'
BEGIN { printf("READY nvtx-count\n"); }
usdt:$1:parcagpu:cuda_correlation { @launches = count(); }
usdt:$1:parcagpu:nvtx_event_batch
{
  $n = (int64)(uint32)arg1;
  $base = (int64)arg0;
  @batches = count();
  @events = sum($n);
  $i = (int64)0;
  while ($i < $n && $i < 256) {
    $r = *(uint64 *)($base + 8 * $i);
    @kind[*(uint16 *)($r + 20)] = count();
    if (*(uint32 *)($r + 12) != 0) { @with_corr = count(); }
    @tids[*(uint32 *)($r + 8)] = count();
    @msg[str(*(uint64 *)($r + 48), 48)] = count();
    $i = $i + 1;
  }
}
usdt:$1:parcagpu:nvtx_resource_name { @names[arg0, str(arg2)] = count(); }
usdt:$1:parcagpu:error { printf("ERROR component=%s message=%s\n", str(arg2), str(arg1)); }
BT

# One run: NVTX_INJECTION64_PATH=$2, the consumer attached first; its output in $OUT/$1.*.
run() {
  local name=$1 nvtx=$2 bpid rc
  bpftrace "$OUT/count.bt" "$LIB" >"$OUT/$name.bt" 2>"$OUT/$name.bt.err" &
  bpid=$!
  for _ in $(seq 1 600); do
    grep -q "READY nvtx-count" "$OUT/$name.bt" 2>/dev/null && break
    kill -0 "$bpid" 2>/dev/null || die "bpftrace failed: $(tail -3 "$OUT/$name.bt.err")"
    sleep 0.1
  done
  log "$name: $STEPS + $EMIT (emit_nvtx) steps, NVTX_INJECTION64_PATH=$nvtx"
  CUDA_INJECTION64_PATH="$LIB" NVTX_INJECTION64_PATH="$nvtx" PARCAGPU_DEBUG=1 \
    "$PYTHON" "$OUT/ranges.py" "$STEPS" "$EMIT" >"$OUT/$name.app" 2>"$OUT/$name.app.err"
  rc=$?
  sleep 2
  kill -INT "$bpid"
  wait "$bpid"
  [ $rc -eq 0 ] || die "$name: the program failed: $(tail -3 "$OUT/$name.app.err")"
}

report() {
  python3 - "$1" "$OUT/$1.bt" "$OUT/$1.app" "$OUT/$1.app.err" <<'PY'
import json, re, sys
name, bt, app, err = sys.argv[1], open(sys.argv[2]).read(), open(sys.argv[3]).read(), open(sys.argv[4]).read()
def scalar(k):
    m = re.search(r"^@%s: (\d+)" % k, bt, re.M)
    return int(m[1]) if m else 0
kinds = {int(k): int(v) for k, v in re.findall(r"^@kind\[(\d+)\]: (\d+)", bt, re.M)}
msgs = {k: int(v) for k, v in re.findall(r"^@msg\[(.*)\]: (\d+)$", bt, re.M)}
tids = re.findall(r"^@tids\[(\d+)\]: (\d+)", bt, re.M)
made = json.loads(re.search(r"^MADE (.*)$", app, re.M)[1])
ours = {"step": sum(v for k, v in msgs.items() if re.fullmatch(r"step \d+", k)),
        "forward": msgs.get("forward", 0), "backward": msgs.get("backward", 0),
        "optimizer": msgs.get("optimizer", 0), "start": msgs.get("start", 0)}
emitted = {k: v for k, v in msgs.items() if "seq" in k or k.startswith("aten::")}
events, batches = scalar("events"), scalar("batches")
read = sum(kinds.values())
print("== %s" % name)
print("  events by kind: push %d, pop %d, start %d, end %d, mark %d (%d read of %d fired)" % (
    kinds.get(1, 0), kinds.get(2, 0), kinds.get(3, 0), kinds.get(4, 0), kinds.get(5, 0), read,
    events))
print("  ours: %s" % ", ".join("%s %d/%d" % (k, ours[k], made[k]) for k in made))
top = sorted(emitted.items(), key=lambda kv: -kv[1])[:5]
print("  emit_nvtx ranges: %d (%d distinct), e.g. %s" % (
    sum(emitted.values()), len(emitted), "; ".join("%s x%d" % kv for kv in top)))
print("  threads %d (%s); batches %d (%.1f events each); records with a correlation ID %d of %d;"
      " launches announced %d" % (len(tids), ", ".join("%s:%s" % t for t in tids), batches,
      events / batches if batches else 0, scalar("with_corr"), read, scalar("launches")))
names = re.findall(r"^@names\[(\d+), (.*)\]: (\d+)", bt, re.M)
if names:
    print("  names: %s" % ", ".join("kind %s %r" % (k, n) for k, n, _ in names))
errors = [l for l in bt.splitlines() if l.startswith("ERROR ")]
print("  errors (error probe): %s" % ("; ".join(errors[:5]) if errors else "none"))
lost = re.search(r"nvtx: events=.*", err)
print("  library: %s" % (lost[0] if lost else "(no nvtx totals line)"))
PY
}

run library "$LIB"
report library
cupti=$(sed -n 's/.*: loaded \(.*libcupti[^,]*\), CUPTI API version.*/\1/p' "$OUT/library.app.err" | head -1)
if [ -n "$cupti" ]; then
  run libcupti "$(readlink -f "$cupti")"
  report libcupti
else
  log "the library's log names no libcupti: the second run (libcupti as the injection) skipped"
fi
