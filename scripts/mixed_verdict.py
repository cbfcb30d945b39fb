#!/usr/bin/env python3
"""The verdicts of scripts/mixed-real.sh from the files it left in OUT (argv[1]): a-all/a-default
(tests/gpu/mixed_gpu_time.cu) and b-kineto/b-default (tools/bench/torch_mixed.py). Exit 0 when every
verdict holds, 1 otherwise."""
import json
import os
import sys

from trace_json import gpu_ns_by_kernel, last_json

out = sys.argv[1]
ok = True


def trace_by_kernel(path):
    """GPU ns by kernel name from parcagpu-trace --json, and the summary."""
    j = last_json(path)
    return gpu_ns_by_kernel(j), j


def problems_of(j, agent):
    """Impossible records and losses as the consumer counts them: every numeric field whose name
    says so, nonzero."""
    found = {}

    def walk(prefix, v):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(prefix + "." + k if prefix else k, x)
        elif isinstance(v, (int, float)) and v:
            leaf = prefix.rsplit(".", 1)[-1]
            if any(w in leaf for w in ("impossible", "invalid", "orphan", "drop", "lost",
                                       "read_failures", "abandoned", "over_cap")):
                found[prefix] = v
    walk("", j if not agent else {"pids": j.get("pids", {})})
    return found


def agent_cbids(j):
    by = {}
    for p in j["pids"].values():
        for k, v in p["correlations_by_cbid"].items():
            by[int(k)] = by.get(int(k), 0) + v
    return by


def shares(g):
    t = sum(g.values()) or 1
    return {k: v / t for k, v in g.items()}


# ---- a) ----
launched = None
for l in open(os.path.join(out, "a-default.program")):
    if l.startswith("MIXED_GPU "):
        launched = {int(k): v for k, v in json.loads(l.split(" ", 1)[1]).items() if k != "steps"}
side = lambda name: "eager" if name.startswith("eager_") else "graph"
print("a) eager kernels and a graph of other kernels, equal GPU time on each side")
truth_g, _ = trace_by_kernel(os.path.join(out, "a-all.trace.json"))
dflt_g, dflt_j = trace_by_kernel(os.path.join(out, "a-default.trace.json"))
for label, g in (("every launch announced", truth_g), ("default rates", dflt_g)):
    s = {}
    for k, v in shares(g).items():
        s[side(k)] = s.get(side(k), 0) + v
    print("  %-24s eager %5.1f%%  graph %5.1f%%   by kernel: %s" % (
        label, 100 * s.get("eager", 0), 100 * s.get("graph", 0),
        ", ".join("%s %.1f%%" % (k.split("(")[0], 100 * v) for k, v in sorted(shares(g).items()))))
    if label == "default rates":
        truth_side = {}
        for k, v in shares(truth_g).items():
            truth_side[side(k)] = truth_side.get(side(k), 0) + v
        for sd in ("eager", "graph"):
            good = abs(s.get(sd, 0) - truth_side.get(sd, 0)) < 0.05
            ok &= good
            if not good:
                print("  FAIL: %s side %.1f%% against %.1f%%" % (sd, 100 * s.get(sd, 0),
                                                               100 * truth_side.get(sd, 0)))
agent_a = last_json(os.path.join(out, "a-default.agent.json"))
by = agent_cbids(agent_a)
overall = sum(by.get(c, 0) for c in launched) / sum(launched.values())
print("  agent's probe set, default rates: cbid, announced / launched, fraction, x overall")
for c in sorted(launched):
    f = by.get(c, 0) / launched[c]
    ratio = f / overall if overall else 0
    good = 0.67 <= ratio <= 1.5
    ok &= good
    print("    %5d %6d / %7d  %.5f  x%.2f%s" % (c, by.get(c, 0), launched[c], f, ratio,
                                                "" if good else "  <-- FAIL"))
for name, j, agent in (("agent", agent_a, True), ("trace", dflt_j, False)):
    print("  %s counted: %s" % (name, problems_of(j, agent) or "no impossible records, no losses"))

# ---- b) ----
print("\nb) PyTorch: an eager training step and 4 graph replays per iteration")
kin = json.load(open(os.path.join(out, "b-kineto.json")))["gpu_ns_by_kernel"]
kin = {k: v for k, v in kin.items() if not k.startswith(("Memcpy", "Memset"))}
lib_g, lib_j = trace_by_kernel(os.path.join(out, "b-default.trace.json"))
ks, ls = shares(kin), shares(lib_g)
names = sorted(set(ks) | set(ls), key=lambda n: -(ks.get(n, 0) + ls.get(n, 0)))
print("  %-90s %8s %8s" % ("kernel", "kineto", "library"))
for n in names:
    if ks.get(n, 0) < 0.002 and ls.get(n, 0) < 0.002:
        continue
    print("  %-90s %7.1f%% %7.1f%%" % (n[:90], 100 * ks.get(n, 0), 100 * ls.get(n, 0)))
diff = sum(abs(ks.get(n, 0) - ls.get(n, 0)) for n in names) / 2
good = diff < 0.10
ok &= good
print("  half the sum of absolute differences: %.1f points%s" % (100 * diff, "" if good else "  <-- FAIL"))
unmatched = sum(v for n, v in ks.items() if n not in ls)
print("  kineto's GPU time under names the library never reported: %.1f%%" % (100 * unmatched))
agent_b = last_json(os.path.join(out, "b-default.agent.json"))
for name, j, agent in (("agent", agent_b, True), ("trace", lib_j, False)):
    print("  %s counted: %s" % (name, problems_of(j, agent) or "no impossible records, no losses"))
print("\nverdict: %s" % ("PASS" if ok else "FAIL"))
sys.exit(0 if ok else 1)
