#!/usr/bin/env python3
"""Kernel timestamps at the default rates (docs/cupti-facts.md, "A graph kernel that finishes
while kernel activity is disabled"): real CUPTI gives such a graph kernel an end near the next
time kernel activity is enabled, and the mock CUPTI does the same. The library keeps kernel
activity on until an announced graph launch's kernels have finished (src/graph_completion.h), so
every kernel record a consumer gets lasts what the mock GPU ran it for, graph kernels included,
with a classic consumer and with a PC-sample consumer (the production agent's configuration).
The kernels run 200 us each (MOCK_CUDA_KERNEL_NS), so a graph's are still running when its
launch call returns, as they are on a real GPU."""
import json
import os
import unittest

import harness

C = harness.COUNTER  # the summary's counters, by name (trace/counters.h)
from test_reliability import reported_once

KERNEL_NS = 200000
MIX = ["--launch-rate=1000", "--graph-rate=200"]


def kernel_lines(tool):
    out = []
    for line in tool.stdout.splitlines():
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("type") == "kernel":
            out.append(j)
    return out


def run(extra_trace=(), env=None, seconds=3):
    with harness.TraceTool(["-l", os.path.abspath(harness.LIB), "--json-lines"] +
                           list(extra_trace)) as tr:
        r = harness.run_mockapp(MIX + ["--duration=%ds" % seconds],
                                env=dict(env or {}, MOCK_CUDA_KERNEL_NS=str(KERNEL_NS)))
    tr.stop()
    return r, tr


class KernelTimestamps(unittest.TestCase):
    def check(self, extra_trace, env=None, seconds=3):
        r, tr = run(extra_trace, env, seconds)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr[-2000:])
        kernels = kernel_lines(tr)
        graph = [k for k in kernels if k["graph_id"]]
        self.assertGreater(len(graph), 0, "no graph kernel of an announced launch arrived")
        self.assertGreater(len(kernels) - len(graph), 0, "no eager kernel arrived")
        wrong = [(k["api"], k["correlation_id"], k["end"] - k["start"]) for k in kernels
                 if k["end"] - k["start"] != KERNEL_NS]
        self.assertEqual(wrong, [], "%d of %d kernels (%d graph) with a duration the GPU never "
                         "ran" % (len(wrong), len(kernels), len(graph)))
        summary = tr.last_json()
        self.assertEqual(summary[C.kernels_matched], summary[C.kernel_records])
        self.assertEqual(summary[C.orphan_correlations_graph], 0, summary)

    def test_classic_consumer(self):
        # parcagpu-trace attaches pc_sample_batch: with PC sampling off it consumes launches and
        # kernels alone (sampling windows, kernel activity switched per announced launch).
        self.check([], env={"PARCAGPU_PC_SAMPLING": "0"})

    def test_pc_sample_consumer(self):
        # Long enough for PC sampling's episodes to end (kernel activity is held on during one)
        # and for activity to be switched per launch between them.
        self.check(["--pc"], seconds=8)

    def test_an_event_failure_is_said_once_and_kernels_still_come(self):
        # Without the event the library cannot tell when a graph's kernels end: kernel activity
        # goes off at the end of the call as before, which is said, once.
        r, tr = run(env={"MOCK_CUDA_FAIL": "cuEventRecord", "PARCAGPU_PC_SAMPLING": "0"})
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertGreater(r.summary["cuda_injected_failures"], 0, "fault not hit")
        reported_once(self, r, "cuEventRecord failed",
                      "graph launches whose end could not be watched")
        summary = tr.last_json()
        self.assertGreater(summary[C.graph_kernels_matched], 0)
        self.assertEqual(summary[C.kernels_matched], summary[C.kernel_records])


if __name__ == "__main__":
    unittest.main()
