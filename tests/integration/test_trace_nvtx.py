#!/usr/bin/env python3
"""NVTX ranges as frames in parcagpu-trace (issue 46 item 2, the consumer's side). The mock app's
--scenario=nvtx makes, on each thread, 3 steps of nested ranges around kernel launches through
NVTX v3's own loader (--nvtx: NVTX_INJECTION64_PATH names the library):
  push "step N" > { push "forward" > k_add; pop; push "backward" > k_mul; pop;
                    start "optimizer" > { mark "update"; k_add } end } pop
and says what it made (MOCKAPP_NVTX). Every kernel runs MOCK_CUDA_KERNEL_NS long, so the GPU time
under each range is known: parcagpu-trace --nvtx must fold each kernel under exactly its
thread's open ranges, outermost first ("[nvtx] step 1;[nvtx] backward;...;[gpu] k_mul"), with
that GPU time per range (in --pprof's samples too), and count what it read. Without --nvtx, or without NVTX in the
application, no [nvtx] frame."""
import json
import os
import re
import sys
import tempfile
import unittest

import harness

sys.path.insert(0, os.path.join(harness.SOURCE, "scripts"))
from pprof_decode import decode as decode_pprof, one  # noqa: E402 (--pprof's output read back)

KERNEL_NS = 5000
STEPS = 3
# Each range of a step and the kernel it encloses.
INNER = {"forward": "k_add", "backward": "k_mul", "optimizer": "k_add"}
FOLDED_NVTX = re.compile(r"^\[nvtx\] (step \d+);\[nvtx\] (\w+);(.*);\[gpu\] (\S+) (\d+)$")


def made_by_thread(run):
    return [json.loads(l.split(" ", 1)[1]) for l in run.stdout.splitlines()
            if l.startswith("MOCKAPP_NVTX ")]


class TraceNvtx(unittest.TestCase):
    def traced(self, trace_args, app_args, threads=2):
        folded = tempfile.mktemp(prefix="parcagpu-folded-")
        self.pprof = tempfile.mktemp(prefix="parcagpu-pprof-")
        self.addCleanup(lambda: os.path.exists(self.pprof) and os.unlink(self.pprof))
        env = dict(harness.UNLIMITED, MOCK_CUDA_KERNEL_NS=str(KERNEL_NS))
        with harness.Trace(extra=["--folded", folded, "--pprof", self.pprof, "-n", "1000"] + list(trace_args)) as tr:
            r = harness.run_mockapp(list(app_args) + ["--scenario=nvtx", "--threads=%d" % threads],
                                    env=env)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        with open(folded) as f:
            lines = [l for l in f.read().splitlines() if l]
        os.unlink(folded)
        return r, tr.result, lines

    def pprof_by_range(self):
        """GPU ns of --pprof's samples by their two outermost frames (the ranges)."""
        with open(self.pprof, "rb") as f:
            p = decode_pprof(f.read())
        s = p["string_table"]
        function = {one(f, "id"): s[one(f, "name")] for f in p["function"]}
        location = {one(l, "id"): [function[one(ln, "function_id")] for ln in l["line"]]
                    for l in p["location"]}
        out = {}
        for x in p["sample"]:
            names = [n for loc in x["location_id"] for n in reversed(location[loc])]  # leaf first
            key = tuple(n[len("[nvtx] "):] for n in names[::-1][:2] if n.startswith("[nvtx] "))
            out[key] = out.get(key, 0) + x["value"][1]  # kernels, GPU ns
        return out

    def test_gpu_time_reads_by_range(self):
        threads = 2
        r, j, lines = self.traced(["--nvtx"], ["--nvtx"], threads)
        made = made_by_thread(r)
        self.assertEqual(len(made), threads, r.stdout[-2000:])
        # GPU time by (step, range, kernel) from the folded lines under ranges.
        got = {}
        for line in lines:
            m = FOLDED_NVTX.match(line)
            if not m:
                continue
            self.assertNotIn("[nvtx]", m[3], line)  # two ranges deep, no more
            k = (m[1], m[2], m[4])
            got[k] = got.get(k, 0) + int(m[5])
        want = {("step %d" % n, rng, kernel): threads * KERNEL_NS
                for n in range(STEPS) for rng, kernel in INNER.items()}
        self.assertEqual(got, want, "\n".join(lines))
        by_range = self.pprof_by_range()
        self.assertEqual({k: v for k, v in by_range.items() if k},
                         {("step %d" % n, rng): threads * KERNEL_NS for n in range(STEPS) for rng in INNER})
        # Nothing else has a range, and every launch of the scenario is under two.
        launches = sum(m["launches"] for m in made)
        self.assertEqual(sum(1 for l in lines if l.startswith("[nvtx]")),
                         sum(1 for l in lines if FOLDED_NVTX.match(l)), "\n".join(lines))
        self.assertEqual(j["nvtx_launches_in_ranges"], launches, j)
        self.assertEqual(sum(got.values()), launches * KERNEL_NS)
        # What was read: every record the app made, marks counted, nothing unmatched or lost.
        kinds = ("push", "pop", "start", "end", "mark")
        self.assertEqual(j["nvtx_records"], sum(m[k] for m in made for k in kinds), j)
        self.assertEqual(j["nvtx_marks"], sum(m["mark"] for m in made), j)
        self.assertGreater(j["nvtx_batches"], 0, j)
        self.assertEqual(j["nvtx_resource_names"], threads, j)  # each thread named itself
        for k in ("nvtx_unmatched_pops", "nvtx_unmatched_ends", "nvtx_depth_overflows",
                  "nvtx_starts_over_cap", "nvtx_threads_over_cap", "nvtx_records_over_cap",
                  "nvtx_read_errors", "nvtx_message_faults", "nvtx_unknown_kinds",
                  "ringbuf_drops"):
            self.assertEqual(j[k], 0, (k, j))
        self.assertEqual(j["orphan_correlations_eager"], 0, j)

    def test_no_nvtx_frames_without_the_flag(self):
        # The app collects nothing then: no consumer of nvtx_event_batch.
        r, j, lines = self.traced([], ["--nvtx"], threads=1)
        self.assertTrue(lines)
        self.assertFalse([l for l in lines if "[nvtx]" in l], "\n".join(lines))
        self.assertEqual((j["nvtx_batches"], j["nvtx_records"]), (0, 0), j)

    def test_no_nvtx_frames_without_nvtx_in_the_app(self):
        # No NVTX_INJECTION64_PATH: NVTX's calls are no-ops, nothing reaches the library.
        r, j, lines = self.traced(["--nvtx"], [], threads=1)
        self.assertTrue(lines)
        self.assertFalse([l for l in lines if "[nvtx]" in l], "\n".join(lines))
        self.assertEqual((j["nvtx_records"], j["nvtx_launches_in_ranges"]), (0, 0), j)


if __name__ == "__main__":
    unittest.main()
