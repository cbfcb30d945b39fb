#!/usr/bin/env python3
"""The verdict of scripts/pc-coverage-real.sh from the files it left in OUT (argv[1]) for the
programs named after it: the kernels with >= 2% of the GPU time by torch.profiler
(PROGRAM.kineto.json), and which of them parcagpu-trace --pc's JSON (PROGRAM.json) names among its
sampled kernels (pc.kernels), by demangled name (Kineto's names are demangled); each missing one
with the tool's reason (pc.kernels_not_sampled). Also, from the tool's own kernel records, the
kernels with >= 2% of the GPU time it saw, the same way. Exit 0 when every hot kernel by
torch.profiler was sampled, 1 otherwise."""
import json
import os
import sys

HOT = 0.02


def name_of(k):
    return k.get("demangled") or k.get("function") or k.get("kernel")


def verdict(out, program):
    # Kernels only: not copies, nor the GPU spans of user annotations (Optimizer.step#...), which
    # torch.profiler lists among the GPU events when it records the CPU too.
    truth = {k: ns for k, ns in
             json.load(open(os.path.join(out, program + ".kineto.json")))["gpu_ns_by_kernel"].items()
             if not k.startswith(("Memcpy", "Memset")) and not ("#" in k and "(" not in k)}
    pc = json.load(open(os.path.join(out, program + ".json")))["pc"]
    sampled = {name_of(k) for k in pc["kernels"]}
    why = {name_of(m): "%s (%s)" % (m.get("reason", "?"), m.get("why", "")) for m in
           pc["kernels_not_sampled"]}
    total = sum(truth.values())
    hot = sorted(((ns / total, k) for k, ns in truth.items() if ns >= HOT * total), reverse=True)
    missing = [(s, k) for s, k in hot if k not in sampled]
    print("%s: %d of %d kernels with >= 2%% of the GPU time (torch.profiler) have PC samples" % (
        program, len(hot) - len(missing), len(hot)))
    for s, k in hot:
        state = "sampled" if k in sampled else "MISSING: " + why.get(k, "not named by the tool")
        print("  %5.1f%%  %-60.60s  %s" % (100 * s, k, state))
    return not missing


def main():
    out, programs = sys.argv[1], sys.argv[2:]
    ok = True
    for p in programs:
        try:
            ok &= verdict(out, p)
        except (OSError, KeyError, ValueError) as e:
            print("%s: cannot judge: %s" % (p, e))
            ok = False
    print("VERDICT: %s" % ("every hot kernel sampled" if ok else "hot kernels missing"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
