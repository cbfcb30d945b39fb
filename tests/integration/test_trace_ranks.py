#!/usr/bin/env python3
"""Several ranks in one view (issue 29 item 3): one parcagpu-trace over two processes of one job,
launched as a distributed launcher does (RANK / LOCAL_RANK in their environments), with different
workloads. Each process's GPU time is its own: in the JSON summary (gpu_time_by_process), in the
text report ("GPU time by rank") and in pprof (labels pid, comm, rank, local_rank, device on every
sample).

The truth: every kernel of the mock runs exactly MOCK_CUDA_KERNEL_NS, so a process's GPU time is
its kernels_run times its NS, and its kernels per device are its kernels_by_device."""
import json
import os
import re
import shutil
import tempfile
import unittest

import harness
from test_trace_tool import decode_pprof

C = harness.COUNTER

# rank -> (mock app arguments, ns per kernel): rank 1 launches more, on two devices, longer kernels.
RANKS = {0: (["--duration=1s", "--launch-rate=300", "--graph-rate=30"], 3000),
         1: (["--duration=1s", "--launch-rate=500", "--graph-rate=50", "--num-gpus=2"], 11000)}


def human_ns(ns):
    """tools/trace/report.cc's human_ns."""
    if ns >= 1e9:
        return "%.3f s" % (ns * 1e-9)
    if ns >= 1e6:
        return "%.3f ms" % (ns * 1e-6)
    return "%.3f us" % (ns * 1e-3)


class SeveralRanksInOneView(unittest.TestCase):
    def test_gpu_time_by_rank(self):
        tmp = tempfile.mkdtemp(prefix="parcagpu-ranks-")
        try:
            summary, pprof = os.path.join(tmp, "summary.json"), os.path.join(tmp, "gpu.pb.gz")
            # The text report on stdout, the JSON summary and the pprof profile of the same run.
            with harness.TraceTool(["-l", os.path.abspath(harness.LIB), "--json=" + summary,
                                    "--pprof", pprof]) as tr:
                apps = {rank: harness.start_mockapp(
                    args, env=dict(harness.UNLIMITED, RANK=str(rank), LOCAL_RANK=str(rank),
                                   MOCK_CUDA_KERNEL_NS=str(ns)))
                        for rank, (args, ns) in RANKS.items()}
                runs = {rank: harness.finish_mockapp(app) for rank, app in apps.items()}
            tr.stop()
            self.assertEqual(tr.proc.returncode, 0, tr.stderr[-2000:])
            with open(summary) as f:
                j = json.load(f)
            with open(pprof, "rb") as f:
                p = decode_pprof(f.read())
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        harness.check_no_impossible_records(j, "parcagpu-trace")
        for rank, r in runs.items():
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(j[C.kernels_matched], sum(r.summary["kernels_run"] for r in runs.values()))

        # JSON: one row per process, ranked, each with its own kernels and GPU time.
        rows = j["gpu_time_by_process"]
        self.assertEqual([row["rank"] for row in rows], [0, 1], rows)
        for rank, row in zip((0, 1), rows):
            r, ns = runs[rank], RANKS[rank][1]
            self.assertEqual(row["pid"], r.summary["pid"])
            self.assertEqual(row["local_rank"], rank)
            self.assertEqual(row["comm"], "parcagpu-mockapp"[:15])  # the kernel's comm: 15 bytes
            self.assertEqual(row["kernels"], r.summary["kernels_run"])
            self.assertEqual(row["gpu_ns"], r.summary["kernels_run"] * ns)
            by_device = {d["device"]: d["kernels"] for d in row["devices"]}
            self.assertEqual(by_device, {d: n for d, n in enumerate(r.summary["kernels_by_device"]) if n})
            for d in row["devices"]:
                self.assertEqual(d["gpu_ns"], d["kernels"] * ns)
        self.assertEqual(sum(row["gpu_ns"] for row in rows), j[C.gpu_ns_matched])
        self.assertNotEqual(rows[0]["gpu_ns"], rows[1]["gpu_ns"])

        # Text: the section names each rank's process with its GPU time.
        section = tr.stdout.split("GPU time by rank: ", 1)
        self.assertEqual(len(section), 2, tr.stdout[:3000])
        lines = section[1].split("\n\n", 1)[0].splitlines()
        self.assertEqual(lines[0], "%s of GPU time in %d kernels, 2 processes" % (
            human_ns(j[C.gpu_ns_matched]), j[C.kernels_matched]))
        for rank, row in zip((0, 1), rows):
            self.assertRegex(lines[1 + rank], r"^  rank %d local_rank %d +pid %d +%s +%s +[\d.]+%% +%d kernels +"
                             r"devices? %s" % (rank, rank, row["pid"], re.escape(row["comm"]),
                                               re.escape(human_ns(row["gpu_ns"])), row["kernels"],
                                               ",".join(str(d["device"]) for d in row["devices"])))

        # pprof: every sample labelled with its process; GPU time by rank label as in the JSON.
        s = p["string_table"]
        one = lambda msg, key: msg.get(key, [0])[0]
        by_rank, devices = {}, {}
        for x in p["sample"]:
            num = {s[one(l, "key")]: one(l, "num") for l in x.get("label", []) if not one(l, "str")}
            text = {s[one(l, "key")]: s[one(l, "str")] for l in x.get("label", []) if one(l, "str")}
            self.assertEqual(set(num), {"pid", "rank", "local_rank", "device"}, x)
            self.assertEqual(text["comm"], rows[0]["comm"])
            self.assertIn("kernel", text)
            self.assertEqual(num["pid"], rows[num["rank"]]["pid"])
            by_rank[num["rank"]] = by_rank.get(num["rank"], 0) + x["value"][1]
            devices.setdefault(num["rank"], set()).add(num["device"])
        self.assertEqual(by_rank, {row["rank"]: row["gpu_ns"] for row in rows})
        self.assertEqual(devices, {row["rank"]: {d["device"] for d in row["devices"]} for row in rows})
        print("\nGPU time by rank: " + "\n".join(lines))


if __name__ == "__main__":
    harness.main()
