"""A small launch-bound PyTorch training step, eager and as a CUDA-graph replay, timed step by
step: the worker of scripts/bench-torch-step.sh (which starts one per variant and interleaves
them), or standalone:  python tools/bench/torch_step.py --seconds 5 --mode graph

Worker protocol (stdin/stdout, one line each): the driver writes "MODE SECONDS" (eager, graph or
overlap) and the worker answers one JSON line with the step times in microseconds; "quit" ends
it. Only one worker runs on the GPU at a time: the others wait on their stdin.

data: the eager step fed the way a training loop is: its batch copied from pinned host memory
(non_blocking, a host-to-device copy), the gradients zeroed in place (set_to_none=False), the loss
read with .item() (a device-to-host copy the CPU waits for), each phase inside an NVTX range
(torch.cuda.nvtx: a no-op unless NVTX_INJECTION64_PATH names an injection library).

overlap: two streams each run a ~1 ms kernel per step (torch.cuda._sleep); when the two overlap
a step takes ~1 ms, when something serializes kernels (kernel-serialized PC sampling) ~2 ms.
"""
import argparse
import json
import random
import sys
import time

import torch


def build(width=256, depth=6, batch=64):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
    x = torch.randn(batch, width, device="cuda")
    y = torch.randn(batch, width, device="cuda")
    return model, opt, x, y


class Steps:
    def __init__(self):
        self.model, self.opt, self.x, self.y = build()
        self.loss_fn = torch.nn.MSELoss()
        # Warm up on a side stream, then capture one whole step (forward, backward, update).
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self.eager()
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(self.graph):
            self.static_loss = self.loss_fn(self.model(self.x), self.y)
            self.static_loss.backward()
            self.opt.step()
        self.x_host = self.x.cpu().pin_memory()
        self.y_host = self.y.cpu().pin_memory()
        self.s1 = torch.cuda.Stream()
        self.s2 = torch.cuda.Stream()
        # About 1 ms at the H100's ~2 GHz.
        self.cycles = 2_000_000
        torch.cuda.synchronize()

    def eager(self):
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(self.x), self.y)
        loss.backward()
        self.opt.step()

    def data(self):
        nvtx = torch.cuda.nvtx
        nvtx.range_push("step")
        nvtx.range_push("h2d")
        x = self.x_host.cuda(non_blocking=True)
        y = self.y_host.cuda(non_blocking=True)
        nvtx.range_pop()
        nvtx.range_push("forward")
        self.opt.zero_grad(set_to_none=False)
        loss = self.loss_fn(self.model(x), y)
        nvtx.range_pop()
        nvtx.range_push("backward")
        loss.backward()
        self.opt.step()
        nvtx.range_pop()
        nvtx.range_push("item")
        self.last_loss = loss.item()
        nvtx.range_pop()
        nvtx.range_pop()

    def replay(self):
        self.graph.replay()

    def overlap(self):
        with torch.cuda.stream(self.s1):
            torch.cuda._sleep(self.cycles)
        with torch.cuda.stream(self.s2):
            torch.cuda._sleep(self.cycles)

    # Step times kept at most: a uniform sample of them beyond (reservoir), so a long soak's
    # resident memory is not the list's (10 minutes of graph replay kept 3M floats, ~170 MiB,
    # which read as the process growing;
    # measurements-raw:docs/measurements/2026-11-25-h100/soak-*.txt).
    KEEP = 400_000

    def run(self, mode, seconds):
        step = {"eager": self.eager, "graph": self.replay, "data": self.data,
                "overlap": self.overlap}[mode]
        times = []
        rng = random.Random(1)
        n = 0
        end = time.perf_counter() + seconds
        while True:
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            n += 1
            if len(times) < self.KEEP:
                times.append((t1 - t0) * 1e6)
            else:
                i = rng.randrange(n)
                if i < self.KEEP:
                    times[i] = (t1 - t0) * 1e6
            if t1 >= end:
                break
        self.last_steps = n
        return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--mode", default="graph")
    ap.add_argument("--seconds", type=float, default=5)
    a = ap.parse_args()
    steps = Steps()
    if not a.worker:
        t = sorted(steps.run(a.mode, a.seconds))
        print(json.dumps({"mode": a.mode, "steps": steps.last_steps, "median_us": t[len(t) // 2],
                          "p99_us": t[int(len(t) * 0.99)]}))
        return
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        times = steps.run(words[0], float(words[1]))
        print(json.dumps({"mode": words[0], "us": [round(v, 1) for v in times]}), flush=True)


if __name__ == "__main__":
    main()
