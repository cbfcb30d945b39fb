"""A program's loop run as it is, or under torch.profiler (CPU and CUDA activity) with the
profiler's Chrome trace written to `out`: the truth side of the scripts/*-real.sh comparisons,
which copy this file beside the program they write."""
import torch


def run_or_profile(run, mode, out):
    if mode != "profiler":
        return run()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as p:
        run()
    p.export_chrome_trace(out)
    return None
