#!/usr/bin/env python3
"""The cost of parcagpu-trace's autograd probes (tools/trace/autograd.h) on the fake libtorch_cpu.so and
the mock CUDA driver (tests/programs/autograd_fake.py, every launch announced): the BPF run time
of each program (kernel.bpf_stats_enabled=1, `bpftool prog show`: run_time_ns / run_cnt) and the
program's time per step (3 forward ops, 3 backward nodes, 6 launches) without the tool, with the
tool and --no-autograd, and with the tool. Run as root from the repository, after the build:

    python3 scripts/autograd-cost.py [STEPS]      (PARCAGPU_BUILD_DIR: default build/)
"""
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import harness  # noqa: E402
from test_trace_python import pythons  # noqa: E402

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
REPEAT = 3  # a shared machine: the best of 3 runs of each
PROGRAM = os.path.join(harness.SOURCE, "tests", "programs", "autograd_fake.py")
TORCH_LIB = os.path.join(harness.BUILD, "autograd_fake", "torch", "lib", "libtorch_cpu.so")
PROGS = ("autograd_seq_return", "autograd_node_enter", "autograd_node_return", "cuda_correlation")


def progs():
    return json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True,
                                     check=True).stdout)


def bpf_stats(before):
    """Run time and count of the programs loaded since `before` (a set of ids); where another
    tool loaded programs of the same name meanwhile, the busiest of each name."""
    stats = {}
    for p in progs():
        if p.get("name") in PROGS and p["id"] not in before:
            t = (p.get("run_time_ns", 0), p.get("run_cnt", 0))
            if t[1] >= stats.get(p["name"], (0, 0))[1]:
                stats[p["name"]] = t
    return stats


def run_program(tr=None, wait_for=None, before=()):
    env = harness.base_env(dict(harness.UNLIMITED, CUDA_INJECTION64_PATH=harness.LIB))
    p = subprocess.Popen([pythons()[0][1], PROGRAM, TORCH_LIB, os.path.join(harness.MOCK_DIR, "libcuda.so.1"),
                          str(STEPS), "--wait"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 30
    while tr and wait_for and time.time() < deadline and not re.search(wait_for % {"pid": p.pid},
                                                                         tr._read(tr.err)):
        time.sleep(0.05)
    time.sleep(0.3)
    p.stdin.write("go\n")
    p.stdin.flush()
    line = p.stdout.readline()
    stats = bpf_stats(before) if tr else {}
    p.stdin.close()
    p.wait(timeout=60)
    m = re.search(r"([\d.]+) us a step", line)
    return float(m.group(1)) if m else None, stats


def main():
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        base = min(run_program()[0] for _ in range(REPEAT))
        print("no tool:              %8.1f us a step (%d steps, best of %d runs)" % (base, STEPS, REPEAT))
        for label, extra, wait_for in (("tool, --no-autograd:", ["--no-autograd"], r"pid %(pid)d runs Python"),
                                       ("tool, autograd:     ", [], r"autograd probes attached")):
            runs = []
            for _ in range(REPEAT):
                before = {p["id"] for p in progs()}
                with harness.Trace(extra=["-v"] + extra) as tr:
                    runs.append(run_program(tr, wait_for, before))
                    tr.stop()
            us, stats = min(runs, key=lambda r: r[0])
            print("%s %8.1f us a step (best of %d: %s)" % (label, us, REPEAT,
                                                          ", ".join("%.1f" % r[0] for r in runs)))
            for name in PROGS:
                t, n = stats.get(name, (0, 0))
                if n:
                    print("    %-22s %9d runs %8.0f ns a run" % (name, n, t / n))
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"])


if __name__ == "__main__":
    main()
