"""A transformer-block training loop: embedding, attention (scaled_dot_product_attention), an MLP
with GELU, LayerNorms, a vocabulary projection, cross-entropy and AdamW; eager, or the whole step
captured once as a CUDA graph and replayed. Each forward op sits on its own line of Block.forward,
so a profile by line can tell them apart. About two dozen distinct kernels.

  python tools/bench/torch_block.py --mode eager|graph --seconds S
  python tools/bench/torch_block.py --mode eager|graph --seconds S --profile F
      alone under torch.profiler (Kineto): GPU ns by kernel name into F (JSON)
Prints one line `TORCH_BLOCK {"mode": ..., "steps": N}` at the end.
"""
import argparse
import json

import torch
import torch.nn.functional as F

from torch_loop import capture, profile_to, run, warm_up

VOCAB, DIM, HEADS, SEQ, BATCH = 8192, 512, 8, 256, 8


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.norm1 = torch.nn.LayerNorm(DIM)
        self.qkv = torch.nn.Linear(DIM, 3 * DIM)
        self.proj = torch.nn.Linear(DIM, DIM)
        self.norm2 = torch.nn.LayerNorm(DIM)
        self.up = torch.nn.Linear(DIM, 4 * DIM)
        self.down = torch.nn.Linear(4 * DIM, DIM)
        self.head = torch.nn.Linear(DIM, VOCAB)

    def forward(self, tokens):
        x = self.embed(tokens)
        h = self.norm1(x)
        q, k, v = self.qkv(h).view(BATCH, SEQ, 3, HEADS, DIM // HEADS).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(BATCH, SEQ, DIM))
        h = self.norm2(x)
        m = F.gelu(self.up(h))
        x = x + self.down(m)
        return self.head(x)


def build(mode):
    torch.manual_seed(0)
    model = Block().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True, capturable=(mode == "graph"))
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")
    targets = torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")

    def step():
        opt.zero_grad(set_to_none=False)
        logits = model(tokens)
        loss = F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
        loss.backward()
        opt.step()

    warm_up(step)
    if mode == "eager":
        def run_step():
            step()
            torch.cuda.synchronize()
        return run_step
    graph = capture(step)

    def replay():
        graph.replay()
        torch.cuda.synchronize()
    replay.graph = graph  # tools/bench/graph_tax.py replays it without the synchronize
    return replay


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["eager", "graph"], default="eager")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--profile", help="run under torch.profiler, GPU ns by kernel into this file")
    a = ap.parse_args()
    step = build(a.mode)
    run(step, 1)  # warm-up
    if not a.profile:
        print("TORCH_BLOCK " + json.dumps({"mode": a.mode, "steps": run(step, a.seconds)}), flush=True)
        return
    n, kernels = profile_to(a.profile, step, a.seconds, mode=a.mode)
    print("TORCH_BLOCK " + json.dumps({"mode": a.mode, "steps": n, "kernels": kernels}), flush=True)


if __name__ == "__main__":
    main()
