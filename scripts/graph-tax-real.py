#!/usr/bin/env python3
"""What sampling graph kernels costs on real graphs (issue 28 item 3, docs/pc-sampling.md P21): a
graph first launched while PC sampling is enabled stays dearer to launch for good. For each graph
of tools/bench/graph_tax.py (step, block, decode), three long-lived workers on one GPU, interleaved:
  none          no injection
  agent         the library at its defaults with tools/agent's consumer (graphs kept out of PC
                sampling: PARCAGPU_PC_GRAPHS=0)
  agent-graphs  the same with PARCAGPU_PC_GRAPHS=1: the graph's first launch (its upload) may come
                while PC sampling is enabled, so its kernels give PC samples
With --compare shadows, agent-graphs is instead the library with PARCAGPU_PC_GRAPH_SHADOWS=1 (each
graph's kernels registered through an exec of the library's own, docs/pc-sampling.md P32, P33)
against agent with it 0: what the registration costs the application's replays.
agent-graphs starts first and alone, so that its first replay finds the GPU's PC-sampling lock
free; each variant maps its own copy of the library and has its own consumer.

Per graph it prints: kernels per replay (torch.profiler in the none worker), GPU us per replay
(CUDA events), the median CPU time of the replay call (launch_us) and of replay + synchronize
(step_us) per variant, the tax (agent-graphs' launch_us minus agent's) and the tax as a share of
the replay's GPU time, the library's "graphs first launched while enabled" and "non-user samples" (samples
CUPTI did not attribute: graph kernels kept out) and the consumer's PC records per variant.

Usage: graph-tax-real.py [--graphs "step block decode"] [--rounds 5] [--seconds 3] [--out DIR]
                         [--python PY] [--lib LIB] [--agent AGENT] [--compare graphs|shadows]
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from agent_json import AgentTotals

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = ("agent-graphs", "agent", "none")  # start order


def start_consumer(agent, lib, out, name):
    out_f = open(os.path.join(out, name + ".json"), "w")
    err_f = open(os.path.join(out, name + "-consumer.err"), "w+")
    proc = subprocess.Popen([agent, "-l", lib], stdout=out_f, stderr=err_f)
    deadline = time.time() + 60
    while "attached" not in os.pread(err_f.fileno(), 1 << 16, 0).decode(errors="replace"):
        if proc.poll() is not None or time.time() > deadline:
            sys.exit("agent-consumer did not attach (see %s/%s-consumer.err)" % (out, name))
        time.sleep(0.1)
    return proc, out_f


def one_graph(a, kind, tmp):
    base = {k: v for k, v in os.environ.items()
            if not k.startswith("PARCAGPU_") and k != "CUDA_INJECTION64_PATH"}
    envs, consumers = {}, []
    for v in VARIANTS:
        if v == "none":
            envs[v] = dict(base)
            continue
        lib = os.path.join(tmp, "libparcagpu-%s-%s.so" % (kind, v))
        shutil.copy(a.lib, lib)
        b_on = v == "agent-graphs"
        envs[v] = dict(base, CUDA_INJECTION64_PATH=lib, PARCAGPU_DEBUG="1",
                       PARCAGPU_PC_GRAPHS="1" if b_on and a.compare == "graphs" else "0",
                       PARCAGPU_PC_GRAPH_SHADOWS="1" if b_on and a.compare == "shadows" else "0")
        consumers.append((v, *start_consumer(a.agent, lib, a.out, "%s-%s" % (kind, v))))
    workers = {}
    for v in VARIANTS:  # one at a time: agent-graphs' upload first, with the GPU's lock free
        w = subprocess.Popen([a.python, os.path.join(ROOT, "tools/bench/graph_tax.py"), "--graph", kind],
                             env=envs[v], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             stderr=open(os.path.join(a.out, "%s-%s.err" % (kind, v)), "w"))
        line = w.stdout.readline()
        if not line or not json.loads(line).get("ready"):
            sys.exit("worker %s/%s did not start (see %s)" % (kind, v, a.out))
        workers[v] = w

    def ask(v, cmd, arg):
        workers[v].stdin.write("%s %s\n" % (cmd, arg))
        workers[v].stdin.flush()
        return json.loads(workers[v].stdout.readline())["us"]

    kernels = ask("none", "count", 0)
    for v in VARIANTS:
        ask(v, "step", a.seconds)  # warm-up, unmeasured
    launch = {v: [] for v in VARIANTS}
    step = {v: [] for v in VARIANTS}
    gpu = {v: [] for v in VARIANTS}
    for r in range(a.rounds):
        order = VARIANTS[r % 3:] + VARIANTS[:r % 3]
        for v in order:
            launch[v].append(statistics.median(ask(v, "launch", a.seconds)))
            step[v].append(statistics.median(ask(v, "step", a.seconds)))
            gpu[v].append(ask(v, "gpu", 200))
    for w in workers.values():
        w.stdin.write("quit\n")
        w.stdin.flush()
        w.wait(timeout=120)
    time.sleep(1)
    pc = {}
    for v, proc, out_f in consumers:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        out_f.close()
        tot = AgentTotals(os.path.join(a.out, "%s-%s.json" % (kind, v)))
        pc[v] = "%d (%s)" % (tot.pc_records, tot.ids)
    uploaded = {}
    for v in VARIANTS[:2]:
        err = open(os.path.join(a.out, "%s-%s.err" % (kind, v))).read()
        got = [re.search(r"%s=(\d+)" % k, err) for k in (
            "graphs first launched while enabled", "graphs registered", "non-user samples")]
        uploaded[v] = "/".join(m.group(1) if m else "?" for m in got)
    med = {k: {v: statistics.median(x[v]) for v in VARIANTS}
           for k, x in (("launch", launch), ("step", step), ("gpu", gpu))}
    tax = med["launch"]["agent-graphs"] - med["launch"]["agent"]
    lines = ["## %s: %.0f kernels per replay, GPU %.1f us per replay (none)" % (
        kind, kernels, med["gpu"]["none"])]
    lines.append("%-13s %10s %10s %8s %10s %8s %16s  %s" % (
        "variant", "launch_us", "x_none", "step_us", "x_none", "gpu_us", "upl/reg/nonuser",
        "consumer's PC records (IDs)"))
    for v in VARIANTS:
        lines.append("%-13s %10.1f %10.3f %8.1f %10.3f %8.1f %16s  %s" % (
            v, med["launch"][v], med["launch"][v] / med["launch"]["none"], med["step"][v],
            med["step"][v] / med["step"]["none"], med["gpu"][v], uploaded.get(v, "-"),
            pc.get(v, "-")))
    lines.append("tax per launch (agent-graphs - agent launch_us): %.2f us = %.2f%% of the replay's "
                 "GPU time; %.4f us per kernel; step x agent %.3f" % (
                     tax, 100 * tax / med["gpu"]["none"], tax / max(kernels, 1),
                     med["step"]["agent-graphs"] / med["step"]["agent"]))
    lines.append("per-round launch_us: " + "; ".join(
        "%s %s" % (v, " ".join("%.1f" % x for x in launch[v])) for v in VARIANTS))
    lines.append("per-round step_us: " + "; ".join(
        "%s %s" % (v, " ".join("%.1f" % x for x in step[v])) for v in VARIANTS))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--python", default="/opt/torch/.venv/bin/python")
    ap.add_argument("--lib", default=os.path.join(ROOT, "build/lib/libparcagpu.so"))
    ap.add_argument("--agent", default=os.path.join(ROOT, "build/bin/agent-consumer"))
    ap.add_argument("--graphs", default="step block decode")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--out", default="/tmp/parcagpu-graph-tax")
    ap.add_argument("--compare", choices=("graphs", "shadows"), default="graphs")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="parcagpu-tax-")
    text = ["rounds %d x %g s per measure, interleaved; agent-graphs: %s" % (
        a.rounds, a.seconds, "PARCAGPU_PC_GRAPHS=1" if a.compare == "graphs"
        else "PARCAGPU_PC_GRAPH_SHADOWS=1")]
    for kind in a.graphs.split():
        text.append(one_graph(a, kind, tmp))
        print(text[-1], flush=True)
    shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(a.out, "summary.txt"), "w") as f:
        f.write("\n".join(text) + "\n")


if __name__ == "__main__":
    main()
