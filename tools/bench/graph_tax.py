"""CUDA graphs of three real shapes, replayed and timed: the worker of scripts/graph-tax-real.py,
which measures what a graph first launched while PC sampling is enabled costs per launch for good
(docs/pc-sampling.md P21) on workloads, not only on a graph of empty kernels (issue 28 item 3).

  step    tools/bench/torch_step.py's MLP training step (forward, backward, SGD): ~45 small kernels
  block   tools/bench/torch_block.py's transformer-block training step (AdamW): ~120 kernels
  decode  an LLM decode step: LAYERS layers of RMSNorm, QKV projection, a KV-cache write,
          attention over the cache, output projection, a SwiGLU MLP and residual adds, batch 8,
          one token each: ~300 kernels of a few microseconds, the graph an inference server
          replays per generated token

Worker protocol (stdin/stdout, a line each): "launch S" times only the replay call (the queue is
drained between calls, outside the timed part: the CPU cost of the launch, which is where the
tax lies); "step S" times replay plus synchronize; "gpu N" gives the GPU time of one replay
(CUDA events around N replays, divided by N); "count" the kernels one replay runs (torch.profiler,
asked only of the worker without the library); "quit" ends it. Each answers one JSON line
{"us": ...}; the first line a worker prints is {"ready": true}.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F

LAYERS, BATCH, DIM, HEADS, CACHE = 24, 8, 2048, 16, 1024


def decode_step():
    """One decode step of a LAYERS-layer model with a filled KV cache, bf16, no autograd."""
    torch.manual_seed(0)
    hd, ff = DIM // HEADS, 4 * DIM
    dt = torch.bfloat16
    w = [dict(qkv=torch.randn(DIM, 3 * DIM, device="cuda", dtype=dt) * 0.02,
              out=torch.randn(DIM, DIM, device="cuda", dtype=dt) * 0.02,
              gate_up=torch.randn(DIM, 2 * ff, device="cuda", dtype=dt) * 0.02,
              down=torch.randn(ff, DIM, device="cuda", dtype=dt) * 0.02,
              n1=torch.ones(DIM, device="cuda", dtype=dt), n2=torch.ones(DIM, device="cuda", dtype=dt),
              k=torch.randn(BATCH, HEADS, CACHE, hd, device="cuda", dtype=dt),
              v=torch.randn(BATCH, HEADS, CACHE, hd, device="cuda", dtype=dt))
         for _ in range(LAYERS)]
    x0 = torch.randn(BATCH, DIM, device="cuda", dtype=dt)
    pos = torch.tensor([CACHE - 1], device="cuda")

    @torch.no_grad()
    def step():
        x = x0
        for p in w:
            h = F.rms_norm(x, (DIM,), p["n1"])
            q, k, v = (h @ p["qkv"]).view(BATCH, 3, HEADS, 1, hd).unbind(1)
            p["k"].index_copy_(2, pos, k)
            p["v"].index_copy_(2, pos, v)
            a = F.scaled_dot_product_attention(q, p["k"], p["v"])
            x = x + a.reshape(BATCH, DIM) @ p["out"]
            g, u = (F.rms_norm(x, (DIM,), p["n2"]) @ p["gate_up"]).chunk(2, dim=-1)
            x = x + (F.silu(g) * u) @ p["down"]
        return x
    return step


def capture(kind):
    """The graph of one step of `kind`, warmed up eagerly first as PyTorch's users do."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    if kind == "step":
        from torch_step import Steps
        return Steps().graph
    if kind == "block":
        import torch_block
        return torch_block.build("graph").graph
    from torch_loop import capture, warm_up
    step = decode_step()
    warm_up(step)
    return capture(step)


def kernels_per_replay(graph, n=3):
    """Kernels one replay runs, counted by torch.profiler (Kineto) over n replays: call it only
    where no other CUPTI client is loaded (the driver asks the variant without the library)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            graph.replay()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA) / n


def timed(graph, seconds, launch_only):
    us, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        graph.replay()
        if launch_only:
            t1 = time.perf_counter()
            torch.cuda.synchronize()
        else:
            torch.cuda.synchronize()
            t1 = time.perf_counter()
        us.append((t1 - t0) * 1e6)
    return us


def gpu_us(graph, n):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(n):
        graph.replay()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) * 1000 / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--graph", choices=["step", "block", "decode"], required=True)
    a = ap.parse_args()
    graph = capture(a.graph)
    graph.replay()  # the first launch: the graph's upload
    torch.cuda.synchronize()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd, arg = (line.split() + ["0"])[:2]
        if cmd == "quit":
            break
        if cmd == "gpu":
            out = gpu_us(graph, int(arg))
        elif cmd == "count":
            out = kernels_per_replay(graph)
        else:
            out = timed(graph, float(arg), cmd == "launch")
        print(json.dumps({"us": out}), flush=True)


if __name__ == "__main__":
    main()
