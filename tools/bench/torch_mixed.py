"""Issue 27: a PyTorch program that mixes eager steps and CUDA-graph replays, as real programs do
(a training step run eagerly beside a captured inference forward; an inference server's eager
prefill beside its graph decode). Each iteration: one eager training step of an MLP (forward,
backward, AdamW) and REPLAYS replays of a captured decode-shaped forward of another model, then a
synchronize.

  python tools/bench/torch_mixed.py --seconds S                 # run (under the library, say)
  python tools/bench/torch_mixed.py --seconds S --profile F     # alone under torch.profiler (Kineto):
                                                          # GPU ns by kernel name into F (JSON)
Prints one line `TORCH_MIXED {"iterations": N, ...}` at the end.
"""
import argparse
import json

import torch

from torch_loop import capture, profile_to, run, warm_up

REPLAYS = 4


def build():
    torch.manual_seed(0)
    train = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024), torch.nn.LayerNorm(1024)).cuda()
    opt = torch.optim.AdamW(train.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(256, 1024, device="cuda")
    y = torch.randn(256, 1024, device="cuda")

    def eager_step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(train(x), y)
        loss.backward()
        opt.step()

    layers = []
    for _ in range(8):
        layers += [torch.nn.Linear(512, 512), torch.nn.SiLU()]
    decoder = torch.nn.Sequential(*layers).cuda().eval()
    q = torch.randn(16, 512, device="cuda")

    def decode():
        return torch.softmax(decoder(q), dim=-1)

    with torch.no_grad():
        warm_up(decode)
        graph = capture(decode)
    for _ in range(5):
        eager_step()
    torch.cuda.synchronize()

    def iteration():
        eager_step()
        for _ in range(REPLAYS):
            graph.replay()
        torch.cuda.synchronize()
    return iteration


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--profile", help="run under torch.profiler, GPU ns by kernel into this file")
    a = ap.parse_args()
    iteration = build()
    run(iteration, 1)  # warm-up
    if not a.profile:
        print("TORCH_MIXED " + json.dumps({"iterations": run(iteration, a.seconds)}), flush=True)
        return
    n, kernels = profile_to(a.profile, iteration, a.seconds)
    print("TORCH_MIXED " + json.dumps({"iterations": n, "kernels": kernels}), flush=True)


if __name__ == "__main__":
    main()
