#!/usr/bin/env python3
"""The verdicts of scripts/one-coin-real.sh from the files it left in OUT (argv[1]) for the
programs named after it: GPU time by kernel from parcagpu-trace --json-lines (kernel lines) against
torch.profiler's (PROGRAM.kineto.json), and for programs that replay graphs the graph side's share.
Exit 0 when every verdict holds, 1 otherwise."""
import glob
import gzip
import json
import os
import random
import sys

BOUND = 3.0  # points


def kernel_lines(path):
    for line in (gzip.open(path, "rt") if path.endswith(".gz") else open(path)):
        if line.startswith('{"type":"kernel"') or '"type": "kernel"' in line[:40]:
            yield json.loads(line)
        elif line.startswith("{"):
            j = json.loads(line)
            if j.get("type") == "kernel":
                yield j


def by_kernel(launches):
    g = {}
    for ks in launches:
        for k in ks:
            name = k.get("demangled") or k["kernel"]
            g[name] = g.get(name, 0) + k["gpu_ns"]
    return g


def tv_points(a, b):
    sa, sb = shares(a), shares(b)
    return 100 * sum(abs(sa.get(n, 0) - sb.get(n, 0)) for n in set(sa) | set(sb)) / 2


def noise_points(launches, rounds=100):
    """The sampling noise of a sample this size: the median total variation between two random
    halves of the announced launches, halved (each half has half the launches, and two halves
    differ by the noise of both: about twice the whole sample's)."""
    rng = random.Random(1)
    launches = list(launches)
    tvs = []
    for _ in range(rounds):
        rng.shuffle(launches)
        h = len(launches) // 2
        tvs.append(tv_points(by_kernel(launches[:h]), by_kernel(launches[h:])))
    tvs.sort()
    return tvs[len(tvs) // 2] / 2


def shares(g):
    t = sum(g.values()) or 1
    return {k: v / t for k, v in g.items()}


out, programs = sys.argv[1], sys.argv[2:]
ok = True
for p in programs:
    kin = json.load(open(os.path.join(out, p + ".kineto.json")))
    # Kernels only: not copies, nor the GPU spans of user annotations (Optimizer.step#...), which
    # torch.profiler lists among the GPU events when it records the CPU too.
    truth = {k: v for k, v in kin["gpu_ns_by_kernel"].items()
             if not k.startswith(("Memcpy", "Memset")) and not ("#" in k and "(" not in k)}
    lib, lib_graph, impossible, launches, records = {}, 0, 0, {}, 0
    files = sorted(f for f in glob.glob(os.path.join(out, p + ".lines*"))  # runs, pooled
                   if not (f.endswith(".gz") and os.path.exists(f[:-3])))
    for path in files:
        for k in kernel_lines(path):
            name = k.get("demangled") or k["kernel"]
            lib[name] = lib.get(name, 0) + k["gpu_ns"]
            if "GraphLaunch" in (k.get("api") or ""):
                lib_graph += k["gpu_ns"]
            impossible += "impossible" in k
            records += 1
            launches.setdefault((path, k["pid"], k["correlation_id"]), []).append(k)
    ks, ls = shares(truth), shares(lib)
    names = sorted(set(ks) | set(ls), key=lambda n: -(ks.get(n, 0) + ls.get(n, 0)))
    print("\n%s: %d run(s), %d launches announced, %d kernel records, %d impossible" % (
        p, len(files), len(launches), records, impossible))
    print("  %-90s %8s %8s" % ("kernel", "kineto", "library"))
    for n in names:
        if ks.get(n, 0) < 0.005 and ls.get(n, 0) < 0.005:
            continue
        print("  %-90s %7.1f%% %7.1f%%" % (n[:90], 100 * ks.get(n, 0), 100 * ls.get(n, 0)))
    tv = 100 * sum(abs(ks.get(n, 0) - ls.get(n, 0)) for n in names) / 2
    good = tv <= BOUND
    ok &= good
    print("  total variation: %.1f points (bound %.0f)%s; the sample's own noise: ~%.1f points" % (
        tv, BOUND, "" if good else "  <-- FAIL", noise_points(launches.values())))
    unmatched = sum(v for n, v in ks.items() if n not in ls)
    print("  kineto's GPU time under names the library never reported: %.1f%%" % (100 * unmatched))
    if kin.get("graph_gpu_ns"):
        total = sum(truth.values()) or 1
        kg = 100 * kin["graph_gpu_ns"] / total
        lg = 100 * lib_graph / (sum(lib.values()) or 1)
        good = abs(kg - lg) <= BOUND
        if p != "block-graph":  # all of it is graph there: nothing to weigh
            ok &= good
        print("  graph side: kineto %.1f%%, library %.1f%%%s" % (kg, lg, "" if good else "  <-- FAIL"))
print("\nverdict: %s" % ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
