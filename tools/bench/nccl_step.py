"""A two-GPU NCCL step for scripts/multi-gpu-real.sh (issue 19): one process per GPU under
torchrun, each step a matmul, an all_reduce and a broadcast.

  torchrun --nproc_per_node=2 tools/bench/nccl_step.py [--eager-seconds S1] [--graph-seconds S2]

Phase "eager": the step run eagerly for S1 seconds. Phase "graph": the same step captured once
into a CUDA graph (torch.cuda.graph, warm-up on a side stream first, as PyTorch requires; the
capture is thread-local by default, --capture-mode global is PyTorch's default: see graph_phase)
and replayed for S2 seconds. Each step is timed to its end (torch.cuda.synchronize). Every
CHECK_EVERY steps (outside the timed region) the ranks check the collectives' results (all_reduce
sum of rank+1 over the ranks; the broadcast equals rank 0's pattern) and agree by a small
all_reduce whether the phase's time is up, so that every rank runs the same number of
collectives.

Output: one JSON line per rank on stdout:
  {"rank", "world", "local_rank", "pid", "device", "gpu", "torch", "nccl", "env",
   "phases": {"eager": {"steps", "seconds", "median_us", "p99_us", "mean_us"}, "graph": {...}},
   "checks", "allreduce_ok", "broadcast_ok", "capture_mode", "ok"}
plus "error" when the graph phase failed (capture refused, ...): the line still carries the eager
phase, "graph" has the error, and the rank exits 1 at once (no teardown).
Progress on stderr. Exit 0 ok, 1 a wrong collective result (or another failure), 3 HANG: a
step (or init, capture, barrier) took longer than --hang-s (default 30 s; init 120 s); then
"HANG <what>" and every thread's traceback are printed on stderr and stdout and the process ends
at once.

NVLink multicast must stay off: the launcher must set NCCL_NVLS_ENABLE=0,
TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1. If one is missing this script sets
it before NCCL starts (and says so in "env"), but the launcher is expected to have done it.
"""
import argparse
import faulthandler
import json
import os
import statistics
import sys
import threading
import time

NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
                "NVSHMEM_DISABLE_NVLS": "1"}

# Before torch (and NCCL) read them.
ENV_REPORT = {}
for _k, _v in NO_MULTICAST.items():
    if os.environ.get(_k) != _v:
        ENV_REPORT[_k] = "was %r, set to %r by nccl_step.py" % (os.environ.get(_k), _v)
        os.environ[_k] = _v
    else:
        ENV_REPORT[_k] = _v

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from torch_loop import capture, warm_up  # noqa: E402

CHECK_EVERY = 50


def log(msg):
    sys.stderr.write("nccl_step[%s]: %s\n" % (os.environ.get("RANK", "?"), msg))
    sys.stderr.flush()


class Watchdog:
    """Ends the process with HANG when what was armed has not finished within its limit."""

    def __init__(self):
        self.lock = threading.Lock()
        self.what = None
        self.deadline = 0.0
        t = threading.Thread(target=self.loop, name="nccl_step-watchdog", daemon=True)
        t.start()

    def arm(self, what, limit_s):
        with self.lock:
            self.what, self.deadline = what, time.monotonic() + limit_s

    def disarm(self):
        with self.lock:
            self.what = None

    def loop(self):
        while True:
            time.sleep(0.5)
            with self.lock:
                what, late = self.what, self.what is not None and time.monotonic() > self.deadline
            if late:
                msg = "HANG rank=%s pid=%d: %s" % (os.environ.get("RANK", "?"), os.getpid(), what)
                print(msg, flush=True)
                sys.stderr.write(msg + "\n")
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                sys.stderr.flush()
                os._exit(3)


def pct(xs, q):
    s = sorted(xs)
    if not s:
        return 0.0
    i = min(len(s) - 1, max(0, int(round(q / 100.0 * (len(s) - 1)))))
    return s[i]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--eager-seconds", type=float, default=20.0)
    ap.add_argument("--graph-seconds", type=float, default=20.0)
    ap.add_argument("--matmul", type=int, default=2048, help="matmul size N (N x N, bf16)")
    ap.add_argument("--numel", type=int, default=1 << 22,
                    help="all_reduce elements (float32); the broadcast has a quarter")
    ap.add_argument("--hang-s", type=float, default=30.0)
    ap.add_argument("--capture-mode", default="thread_local",
                    choices=("thread_local", "global", "relaxed"),
                    help="torch.cuda.graph's capture_error_mode (PyTorch's own default: global)")
    args = ap.parse_args()

    wd = Watchdog()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank)
    dev = torch.device("cuda", local_rank)
    wd.arm("init_process_group", max(120.0, args.hang_s))
    # device_id: the communicator is created now, bound to this GPU.
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    dist.barrier(device_ids=[local_rank])
    wd.disarm()
    log("rank %d of %d on %s (%s), pid %d" % (rank, world, dev, torch.cuda.get_device_name(dev),
                                               os.getpid()))

    g = torch.Generator(device=dev)
    g.manual_seed(1234 + rank)
    a = torch.randn(args.matmul, args.matmul, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(args.matmul, args.matmul, device=dev, dtype=torch.bfloat16, generator=g)
    c = torch.empty(args.matmul, args.matmul, device=dev, dtype=torch.bfloat16)
    x = torch.empty(args.numel, device=dev, dtype=torch.float32)
    nb = max(1, args.numel // 4)
    bc = torch.empty(nb, device=dev, dtype=torch.float32)
    # rank 0's broadcast pattern; every rank knows it to check the result.
    pattern = torch.arange(nb, device=dev, dtype=torch.float32).remainder_(1021.0).add_(0.5)
    mine = pattern if rank == 0 else torch.full_like(pattern, -7.0)
    expected_sum = float(world * (world + 1) // 2)
    flag = torch.zeros(1, device=dev, dtype=torch.float32)

    def step():
        torch.matmul(a, b, out=c)
        x.fill_(float(rank + 1))
        dist.all_reduce(x)
        bc.copy_(mine)
        dist.broadcast(bc, src=0)

    state = {"checks": 0, "allreduce_ok": True, "broadcast_ok": True}

    def check(where):
        ar = bool((x == expected_sum).all().item())
        br = bool(torch.equal(bc, pattern))
        state["checks"] += 1
        if not ar and state["allreduce_ok"]:
            log("all_reduce wrong at %s: x[0]=%r, expected %r" % (where, x[0].item(), expected_sum))
        if not br and state["broadcast_ok"]:
            log("broadcast wrong at %s" % where)
        state["allreduce_ok"] &= ar
        state["broadcast_ok"] &= br

    def time_up(t_end):
        # Every rank stops at the same step: the max over ranks of "my time is up".
        flag.fill_(1.0 if time.perf_counter() >= t_end else 0.0)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return flag.item() > 0

    def run(name, fn, seconds):
        times = []
        dist.barrier(device_ids=[local_rank])
        t_start = time.perf_counter()
        t_end = t_start + seconds
        i = 0
        while True:
            wd.arm("%s step %d" % (name, i), args.hang_s)
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            times.append((t1 - t0) * 1e6)
            i += 1
            if i % CHECK_EVERY == 0:
                check("%s step %d" % (name, i))
                if time_up(t_end):
                    break
        wd.arm("%s end barrier" % name, args.hang_s)
        dist.barrier(device_ids=[local_rank])
        wd.disarm()
        took = time.perf_counter() - t_start
        log("%s: %d steps in %.1f s, median %.1f us" % (name, len(times), took,
                                                         statistics.median(times)))
        return {"steps": len(times), "seconds": round(took, 3),
                "median_us": round(statistics.median(times), 1),
                "p99_us": round(pct(times, 99), 1),
                "mean_us": round(statistics.fmean(times), 1)}

    phases = {}
    wd.arm("eager warm-up", max(60.0, args.hang_s))
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    check("eager warm-up")
    phases["eager"] = run("eager", step, args.eager_seconds)

    def graph_phase():
        # Capture: warm up on a side stream (cuBLAS workspaces, NCCL's first use on this stream),
        # then capture one step. thread_local (the default here): other threads' CUDA calls (the
        # NCCL watchdog's event queries in PyTorch versions that do not switch the watchdog to
        # thread-local mode themselves) neither fail nor invalidate the capture.
        wd.arm("graph warm-up and capture", max(60.0, args.hang_s))
        warm_up(step)  # on the current device, set at start
        dist.barrier(device_ids=[local_rank])
        graph = capture(step, capture_error_mode=args.capture_mode)
        dist.barrier(device_ids=[local_rank])
        x.zero_()
        bc.zero_()
        graph.replay()
        torch.cuda.synchronize()
        check("first replay")
        wd.disarm()
        result = run("graph", graph.replay, args.graph_seconds)
        check("end")
        state["graph"] = graph
        return result

    def report(error=None):
        try:
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception as e:  # noqa: BLE001
            nccl = "unknown (%s)" % e
        ok = state["allreduce_ok"] and state["broadcast_ok"] and error is None
        out = {"rank": rank, "world": world, "local_rank": local_rank, "pid": os.getpid(),
               "device": local_rank, "gpu": torch.cuda.get_device_name(dev),
               "torch": torch.__version__, "nccl": nccl, "env": ENV_REPORT, "phases": phases,
               "checks": state["checks"], "allreduce_ok": state["allreduce_ok"],
               "broadcast_ok": state["broadcast_ok"], "capture_mode": args.capture_mode, "ok": ok}
        if error is not None:
            out["error"] = error
        print(json.dumps(out), flush=True)

    try:
        phases["graph"] = graph_phase()
    except Exception as e:  # noqa: BLE001
        # A failure every rank sees (capture refused) still reports the eager phase. The
        # communicator may be unusable now: no teardown, and the watchdog ends a rank that waits.
        log("graph phase failed: %r" % (e,))
        phases["graph"] = {"error": repr(e)[:500]}
        report(error="graph phase: %r" % (e,))
        sys.stderr.flush()
        os._exit(1)

    report()
    wd.arm("destroy_process_group", args.hang_s)
    state.pop("graph", None)
    dist.destroy_process_group()
    wd.disarm()
    assert state["allreduce_ok"], "all_reduce result wrong"
    assert state["broadcast_ok"], "broadcast result wrong"
    return 0


if __name__ == "__main__":
    sys.exit(main())
