"""What one NVTX range costs the thread that opens it: N torch.cuda.nvtx.range_push/range_pop
pairs around no work, after CUDA is up (the library injected at cuInit), timed in rounds; prints
one JSON line with the median ns per pair. Run by scripts/nvtx-cost-real.sh with and without
NVTX_INJECTION64_PATH and a consumer of the ranges.
"""
import json
import statistics
import sys
import time

import torch

pairs, rounds = int(sys.argv[1]), int(sys.argv[2])
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop
per_pair = []
for _ in range(rounds):
    t0 = time.perf_counter_ns()
    for _ in range(pairs):
        push("range")
        pop()
    per_pair.append((time.perf_counter_ns() - t0) / pairs)
print(json.dumps({"pairs": pairs, "rounds": rounds, "ns_per_pair": statistics.median(per_pair),
                  "rounds_ns": [round(v, 1) for v in per_pair]}))
