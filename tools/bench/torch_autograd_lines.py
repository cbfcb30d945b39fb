#!/usr/bin/env python3
"""An eager training loop whose forward ops each sit on a line of their own, for checking on a GPU
that parcagpu-trace puts the backward's kernels under the forward line that caused them
(tools/trace/autograd.h, issue 31):

    CUDA_INJECTION64_PATH=build/lib/libparcagpu.so python tools/bench/torch_autograd_lines.py [SECONDS]
    parcagpu-trace -l build/lib/libparcagpu.so -d 20s --folded=gpu.folded   (beside it)

Expected in gpu.folded: lines like
    ...;torch_autograd_lines.py:NN forward;[backward] MmBackward0;...;[gpu] <gemm kernel>
for each of the lines marked `# op:` below. Prints steps/s at the end (the cost, with and
without the tool attached).
"""
import sys
import time

import torch
import torch.nn.functional as F

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
dev = "cuda"
torch.manual_seed(0)
B, D, H, C = 64, 1024, 4096, 1000
w1 = torch.randn(D, H, device=dev, requires_grad=True)
w2 = torch.randn(H, D, device=dev, requires_grad=True)
w3 = torch.randn(D, C, device=dev, requires_grad=True)
ln_w = torch.ones(D, device=dev, requires_grad=True)
ln_b = torch.zeros(D, device=dev, requires_grad=True)
params = [w1, w2, w3, ln_w, ln_b]
opt = torch.optim.SGD(params, lr=1e-4)


def forward(x, target):
    h = x @ w1  # op: MmBackward0
    h = F.gelu(h)  # op: GeluBackward0
    h = h @ w2  # op: MmBackward0
    h = torch.relu(h)  # op: ReluBackward0
    h = F.layer_norm(h, (D,), ln_w, ln_b)  # op: NativeLayerNormBackward0
    logits = h @ w3  # op: MmBackward0
    p = torch.softmax(logits, dim=-1)  # op: SoftmaxBackward0
    loss = F.cross_entropy(logits, target) + p.mean()  # op: NllLossBackward0 / LogSoftmaxBackward0 / MeanBackward0 / AddBackward0
    return loss


def main():
    x = torch.randn(B, D, device=dev)
    target = torch.randint(0, C, (B,), device=dev)
    steps = 0
    start = time.time()
    while time.time() - start < SECONDS:
        opt.zero_grad(set_to_none=True)
        loss = forward(x, target)
        loss.backward()
        opt.step()
        steps += 1
    torch.cuda.synchronize()
    elapsed = time.time() - start
    print("torch_autograd_lines: %d steps in %.1f s, %.1f steps/s, torch %s" % (
        steps, elapsed, steps / elapsed, torch.__version__), flush=True)


if __name__ == "__main__":
    main()
