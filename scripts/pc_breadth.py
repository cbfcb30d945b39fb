#!/usr/bin/env python3
"""Issue 28: which kernels PC sampling covers. Reads parcagpu-trace --pc --json summaries (one per
run, named on the command line as LABEL=FILE; the first is the reference for stall-reason shares)
and prints, per kernel with at least 2% of the GPU time (GPU time from the run's own announced
launches' kernels), its share, its PC samples (under a CPU stack / GPU-only) and its top stall
reasons in each run, then per run: kernels >= 2% covered, and the largest stall-share difference
from the reference for kernels >= 5%.

  scripts/pc_breadth.py ref=dense.json default=default.json f17=f17.json
"""
import json
import sys

NAME_MAX = 127  # a consumer reads at most 128 bytes of a PC record's function name


def last_json(path):
    lines = [l for l in open(path).read().strip().splitlines() if l.startswith("{")]
    return json.loads(lines[-1]) if lines else {}


def load(path):
    j = last_json(path)
    gpu = {}
    # By device: every kernel (gpu_time_by_stack holds the top stacks only).
    for st in j.get("gpu_time_by_device", []):
        for k in st.get("by_kernel", []):
            gpu[k["kernel"][:NAME_MAX]] = gpu.get(k["kernel"][:NAME_MAX], 0) + k["gpu_ns"]
    pc = {}
    for k in j.get("pc", {}).get("kernels", []):
        e = pc.setdefault(k["function"][:NAME_MAX], {"samples": 0, "stack": 0, "gpu_only": 0,
                                                     "stalls": {}, "launches": 0})
        e["samples"] += k.get("samples", 0)
        e["launches"] += k.get("launches", 0)
        for what, n in k.get("by_launch", {}).items():
            if what in ("unannounced", "uncorrelated", "gpu_only"):
                e["gpu_only"] += n
            else:
                e["stack"] += n
        for s in k.get("stall_reasons", []):
            e["stalls"][s["name"]] = e["stalls"].get(s["name"], 0) + s["samples"]
    return gpu, pc, j


def stall_shares(e):
    t = sum(e["stalls"].values()) or 1
    return {k: v / t for k, v in e["stalls"].items()}


def main():
    runs = []
    for arg in sys.argv[1:]:
        label, path = arg.split("=", 1)
        runs.append((label,) + load(path))
    ref_label, ref_gpu, ref_pc, _ = runs[0]
    ok = True
    for label, gpu, pc, j in runs:
        total = sum(gpu.values()) or 1
        hot = [(n, v / total) for n, v in sorted(gpu.items(), key=lambda kv: -kv[1])
               if v / total >= 0.02]
        covered = [n for n, _ in hot if pc.get(n, {}).get("samples", 0) > 0]
        print("\n%s: %d announced launches; PC %s records; kernels >= 2%% of GPU time: %d, with "
              "PC samples: %d" % (label, j.get("correlations", 0),
                                  j.get("pc", {}).get("records", 0), len(hot), len(covered)))
        print("  %-70s %6s %9s %9s  %s" % ("kernel", "gpu%", "w/stack", "gpu-only",
                                           "top stall reasons (share)"))
        worst = 0.0
        for n, share in hot:
            e = pc.get(n, {"samples": 0, "stack": 0, "gpu_only": 0, "stalls": {}})
            ss = stall_shares(e)
            top = ", ".join("%s %.0f%%" % (k.replace("smsp__pcsamp_warps_issue_stalled_", ""),
                                           100 * v)
                            for k, v in sorted(ss.items(), key=lambda kv: -kv[1])[:3])
            diff = ""
            if share >= 0.05 and label != ref_label and n in ref_pc and e["samples"]:
                r = stall_shares(ref_pc[n])
                d = max(abs(r.get(k, 0) - ss.get(k, 0)) for k in set(r) | set(ss))
                worst = max(worst, d)
                diff = "  (max diff from %s %.0f pts)" % (ref_label, 100 * d)
            print("  %-70s %5.1f%% %9d %9d  %s%s" % (n[:70], 100 * share, e["stack"],
                                                    e["gpu_only"], top or "-", diff))
        if label != ref_label:
            print("  => %s: %d/%d hot kernels sampled; worst stall-share difference (>=5%% "
                  "kernels) %.0f points" % (label, len(covered), len(hot), 100 * worst))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
