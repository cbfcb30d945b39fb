#!/usr/bin/env bash
# Several GPUs on a real machine (issue 19), two H100s. Two parts, about 3 minutes in all:
#
# (a) tests/gpu/two_gpu.cu: one process drives both GPUs (eager <<<>>>, cudaLaunchKernel,
#     cuLaunchKernel; captured graphs through cudaGraphLaunch and cuGraphLaunch), every kernel
#     counted on the GPU, each device's kernels with names of their own. Run for TWO_GPU_SECONDS
#     under the library at its defaults with two consumers attached at once: agent-consumer
#     (tools/agent: the production agent's probe set) and parcagpu-trace --pc --json-lines.
#     Judged: every kernel record of the agent matched to an announced launch (no orphan kernels,
#     no read failures, no ring-buffer drops); per device (parcagpu-trace's kernel lines) matched
#     kernels and GPU time on every device, the kernel names per device exactly the ones two_gpu
#     ran there (none of another device's, none missing), never more than it ran; one gpu_config
#     per device (agent and parcagpu-trace); PC samples from every device, each under an announced
#     launch or GPU-only (agent: correlation IDs unannounced 0; parcagpu-trace: by_launch has no
#     unannounced).
# (b) tools/bench/nccl_step.py under torchrun --nproc_per_node=2 (NCCL: matmul, all_reduce, broadcast;
#     eager, then replayed as a CUDA graph), twice: without the library ("none") and with it and
#     both consumers ("agent"); each under `timeout`. Judged: both ranks finished with right
#     collective results and no HANG; per rank (pid) the agent's orphan kernels and read failures
#     are 0 and NCCL kernels (names containing "nccl") are among the matched kernels
#     (parcagpu-trace's kernel lines of that pid). The step times (median, p99) of none vs agent
#     per phase, and their ratios, are printed (not judged).
#
# Usage: scripts/multi-gpu-real.sh          (from anywhere; exit 0 PASS, 1 FAIL)
# Env:   PARCAGPU_LIB, PARCAGPU_AGENT, PARCAGPU_TRACE (default build/lib/libparcagpu.so,
#        build/bin/agent-consumer, build/bin/parcagpu-trace), OUT (/tmp/parcagpu-multigpu),
#        PYTHON (/opt/torch/.venv/bin/python), TORCHRUN (/opt/torch/.venv/bin/torchrun),
#        NVCC (nvcc, else /usr/local/cuda/bin/nvcc), TWO_GPU_SECONDS (15), TWO_GPU_ARGS (""; e.g.
#        --threads), NCCL_EAGER_S / NCCL_GRAPH_S (15 / 15), NCCL_CAPTURE_MODE (thread_local;
#        global is PyTorch's default), TORCH_TIMEOUT_S (240), PARTS ("a b"),
#        TWO_GPU_BIN (a prebuilt two_gpu or a stand-in: no nvcc), EXPECT_CBIDS (launch cbids the
#        agent must have seen announced in part a; default "211 -307 311 -514").
# Output: a table per part, then "MULTIGPU PASS" or "MULTIGPU FAIL (reasons)"; everything (the
#        consumers' JSON, the programs' outputs, judge.py, verdicts) is left in OUT.
. "$(dirname "${BASH_SOURCE[0]}")/lib-real.sh"
# Absolute paths (the file names kept, links not resolved): the library's path is what the
# consumers attach to and what CUDA_INJECTION64_PATH names, from whatever directory.
absolute() { case "$1" in /*) echo "$1" ;; *) echo "$(cd "$(dirname "$1")" 2>/dev/null && pwd)/$(basename "$1")" ;; esac; }
LIB=$(absolute "$LIB"); AGENT=$(absolute "$AGENT"); TRACE=$(absolute "$TRACE")
OUT="${OUT:-/tmp/parcagpu-multigpu}"
TORCHRUN="${TORCHRUN:-/opt/torch/.venv/bin/torchrun}"
NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
TWO_GPU_SECONDS="${TWO_GPU_SECONDS:-15}"
TWO_GPU_ARGS="${TWO_GPU_ARGS:-}"
TWO_GPU_BIN="${TWO_GPU_BIN:-}"
NCCL_EAGER_S="${NCCL_EAGER_S:-15}"
NCCL_GRAPH_S="${NCCL_GRAPH_S:-15}"
NCCL_CAPTURE_MODE="${NCCL_CAPTURE_MODE:-thread_local}"
TORCH_TIMEOUT_S="${TORCH_TIMEOUT_S:-240}"
PARTS="${PARTS:-a b}"
EXPECT_CBIDS="${EXPECT_CBIDS:-211 -307 311 -514}"

# Never NVLink multicast (KINDS.md): NCCL's NVLS, PyTorch's symmetric memory, NVSHMEM.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The library at its defaults: no PARCAGPU_* reaches any program (an unknown one would also get
# a warning and the error probe), and nothing is injected unless a step says so.
for v in $(compgen -e); do
  case "$v" in PARCAGPU_* | CUDA_INJECTION64_PATH) unset "$v" ;; esac
done

mkdir -p "$OUT"
LOG="$OUT/run.log"
: >"$LOG"
FAILS=()
# Progress goes to the terminal (fd 3) and run.log, also from steps whose stdout is redirected.
exec 3>&1
fail() { FAILS+=("$1"); echo "multi-gpu: FAIL: $1" | tee -a "$LOG" >&3; }
say() { echo "multi-gpu: $*" | tee -a "$LOG" >&3; }
# run NAME CMD...: log and run one step; its status is the step's, a failure does not stop us.
run() {
  local name="$1"; shift
  say "[$name] $(printf '%q ' "$@")"
  "$@"
  local rc=$?
  say "[$name] exit $rc"
  return $rc
}

say "lib $LIB; agent $AGENT; trace $TRACE; out $OUT"
say "env: NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS"
for f in "$LIB" "$AGENT" "$TRACE"; do [ -e "$f" ] || fail "missing $f"; done
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | tee -a "$LOG"

# ---- consumers ----
APID=""; TPID=""
wait_for() {  # FILE PATTERN SECONDS PID: the pattern in the file, while PID lives
  for _ in $(seq 1 $(($3 * 10))); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    kill -0 "$4" 2>/dev/null || break
    sleep 0.1
  done
  grep -q "$2" "$1" 2>/dev/null
}
start_consumers() {  # TAG
  local tag="$1"
  say "[$tag] start agent-consumer: $AGENT -l $LIB"
  "$AGENT" -l "$LIB" >"$OUT/$tag.agent.json" 2>"$OUT/$tag.agent.err" &
  APID=$!
  wait_for "$OUT/$tag.agent.err" attached 60 "$APID" || fail "$tag: agent-consumer did not attach ($(tail -c 300 "$OUT/$tag.agent.err"))"
  # --json-lines: the --json summary as its last line, and before it one line per matched kernel
  # (pid, device, name, correlation ID): kernel names per process and device, the device of each
  # PC-sampled launch. -n 200: every kernel name in the per-device tables.
  say "[$tag] start parcagpu-trace: $TRACE -l $LIB --pc --json-lines -n 200"
  "$TRACE" -l "$LIB" --pc --json-lines -n 200 >"$OUT/$tag.trace.jsonl" 2>"$OUT/$tag.trace.err" &
  TPID=$!
  wait_for "$OUT/$tag.trace.err" attached 60 "$TPID" || fail "$tag: parcagpu-trace did not attach ($(tail -c 300 "$OUT/$tag.trace.err"))"
}
stop_one() {  # PID NAME TAG
  local pid="$1" rc
  [ -n "$pid" ] || return 0
  kill -INT "$pid" 2>/dev/null
  for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    fail "$3: $2 still running 30 s after SIGINT: killed"
    kill -KILL "$pid" 2>/dev/null
  fi
  wait "$pid"; rc=$?
  say "[$3] $2 exit $rc"
  [ "$rc" -eq 0 ] || fail "$3: $2 exit $rc"
}
stop_consumers() {  # TAG
  sleep 2  # the last activity flush
  stop_one "$APID" agent-consumer "$1"
  stop_one "$TPID" parcagpu-trace "$1"
  APID=""; TPID=""
}
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  for p in $APID $TPID; do kill -INT "$p" 2>/dev/null; done
}
trap cleanup EXIT

# ---- the judge (stdlib python3 and scripts/trace_json.py; `python3 OUT/judge.py a OUT` re-judges
# a run) ----
{ echo "import sys; sys.path.insert(0, '$ROOT/scripts')"; cat <<'PY'; } >"$OUT/judge.py"
import collections, json, os, sys
from trace_json import json_lines

mode, out = sys.argv[1], sys.argv[2]
fails = []


def check(ok, what):
    print("  %-4s %s" % ("ok" if ok else "FAIL", what))
    if not ok:
        fails.append(what)
    return ok


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception as e:  # noqa: BLE001
        check(False, "read %s: %s" % (os.path.basename(path), e))
        return {}


def load_trace(path):
    """parcagpu-trace --json-lines: kernel lines and the summary (the last line)."""
    kernels, summary = [], {}
    try:
        for j in json_lines(open(path)):
            if j.get("type") == "kernel":
                kernels.append(j)
            elif j.get("type") == "summary":
                summary = j
    except OSError as e:
        check(False, "read %s: %s" % (os.path.basename(path), e))
    check(bool(summary), "%s has parcagpu-trace's summary line" % os.path.basename(path))
    return kernels, summary


def short(name, n=44):
    return name if len(name) <= n else name[:n - 3] + "..."


def judge_agent_process(p, who):
    check(p.get("matched", 0) > 0, "%s: agent matched kernels (%d)" % (who, p.get("matched", 0)))
    check(p.get("orphan_kernels", -1) == 0,
          "%s: agent orphan kernels 0 (%s of %s records)" % (who, p.get("orphan_kernels"),
                                                             p.get("kernel_records")))
    check(p.get("read_failures", -1) == 0,
          "%s: agent read failures 0 (%s %s)" % (who, p.get("read_failures"),
                                                 p.get("read_failures_by_kind")))
    check(p.get("ringbuf_drops", -1) == 0, "%s: agent ring-buffer drops 0 (%s)" % (who, p.get("ringbuf_drops")))


def part_a():
    print("part a: two_gpu, one process, every device, two consumers")
    # two_gpu's table
    devices, pid, status, head = {}, None, None, ""
    try:
        for line in open(os.path.join(out, "a.app.out")):
            line = line.rstrip("\n")
            if line.startswith("# two_gpu"):
                head = line[2:]
            f = line.split("\t")
            if f[0] == "DEVICE":
                kv = dict(x.split("=", 1) for x in f[1:] if "=" in x and not x.startswith("k:"))
                ks = {}
                for x in f[1:]:
                    if x.startswith("k:") and "=" in x:
                        n, c = x[2:].rsplit("=", 1)
                        ks[n] = int(c)
                devices[int(kv["device"])] = {"info": kv, "kernels": ks}
                pid = int(kv["pid"])
            elif f[0] == "END":
                status = f[1] if len(f) > 1 else "?"
    except OSError as e:
        check(False, "read a.app.out: %s" % e)
    print("  program: %s" % head)
    check(len(devices) >= 2, "two_gpu reported %d devices (want >= 2)" % len(devices))
    check(status == "status=ok", "two_gpu counts as expected (%s)" % status)
    if pid is None:
        return
    name_dev = collections.defaultdict(set)
    for d, v in devices.items():
        for n in v["kernels"]:
            name_dev[n].add(d)

    # agent
    agent = load_json(os.path.join(out, "a.agent.json"))
    p = agent.get("pids", {}).get(str(pid))
    if not check(p is not None, "agent has two_gpu's pid %d" % pid):
        p = {}
    judge_agent_process(p, "two_gpu")
    by_cbid = p.get("correlations_by_cbid", {})
    for cb in os.environ.get("EXPECT_CBIDS", "211 -307 311 -514").split():
        check(by_cbid.get(cb, 0) > 0, "agent: launches of cbid %s announced (%s)" % (cb, by_cbid.get(cb, 0)))
    check(p.get("graph_kernels_matched", 0) > 0,
          "agent: graph kernels matched (%s)" % p.get("graph_kernels_matched"))
    cfg_devs = sorted(c.get("device") for c in p.get("gpu_configs", []))
    check(cfg_devs == sorted(devices), "agent: one gpu_config per device %s (got %s; repeats %s)"
          % (sorted(devices), cfg_devs, p.get("gpu_config_repeats")))
    for c in p.get("gpu_configs", []):
        check(c.get("sampling_factor", 0) > 0 and c.get("clock_khz", 0) > 0,
              "agent: gpu_config of device %s usable %s" % (c.get("device"), c))
    pcs = p.get("pc_samples", {})
    ids = pcs.get("correlation_ids", {})
    check(pcs.get("records", 0) > 0, "agent: PC records (%s)" % pcs.get("records"))
    # ID 0 is a GPU-only sample (a launch not announced), which the agent reports at once.
    check(ids.get("unannounced", -1) == 0,
          "agent: no PC sample under a launch never announced %s" % ids)

    # parcagpu-trace
    kernels, s = load_trace(os.path.join(out, "a.trace.jsonl"))
    mine = [k for k in kernels if k.get("pid") == pid]
    per = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))
    dev_of_corr = {}
    for k in mine:
        c = per[k["device"]][k["kernel"]]
        c[0] += 1
        c[1] += k.get("gpu_ns", 0)
        dev_of_corr[k["correlation_id"]] = k["device"]
    check(s.get("orphan_kernels", -1) == 0, "trace: orphan kernels 0 (%s)" % s.get("orphan_kernels"))
    check(s.get("ringbuf_drops", -1) == 0 and s.get("read_errors", -1) == 0,
          "trace: ring-buffer drops 0, read errors 0 (%s, %s)" % (s.get("ringbuf_drops"), s.get("read_errors")))
    check(set(per) <= set(devices), "trace: kernels only on two_gpu's devices (%s)" % sorted(per))
    bydev = {d.get("device"): d for d in s.get("gpu_time_by_device", [])}
    pc = s.get("pc", {})
    tcfg = sorted(c.get("device") for c in pc.get("gpu_configs", []) if c.get("pid") == pid)
    check(tcfg == sorted(devices), "trace: gpu_config of every device %s (got %s)" % (sorted(devices), tcfg))
    # PC samples per device: by the kernel's name where only one device ran it (two_gpu's
    # names are per device), else by the sampled launches' correlation IDs.
    pc_dev = collections.Counter()
    pc_launch = collections.Counter()
    pc_bad = collections.Counter()
    for k in pc.get("kernels", []):
        if k.get("pid") != pid:
            continue
        devs = name_dev.get(k["function"], set())
        if len(devs) == 1:
            pc_dev[next(iter(devs))] += k.get("samples", 0)
        for corr in k.get("correlation_ids", []):
            if corr in dev_of_corr:
                pc_launch[dev_of_corr[corr]] += 1
        pc_bad["unannounced"] += k.get("by_launch", {}).get("unannounced", 0)
    check(sum(pc_bad.values()) == 0, "trace: no PC sample under a launch never announced %s" % dict(pc_bad))

    print()
    print("  %-6s %10s %9s %10s %8s %8s %7s %7s %9s %9s" % (
        "device", "kernels", "matched", "gpu_ms", "names", "matched", "foreign", "missing",
        "pc_smpl", "pc_launch"))
    for d in sorted(devices):
        ran = devices[d]["kernels"]
        seen = per.get(d, {})
        foreign = sorted(n for n in seen if n not in ran or ran[n] == 0)
        missing = sorted(n for n, c in ran.items() if c > 0 and n not in seen)
        over = sorted(n for n in seen if n in ran and seen[n][0] > ran[n])
        gpu_ms = sum(v[1] for v in seen.values()) / 1e6
        print("  %-6d %10d %9d %10.2f %8d %8d %7d %7d %9d %9d" % (
            d, sum(ran.values()), sum(v[0] for v in seen.values()), gpu_ms, len(ran), len(seen),
            len(foreign), len(missing), pc_dev.get(d, 0), pc_launch.get(d, 0)))
        for n in sorted(ran):
            print("           %-44s ran %9d  matched %7d  gpu %9.3f ms" % (
                short(n), ran[n], seen.get(n, [0, 0])[0], seen.get(n, [0, 0])[1] / 1e6))
        check(sum(v[0] for v in seen.values()) > 0 and gpu_ms > 0,
              "device %d: matched kernels with GPU time" % d)
        row = bydev.get(d, {})
        check(row.get("kernels", 0) > 0 and row.get("gpu_ns", 0) > 0,
              "device %d: trace's gpu_time_by_device row (%s kernels, %s ns)" % (d, row.get("kernels"), row.get("gpu_ns")))
        if row.get("pids") == 1:  # only two_gpu there: the row is its kernel lines' sum
            n = sum(v[0] for v in seen.values())
            check(row.get("kernels") == n, "device %d: gpu_time_by_device row's kernels = the kernel lines' (%s, %d)"
                  % (d, row.get("kernels"), n))
        check(not foreign, "device %d: no kernel name two_gpu did not run there %s" % (d, [short(n) for n in foreign]))
        check(not missing, "device %d: every kernel two_gpu ran there matched at least once %s" % (d, [short(n) for n in missing]))
        check(not over, "device %d: no kernel matched more often than it ran %s" % (d, [short(n) for n in over]))
        check(pc_dev.get(d, 0) > 0 or pc_launch.get(d, 0) > 0,
              "device %d: PC samples (%d by name, %d sampled launches)" % (d, pc_dev.get(d, 0), pc_launch.get(d, 0)))
    print("  agent: correlations %s by cbid %s, kernel records %s, matched %s, graph kernels matched %s, "
          "PC records %s, gpu_configs %s (repeats %s)" % (
              p.get("correlations"), by_cbid, p.get("kernel_records"), p.get("matched"),
              p.get("graph_kernels_matched"), pcs.get("records"), cfg_devs, p.get("gpu_config_repeats")))
    print("  trace: correlations %s, kernel records %s, matched %s, kernel lines of the pid %d, "
          "PC records %s samples %s" % (s.get("correlations"), s.get("kernel_records"),
                                        s.get("kernels_matched"), len(mine), pc.get("records"),
                                        pc.get("samples")))


def ranks(path):
    """nccl_step.py's JSON objects. torchrun may prefix lines, and the ranks' outputs may run
    together on one line (seen on two H200s: '...}{"rank": 0, ...'): every object in a line."""
    rs, hang = {}, []
    decoder = json.JSONDecoder()
    try:
        for line in open(path, errors="replace"):
            if "HANG" in line:
                hang.append(line.strip())
            i = line.find("{")
            while i >= 0:
                try:
                    j, end = decoder.raw_decode(line, i)
                except ValueError:
                    i = line.find("{", i + 1)
                    continue
                if isinstance(j, dict) and "rank" in j and "phases" in j:
                    rs[j["rank"]] = j
                i = line.find("{", end)
    except OSError as e:
        check(False, "read %s: %s" % (os.path.basename(path), e))
    return rs, hang


def part_b():
    print("part b: torchrun --nproc_per_node=2 tools/bench/nccl_step.py, none vs agent")
    runs = {}
    for tag in ("none", "agent"):
        rs, hang = ranks(os.path.join(out, "b.%s.out" % tag))
        _, hang2 = ranks(os.path.join(out, "b.%s.err" % tag))
        rc = open(os.path.join(out, "b.%s.rc" % tag)).read().strip() if os.path.exists(
            os.path.join(out, "b.%s.rc" % tag)) else "?"
        check(rc == "0", "%s: torchrun exit 0 (%s%s)" % (tag, rc, ": timed out" if rc in ("124", "137") else ""))
        check(not hang and not hang2, "%s: no HANG %s" % (tag, (hang + hang2)[:2]))
        check(sorted(rs) == [0, 1], "%s: both ranks reported (%s)" % (tag, sorted(rs)))
        for r, j in sorted(rs.items()):
            check(j.get("ok") is True, "%s rank %d: all_reduce and broadcast right (%d checks), no error%s" % (
                tag, r, j.get("checks", 0), (": " + j["error"]) if j.get("error") else ""))
            env = j.get("env", {})
            check(all("set to" not in str(v) for v in env.values()),
                  "%s rank %d: the launcher set the no-multicast variables %s" % (tag, r, env))
        runs[tag] = rs

    agent = load_json(os.path.join(out, "b.agent.json"))
    kernels, s = load_trace(os.path.join(out, "b.trace.jsonl"))
    names = collections.defaultdict(collections.Counter)
    graph_nccl = collections.Counter()
    devs = collections.defaultdict(set)
    for k in kernels:
        names[k["pid"]][k["kernel"]] += 1
        devs[k["pid"]].add(k["device"])
        if "nccl" in k["kernel"].lower() and "graph" in str(k.get("api", "")).lower():
            graph_nccl[k["pid"]] += 1
    for r, j in sorted(runs.get("agent", {}).items()):
        pid = j["pid"]
        who = "rank %d (pid %d, device %s)" % (r, pid, j.get("device"))
        p = agent.get("pids", {}).get(str(pid))
        if not check(p is not None, "%s: in the agent's summary" % who):
            continue
        judge_agent_process(p, who)
        nccl = sorted(n for n in names[pid] if "nccl" in n.lower())
        check(bool(nccl), "%s: NCCL kernels among its matched kernels (%d kernel names, %d NCCL)"
              % (who, len(names[pid]), len(nccl)))
        check(devs[pid] <= {j.get("device")}, "%s: its kernels on its own device only (%s)" % (who, sorted(devs[pid])))
        print("    %s: correlations %s %s, kernel records %s, matched %s, graph kernels matched %s; "
              "NCCL kernels matched %d (in graph launches %d): %s" % (
                  who, p.get("correlations"), p.get("correlations_by_cbid"), p.get("kernel_records"),
                  p.get("matched"), p.get("graph_kernels_matched"),
                  sum(names[pid][n] for n in nccl), graph_nccl[pid], ", ".join(short(n, 60) for n in nccl[:6])))
        if not graph_nccl[pid]:
            print("    NOTE %s: no NCCL kernel matched under a graph launch" % who)
    print("  trace: orphan kernels %s, ring-buffer drops %s, read errors %s" % (
        s.get("orphan_kernels"), s.get("ringbuf_drops"), s.get("read_errors")))

    print()
    print("  %-6s %-5s %8s %8s %11s %11s %7s %10s %10s %7s" % (
        "phase", "rank", "steps_n", "steps_a", "median_none", "median_agt", "ratio", "p99_none",
        "p99_agent", "ratio"))
    for phase in ("eager", "graph"):
        for r in (0, 1):
            a = runs.get("none", {}).get(r, {}).get("phases", {}).get(phase, {})
            b = runs.get("agent", {}).get(r, {}).get("phases", {}).get(phase, {})
            ratio = lambda k: ("%.3f" % (b[k] / a[k])) if a.get(k) and b.get(k) else "-"
            print("  %-6s %-5d %8s %8s %11s %11s %7s %10s %10s %7s" % (
                phase, r, a.get("steps", "-"), b.get("steps", "-"), a.get("median_us", "-"),
                b.get("median_us", "-"), ratio("median_us"), a.get("p99_us", "-"),
                b.get("p99_us", "-"), ratio("p99_us")))
    print("  (step times in us; ratio = agent / none)")


{"a": part_a, "b": part_b}[mode]()
verdict = "PASS" if not fails else "FAIL (%s)" % "; ".join(fails)
print("PART_%s %s" % (mode.upper(), verdict))
with open(os.path.join(out, "%s.verdict" % mode), "w") as f:
    f.write("\n".join(fails) + ("\n" if fails else ""))
sys.exit(1 if fails else 0)
PY

judge() {  # PART
  say "[$1] judge: python3 $OUT/judge.py $1 $OUT"
  EXPECT_CBIDS="$EXPECT_CBIDS" python3 "$OUT/judge.py" "$1" "$OUT" 2>&1 | tee "$OUT/$1.judge.txt"
  if [ ! -s "$OUT/$1.verdict" ] && grep -q "^PART_${1^^} PASS" "$OUT/$1.judge.txt"; then
    return 0
  fi
  if [ -s "$OUT/$1.verdict" ]; then
    while IFS= read -r l; do FAILS+=("$1: $l"); done <"$OUT/$1.verdict"
  else
    fail "$1: the judge did not finish"
  fi
}

# ---- part a ----
part_a() {
  say "==== part a: two_gpu under the library, agent-consumer + parcagpu-trace --pc ===="
  rm -f "$OUT"/a.*
  local bin="$TWO_GPU_BIN"
  if [ -z "$bin" ]; then
    bin="$OUT/two_gpu"
    if ! run a-build "$NVCC" -O2 -std=c++17 -arch=sm_90 -lineinfo -o "$bin" \
        "$ROOT/tests/gpu/two_gpu.cu" -lcuda >"$OUT/a.nvcc.log" 2>&1; then
      cat "$OUT/a.nvcc.log"
      fail "a: nvcc failed"
      return
    fi
  fi
  start_consumers a
  # shellcheck disable=SC2086
  run a-app env CUDA_INJECTION64_PATH="$LIB" ${MG_DEBUG:+PARCAGPU_DEBUG=1} timeout -k 10 $((TWO_GPU_SECONDS + 120)) \
    "$bin" "$TWO_GPU_SECONDS" $TWO_GPU_ARGS >"$OUT/a.app.out" 2>"$OUT/a.app.err"
  local rc=$?
  [ "$rc" -eq 0 ] || fail "a: two_gpu exit $rc ($(tail -c 300 "$OUT/a.app.err"))"
  cat "$OUT/a.app.out"
  stop_consumers a
  judge a
}

# ---- part b ----
torch_run() {  # TAG
  local tag="$1"
  run "b-$tag" timeout -k 15 "$TORCH_TIMEOUT_S" "$TORCHRUN" --standalone --nproc_per_node=2 \
    "$ROOT/tools/bench/nccl_step.py" --eager-seconds "$NCCL_EAGER_S" --graph-seconds "$NCCL_GRAPH_S" \
    --capture-mode "$NCCL_CAPTURE_MODE" \
    >"$OUT/b.$tag.out" 2>"$OUT/b.$tag.err"
  local rc=$?
  echo "$rc" >"$OUT/b.$tag.rc"
  grep -h '"rank"\|HANG' "$OUT/b.$tag.out" | tee -a "$LOG"
  [ "$rc" -eq 0 ] || { say "b-$tag stderr tail:"; tail -n 30 "$OUT/b.$tag.err"; }
}
part_b() {
  say "==== part b: torchrun 2 ranks, NCCL, eager + CUDA graph; none, then agent ===="
  rm -f "$OUT"/b.*
  [ -x "$TORCHRUN" ] || { fail "b: no torchrun at $TORCHRUN"; return; }
  torch_run none
  start_consumers b
  CUDA_INJECTION64_PATH="$LIB" torch_run agent
  stop_consumers b
  judge b
}

T0=$(date +%s)
for p in $PARTS; do
  case "$p" in
    a) part_a ;;
    b) part_b ;;
    *) fail "unknown part $p" ;;
  esac
done
say "took $(($(date +%s) - T0)) s; files in $OUT"
if [ ${#FAILS[@]} -eq 0 ]; then
  echo "MULTIGPU PASS" | tee -a "$LOG"
  exit 0
fi
reasons=$(printf '%s; ' "${FAILS[@]}")
echo "MULTIGPU FAIL (${reasons%; })" | tee -a "$LOG"
exit 1
