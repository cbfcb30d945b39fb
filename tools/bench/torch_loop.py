"""What tools/bench/torch_block.py and tools/bench/torch_mixed.py share: a timed loop of steps, and the same
loop under torch.profiler (Kineto, no library), which gives GPU ns by kernel name: the truth the
library's profile is compared with (scripts/mixed-real.sh, scripts/pc_breadth.py)."""
import json
import time

import torch


def run(step, seconds):
    """Steps for `seconds`; how many."""
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        step()
        n += 1
    return n


def profile_to(path, step, seconds, **extra):
    """Runs the loop under torch.profiler and writes {"steps", "gpu_ns_by_kernel", **extra} as
    JSON to `path`; returns (steps, kernel names)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        n = run(step, seconds)
    by_kernel = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.elapsed_us() > 0:
            by_kernel[e.name] = by_kernel.get(e.name, 0) + int(e.time_range.elapsed_us() * 1000)
    with open(path, "w") as f:
        json.dump(dict(extra, steps=n, gpu_ns_by_kernel=by_kernel), f)
    return n, len(by_kernel)
