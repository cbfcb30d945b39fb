"""What the PyTorch benchmarks here share: a step warmed up and captured as a CUDA graph, a timed
loop of steps, and the same loop under torch.profiler (Kineto, no library), which gives GPU ns by
kernel name: the truth the library's profile is compared with (scripts/mixed-real.sh,
scripts/pc_breadth.py)."""
import json
import time

import torch


def warm_up(step, times=3):
    """Runs step `times` times on a side stream and waits for it, as PyTorch's CUDA-graph recipe
    does before a capture: lazy initialisations (cuBLAS workspaces, first uses) happen outside the
    graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(times):
            step()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()


def capture(step, **graph_args):
    """One call of step captured as a CUDA graph (warm_up first); graph_args go to
    torch.cuda.graph."""
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, **graph_args):
        step()
    torch.cuda.synchronize()
    return graph


def run(step, seconds):
    """Steps for `seconds`; how many."""
    n, end = 0, time.perf_counter() + seconds
    while time.perf_counter() < end:
        step()
        n += 1
    return n


def profile_to(path, step, seconds, **extra):
    """Runs the loop under torch.profiler and writes {"steps", "gpu_ns_by_kernel",
    "graph_gpu_ns", **extra} as JSON to `path`; returns (steps, kernel names). graph_gpu_ns: the
    GPU ns of the kernels Kineto correlates to a graph launch (cudaGraphLaunch, cuGraphLaunch and
    their _ptsz forms), from its trace's correlation IDs."""
    import os
    import tempfile
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        n = run(step, seconds)
    by_kernel = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.elapsed_us() > 0:
            by_kernel[e.name] = by_kernel.get(e.name, 0) + int(e.time_range.elapsed_us() * 1000)
    fd, trace = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(trace)
        events = json.load(open(trace)).get("traceEvents", [])
    finally:
        os.unlink(trace)
    graph_corr = {e["args"]["correlation"] for e in events
                  if e.get("cat") in ("cuda_runtime", "cuda_driver")
                  and "GraphLaunch" in e.get("name", "") and "correlation" in e.get("args", {})}
    graph_ns = sum(int(e.get("dur", 0) * 1000) for e in events
                   if e.get("cat") == "kernel" and e.get("args", {}).get("correlation") in graph_corr)
    with open(path, "w") as f:
        json.dump(dict(extra, steps=n, gpu_ns_by_kernel=by_kernel, graph_gpu_ns=graph_ns), f)
    return n, len(by_kernel)
