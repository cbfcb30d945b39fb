"""Where a PyTorch process's GPU memory comes from, phase by phase (issue 27 item 3): the MLP
training step of tools/bench/torch_step.py (issue 17's soak), built up one phase at a time, the
device's used memory (cuMemGetInfo, the whole GPU: run one process at a time) printed after each.
Run alone and under the library to see at which phase the library's memory arrives.

  python tools/bench/torch_memory_phases.py [--idle-after-context S] [--replay-seconds S]

--idle-after-context: sleep this long after the context's first kernel, before anything else
loads (the library's learning episode ends after 2 s without a kernel first used, so the modules
that follow load while PC sampling is disabled).
Output: one line per phase, "PHASE name used_mib=N reserved_mib=N t_s=T", T from the start.
"""
import argparse
import time

import torch

from torch_step import Steps

T0 = time.monotonic()


def phase(name):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    print(f"PHASE {name} used_mib={(total - free) >> 20} "
          f"reserved_mib={torch.cuda.memory_reserved() >> 20} t_s={time.monotonic() - T0:.1f}",
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle-after-context", type=float, default=0.0)
    ap.add_argument("--replay-seconds", type=float, default=8.0)
    args = ap.parse_args()
    torch.zeros(1, device="cuda")
    phase("context")
    if args.idle_after_context:
        time.sleep(args.idle_after_context)
        phase("idle")
    a = torch.randn(256, 256, device="cuda")
    (a @ a).sum().item()
    phase("cublas")
    steps = Steps()
    phase("captured")
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
        steps.graph.replay()
    phase("replay_1s")
    end = time.monotonic() + args.replay_seconds
    while time.monotonic() < end:
        steps.graph.replay()
    phase(f"replay_{1 + args.replay_seconds:g}s")


if __name__ == "__main__":
    main()
