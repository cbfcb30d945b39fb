#!/usr/bin/env python3
"""The verdicts of scripts/one-coin-real.sh from the files it left in OUT (argv[1]) for the
programs named after it: GPU time by kernel from parcagpu-trace --json-lines (kernel lines) against
torch.profiler's (PROGRAM.kineto.json), and for programs that replay graphs the graph side's share.
Exit 0 when every verdict holds, 1 otherwise."""
import json
import os
import sys

BOUND = 3.0  # points


def kernel_lines(path):
    for line in open(path):
        if line.startswith('{"type":"kernel"') or '"type": "kernel"' in line[:40]:
            yield json.loads(line)
        elif line.startswith("{"):
            j = json.loads(line)
            if j.get("type") == "kernel":
                yield j


def shares(g):
    t = sum(g.values()) or 1
    return {k: v / t for k, v in g.items()}


out, programs = sys.argv[1], sys.argv[2:]
ok = True
for p in programs:
    kin = json.load(open(os.path.join(out, p + ".kineto.json")))
    truth = {k: v for k, v in kin["gpu_ns_by_kernel"].items()
             if not k.startswith(("Memcpy", "Memset"))}
    lib, lib_graph, impossible, announced = {}, 0, 0, set()
    for k in kernel_lines(os.path.join(out, p + ".lines")):
        name = k.get("demangled") or k["kernel"]
        lib[name] = lib.get(name, 0) + k["gpu_ns"]
        if "GraphLaunch" in (k.get("api") or ""):
            lib_graph += k["gpu_ns"]
        impossible += "impossible" in k
        announced.add((k["pid"], k["correlation_id"]))
    ks, ls = shares(truth), shares(lib)
    names = sorted(set(ks) | set(ls), key=lambda n: -(ks.get(n, 0) + ls.get(n, 0)))
    print("\n%s: %d launches announced, %d kernel records, %d impossible" % (
        p, len(announced), sum(1 for _ in kernel_lines(os.path.join(out, p + ".lines"))),
        impossible))
    print("  %-90s %8s %8s" % ("kernel", "kineto", "library"))
    for n in names:
        if ks.get(n, 0) < 0.005 and ls.get(n, 0) < 0.005:
            continue
        print("  %-90s %7.1f%% %7.1f%%" % (n[:90], 100 * ks.get(n, 0), 100 * ls.get(n, 0)))
    tv = 100 * sum(abs(ks.get(n, 0) - ls.get(n, 0)) for n in names) / 2
    good = tv <= BOUND
    ok &= good
    print("  total variation: %.1f points (bound %.0f)%s" % (tv, BOUND, "" if good else "  <-- FAIL"))
    unmatched = sum(v for n, v in ks.items() if n not in ls)
    print("  kineto's GPU time under names the library never reported: %.1f%%" % (100 * unmatched))
    if kin.get("graph_gpu_ns"):
        total = sum(kin["gpu_ns_by_kernel"].values()) or 1
        kg = 100 * kin["graph_gpu_ns"] / total
        lg = 100 * lib_graph / (sum(lib.values()) or 1)
        good = abs(kg - lg) <= BOUND
        if p != "block-graph":  # all of it is graph there: nothing to weigh
            ok &= good
        print("  graph side: kineto %.1f%%, library %.1f%%%s" % (kg, lg, "" if good else "  <-- FAIL"))
print("\nverdict: %s" % ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
