#!/usr/bin/env python3
"""PyTorch step benchmark (issue 17): a small launch-bound MLP training step, eager and CUDA-graph
replay, under three variants run interleaved:
  none    no injection
  nocons  CUDA_INJECTION64_PATH=libparcagpu.so, nobody attached
  agent   the library at its defaults (PC sampling on) with tools/agent's consumer attached: the
          production agent's exact probe set
One long-lived worker per variant (tools/bench/torch_step.py --worker), so Python and CUDA start-up is
paid once; the driver interleaves them (one on the GPU at a time), rotating the order each round.
Then an overlap check: two streams of ~1 ms kernels per step in each variant.

Prints per variant and mode the median of the per-round medians (us/step), its ratio to none's,
the p99 over every step and its ratio to none's, the overlap step time, what the agent consumer
got, and the targets (agent graph-replay step <= 1.05; p99 <= 1.2x none; overlap <= 1.2x none).

  agentbase  with --base-lib: the agent variant for another build (before/after in one run)
  agent-nvtx the agent variant with NVTX_INJECTION64_PATH set to the library (NVTX calls reach
          CUPTI; the agent does not read nvtx_event_batch, so the library collects no range)
  trace      the library with parcagpu-trace attached (--trace, --trace-args): what a user running
          our own consumer pays, e.g. with copies and NVTX ranges collected; NVTX_INJECTION64_PATH
          set
  agent-nopc the agent variant with PARCAGPU_PC_SAMPLING=0: what PC sampling adds
  agent-first the agent variant with PARCAGPU_PC_SAMPLING_RATE=0.001: the sample credit is never
          regained, so only the process's first (learning) episodes run: whether a cost lasts
          after them or comes with each later episode
  floor-*    with --floor-lib (tools/bench/cupti_floor.cc, built by bench-gpu-overhead.sh): an empty
          CUPTI subscriber (its callback does nothing), the floor under nocons, enabling
            floor-sub        nothing (subscribed only)
            floor-res        the graph-resource cbids (resource domain 13, 18, 19, 20)
            floor-start-api  the driver and runtime cbids parcagpu enables from the start
                             (graph instantiations, uploads, captures)
            floor-start      every cbid parcagpu enables from the start (the two above, modules
                             and contexts)
            floor-launch     every cbid of the table, launches included
--cupti PATH: the libcupti the floor variants load (PARCAGPU_CUPTI_PATH; default: the loader's
          libcupti.so), to compare with the one parcagpu finds (PARCAGPU_DEBUG says which)

Usage: bench-torch-step.py [--python PY] [--lib LIB] [--agent AGENT] [--rounds 7]
                           [--seconds 4] [--out DIR] [--base-lib LIB] [--debug]
                           [--variants "none nocons agent agent-nopc agent-first"]
                           [--modes "eager graph"] (of eager, graph, data: tools/bench/torch_step.py)
                           [--trace TRACE --trace-args "ARGS"] (the trace variant)
                           [--floor-lib LIB --cupti PATH] (the floor-* variants)
--warmup S: before round 1 every worker runs S/2 seconds of each mode, unmeasured: the first
episode (PC sampling kept enabled while kernels are used for the first time, docs/pc-sampling.md
"First uses") is a start-up cost, reported apart from the steady state (the agent worker's
PARCAGPU_DEBUG log says how long it lasted).
--debug sets PARCAGPU_DEBUG=1 in the agent variants: the library's totals at exit (episodes,
time enabled, Disable, windows) land in OUT/agent.err and OUT/agentbase.err.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from agent_json import AgentTotals

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--python", default="/opt/torch/.venv/bin/python")
    ap.add_argument("--lib", default=os.path.join(ROOT, "build/lib/libparcagpu.so"))
    ap.add_argument("--agent", default=os.path.join(ROOT, "build/bin/agent-consumer"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--out", default="/tmp/parcagpu-torch-step")
    ap.add_argument("--base-lib", default=None)
    ap.add_argument("--debug", action="store_true")
    ap.add_argument("--warmup", type=float, default=0)
    ap.add_argument("--floor-lib", default=None)
    ap.add_argument("--cupti", default=None)
    ap.add_argument("--modes", default="eager graph")
    ap.add_argument("--trace", default=os.path.join(ROOT, "build/bin/parcagpu-trace"))
    ap.add_argument("--trace-args", default="")
    ap.add_argument("--variants", default="none nocons agent",
                    help="of none, nocons, agent, agent-nopc, agent-first, floor-sub, "
                         "floor-res, floor-start-api, floor-start, floor-launch (none and agent "
                         "always run)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="parcagpu-torch-")
    # The agent attaches by file: the agent variant maps a copy, so nocons has no consumer.
    agent_lib = os.path.join(tmp, "libparcagpu-agent.so")
    shutil.copy(a.lib, agent_lib)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("PARCAGPU_") and k not in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH")}
    dbg = {"PARCAGPU_DEBUG": "1"} if a.debug else {}
    envs = {"none": dict(base), "nocons": dict(base, CUDA_INJECTION64_PATH=os.path.abspath(a.lib)),
            "agent": dict(base, CUDA_INJECTION64_PATH=agent_lib, **dbg)}
    wanted = set(a.variants.split()) | {"none", "agent"}
    envs = {v: e for v, e in envs.items() if v in wanted}
    libs = {"agent": agent_lib}
    # Variants of the agent one with other settings: each maps its own copy, with its consumer.
    for v, extra in (("agent-nopc", {"PARCAGPU_PC_SAMPLING": "0"}),
                     ("agent-nvtx", {"NVTX_INJECTION64_PATH": "@LIB@"}),
                     ("agent-first", {"PARCAGPU_PC_SAMPLING_RATE": "0.001"})):
        if v in wanted:
            libs[v] = os.path.join(tmp, "libparcagpu-%s.so" % v)
            shutil.copy(a.lib, libs[v])
            extra = {k: (libs[v] if x == "@LIB@" else x) for k, x in extra.items()}
            envs[v] = dict(base, CUDA_INJECTION64_PATH=libs[v], **dbg, **extra)
    if "trace" in wanted:
        libs["trace"] = os.path.join(tmp, "libparcagpu-trace.so")
        shutil.copy(a.lib, libs["trace"])
        envs["trace"] = dict(base, CUDA_INJECTION64_PATH=libs["trace"],
                             NVTX_INJECTION64_PATH=libs["trace"], **dbg)
    floors = {"floor-sub": {"CUPTI_FLOOR": "subscribe"},
              "floor-res": {"CUPTI_FLOOR": "resource"},
              "floor-start-api": {"CUPTI_FLOOR": "from-start", "CUPTI_FLOOR_DOMAIN": "api"},
              "floor-start": {"CUPTI_FLOOR": "from-start"},
              "floor-launch": {"CUPTI_FLOOR": "launch"}}
    for v, floor_env in floors.items():
        if v in wanted:
            if not a.floor_lib:
                sys.exit("variant %s needs --floor-lib" % v)
            envs[v] = dict(base, CUDA_INJECTION64_PATH=os.path.abspath(a.floor_lib), **floor_env,
                           **({"PARCAGPU_CUPTI_PATH": a.cupti} if a.cupti else {}))
    if a.base_lib:
        libs["agentbase"] = os.path.join(tmp, "libparcagpu-agentbase.so")
        shutil.copy(a.base_lib, libs["agentbase"])
        envs["agentbase"] = dict(base, CUDA_INJECTION64_PATH=libs["agentbase"], **dbg)
    consumers = []
    for v, lib in libs.items():
        out_f = open(os.path.join(a.out, v + ".json"), "w")
        err_f = open(os.path.join(a.out, v + "-consumer.err"), "w+")
        cmd = ([a.trace, "-l", lib] + a.trace_args.split() if v == "trace"
               else [a.agent, "-l", lib])
        proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f)
        consumers.append((v, proc, out_f, err_f))
        deadline = time.time() + 60
        while True:
            if "attached" in os.pread(err_f.fileno(), 1 << 16, 0).decode(errors="replace"):
                break
            if proc.poll() is not None or time.time() > deadline:
                sys.exit("the consumer did not attach (see %s/%s-consumer.err)" % (a.out, v))
            time.sleep(0.1)
    workers = {}
    for v, env in envs.items():
        workers[v] = subprocess.Popen([a.python, os.path.join(ROOT, "tools/bench/torch_step.py"),
                                       "--worker"], env=env, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True,
                                      stderr=open(os.path.join(a.out, v + ".err"), "w"))
    for v, w in workers.items():
        line = w.stdout.readline()
        if not line or not json.loads(line).get("ready"):
            sys.exit("worker %s did not start (see %s/%s.err)" % (v, a.out, v))

    def run(v, mode, seconds):
        workers[v].stdin.write("%s %g\n" % (mode, seconds))
        workers[v].stdin.flush()
        return json.loads(workers[v].stdout.readline())["us"]

    names = list(workers)
    modes_all = tuple(a.modes.split())
    if a.warmup > 0:
        for v in names:
            for m in modes_all:
                run(v, m, a.warmup / 2)
        print("warm-up done (%g s per worker)" % a.warmup, file=sys.stderr, flush=True)
    medians = {(v, m): [] for v in names for m in modes_all}
    steps = {(v, m): [] for v in names for m in modes_all}
    for r in range(a.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        modes = modes_all if r % 2 == 0 else modes_all[::-1]
        for v in order:
            for m in modes:
                us = run(v, m, a.seconds)
                medians[(v, m)].append(statistics.median(us))
                steps[(v, m)] += us
        print("round %d/%d done" % (r + 1, a.rounds), file=sys.stderr, flush=True)
    overlap = {v: statistics.median(run(v, "overlap", 2)) for v in names}
    for w in workers.values():
        w.stdin.write("quit\n")
        w.stdin.flush()
        w.wait(timeout=60)
    time.sleep(1)
    for _, proc, out_f, _ in consumers:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        out_f.close()
    shutil.rmtree(tmp, ignore_errors=True)

    out = []
    out.append("rounds %d x %g s per mode, warm-up %g s per worker" % (a.rounds, a.seconds, a.warmup))
    # median_us: the median of the per-round medians (the steady state: a step slowed by an
    # episode hardly moves it). mean_us: every step's time averaged over all rounds, episodes
    # included (what a long job pays).
    out.append("%-15s %-6s %6s %10s %7s %10s %7s %10s %7s" % (
        "variant", "mode", "steps", "median_us", "x_none", "mean_us", "x_none", "p99_us", "x_none"))
    ratio, p99r, meanr = {}, {}, {}
    for m in modes_all:
        for v in names:
            med = statistics.median(medians[(v, m)])
            nmed = statistics.median(medians[("none", m)])
            p99 = pct(steps[(v, m)], 0.99)
            np99 = pct(steps[("none", m)], 0.99)
            mean = statistics.fmean(steps[(v, m)])
            nmean = statistics.fmean(steps[("none", m)])
            ratio[(v, m)], p99r[(v, m)], meanr[(v, m)] = med / nmed, p99 / np99, mean / nmean
            out.append("%-15s %-6s %6d %10.1f %7.3f %10.1f %7.3f %10.1f %7.3f" % (
                v, m, len(steps[(v, m)]), med, med / nmed, mean, mean / nmean, p99, p99 / np99))
    out.append("")
    out.append("per-round medians (us/step), in round order:")
    for m in modes_all:
        for v in names:
            out.append("  %-11s %-5s %s" % (v, m, " ".join("%.1f" % x for x in medians[(v, m)])))
    out.append("")
    out.append("overlap (two streams of ~1 ms kernels), median us/step: " +
               ", ".join("%s %.0f" % (v, overlap[v]) for v in names))
    for v in [v for v in libs if v != "trace"]:
      try:
        tot = AgentTotals(os.path.join(a.out, v + ".json"))
        out.append(v + " consumer: correlations %d, kernel records %d, matched %d, orphan kernels "
                   "%d, orphan launches %d/%d, PC records %d (correlation IDs %s), read failures "
                   "%d, ring-buffer drops %d" % (
                       tot("correlations"), tot("kernel_records"), tot("matched"),
                       tot("orphan_kernels"), tot("orphan_correlations_eager"),
                       tot("orphan_correlations_graph"),
                       tot.pc_records, tot.ids,
                       tot("read_failures"), tot("ringbuf_drops")))
      except (OSError, ValueError) as e:
        out.append("%s consumer: no summary (%s)" % (v, e))
    out.append("")
    out.append("targets:")
    checks = []
    if "graph" in modes_all:
        checks += [("agent graph-replay step", ratio[("agent", "graph")], 1.05),
                   ("agent graph-replay step, mean", meanr[("agent", "graph")], 1.05),
                   ("agent p99 graph step / none's", p99r[("agent", "graph")], 1.2)]
    if "eager" in modes_all:
        checks += [("agent eager step (no target; reported)", ratio[("agent", "eager")], None),
                   ("agent p99 eager step / none's", p99r[("agent", "eager")], 1.2)]
    for v in [v for v in names if v != "none"] if "data" in modes_all else []:
        checks.append(("%s data step (reported)" % v, ratio[(v, "data")], None))
    checks.append(("agent overlap step / none's", overlap["agent"] / overlap["none"], 1.2))
    for label, val, limit in checks:
        verdict = "" if limit is None else ("MET" if val <= limit else "NOT MET")
        out.append("  %-42s %6.3f %s %s" % (label, val, "" if limit is None else "<= %.2f" % limit,
                                            verdict))
    text = "\n".join(out)
    print(text)
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
