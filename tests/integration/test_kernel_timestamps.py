#!/usr/bin/env python3
"""Kernel timestamps at the default rates (docs/cupti-facts.md fact 12: a graph kernel that
finishes while kernel activity is disabled): real CUPTI gives such a graph kernel an end near the
next time kernel activity is enabled, and the mock CUPTI does the same. The library keeps kernel
activity on until an announced graph launch's kernels have finished
(src/trackers/graph_completion.h), so
every kernel record a consumer gets lasts what the mock GPU ran it for, graph kernels included,
with a classic consumer and with a PC-sample consumer (the production agent's configuration).
The kernels run 200 us each (MOCK_CUDA_KERNEL_NS), so a graph's are still running when its
launch call returns, as they are on a real GPU.

Every kernel record's times must be possible (tools/trace/timestamp_check.h): the consumers count none
impossible here (and harness checks that for every test whose consumers read kernels), and they
do count the mock's spoiled ones (MOCK_CUPTI_BAD_TIMESTAMPS), say so, and leave them out of the
GPU time."""
import os
import re
import sys
import unittest

import harness

sys.path.insert(0, os.path.join(harness.SOURCE, "scripts"))
from trace_json import json_lines  # noqa: E402 (--json-lines' objects)

C = harness.COUNTER  # the summary's counters, by name (tools/trace/counters.h)
from test_reliability import reported_once

KERNEL_NS = 200000
MIX = ["--launch-rate=1000", "--graph-rate=200"]


def run(extra_trace=(), env=None, seconds=3, allow_impossible=False):
    with harness.TraceTool(["-l", os.path.abspath(harness.LIB), "--json-lines"] +
                           list(extra_trace), allow_impossible=allow_impossible) as tr:
        r = harness.run_mockapp(MIX + ["--duration=%ds" % seconds],
                                env=dict(env or {}, MOCK_CUDA_KERNEL_NS=str(KERNEL_NS)))
    tr.stop()
    return r, tr


class KernelTimestamps(unittest.TestCase):
    def check(self, extra_trace, env=None, seconds=3, orphans_allowed=0):
        r, tr = run(extra_trace, env, seconds)
        self.check_kernels(r, tr, orphans_allowed)
        return r, tr

    def check_kernels(self, r, tr, orphans_allowed):
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr[-2000:])
        kernels = list(json_lines(tr.stdout.splitlines(), "kernel"))
        graph = [k for k in kernels if k["graph_id"]]
        self.assertGreater(len(graph), 0, "no graph kernel of an announced launch arrived")
        self.assertGreater(len(kernels) - len(graph), 0, "no eager kernel arrived")
        wrong = [(k["api"], k["correlation_id"], k["end"] - k["start"]) for k in kernels
                 if k["end"] - k["start"] != KERNEL_NS]
        self.assertEqual(wrong, [], "%d of %d kernels (%d graph) with a duration the GPU never "
                         "ran" % (len(wrong), len(kernels), len(graph)))
        summary = tr.last_json()
        self.assertEqual(summary[C.kernels_matched], summary[C.kernel_records])
        self.assertLessEqual(summary[C.orphan_correlations_graph], orphans_allowed, summary)
        self.assertEqual(summary[C.impossible_kernel_records], 0, summary)
        self.assertEqual([k for k in kernels if "impossible" in k], [])

    def test_classic_consumer(self):
        # parcagpu-trace attaches pc_sample_batch: with PC sampling off it consumes launches and
        # kernels alone (sampling windows, kernel activity switched per announced launch).
        self.check([], env={"PARCAGPU_PC_SAMPLING": "0"})

    def test_pc_sample_consumer(self):
        # Long enough for PC sampling's episodes to end (kernel activity is held on during one)
        # and for activity to be switched per launch between them.
        self.check(["--pc"], seconds=8)

    def test_records_cupti_finishes_after_the_grace(self):
        # Real CUPTI can finish a graph kernel's record later than the library's grace after the
        # GPU is past the launch (an H200 under PyTorch: 12 of 411 announced graph launches, every
        # kernel "lasting" 23-146 ms, docs/cupti-facts.md); a disable meanwhile gives it the next
        # enable's time as its end. The mock does so at a lag of 5 ms (the grace is 2 ms): no
        # such made-up end may reach a consumer; those records are counted and said once.
        # Those launches reach the consumer without kernels (orphans) until the library has
        # lengthened its grace past the lag (2 -> 8 ms once the first made-up end is read, within
        # the flush interval of 1 s): the first second's, none after.
        r, tr = self.check([], env={"PARCAGPU_PC_SAMPLING": "0",
                                    "MOCK_CUPTI_GRAPH_RECORD_LAG_US": "5000"},
                           seconds=5, orphans_allowed=10**6)
        summary = tr.last_json()
        self.assertGreater(summary[C.graph_launches_with_kernels],
                           2 * summary[C.orphan_correlations_graph], summary)
        self.assertGreater(r.exit_reports[0]["stats"]["graph_ends_stretched"], 0,
                           "the mock made up no end: the lag did not outlast the grace")
        reported_once(self, r, "came with an end CUPTI wrote after kernel activity went off",
                      "graph kernel records with an end CUPTI wrote after kernel activity went "
                      "off")

    def test_an_event_failure_is_said_once_and_kernels_still_come(self):
        # Without the event the library cannot tell when a graph's kernels end: kernel activity
        # goes off at the end of the call as before, which is said, once. Graph kernels that end
        # while it is off get the next enable's time as their end (docs/cupti-facts.md), which
        # can make their device's second overfull: impossible records are allowed here.
        r, tr = run(env={"MOCK_CUDA_FAIL": "cuEventRecord", "PARCAGPU_PC_SAMPLING": "0"},
                    allow_impossible=True)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertGreater(r.summary["cuda_injected_failures"], 0, "fault not hit")
        reported_once(self, r, "cuEventRecord failed",
                      "graph launches whose end could not be watched")
        summary = tr.last_json()
        self.assertGreater(summary[C.graph_kernels_matched], 0)
        self.assertEqual(summary[C.kernels_matched], summary[C.kernel_records])


class ImpossibleRecords(unittest.TestCase):
    """The mock CUPTI spoils every 10th kernel record's times (MOCK_CUPTI_BAD_TIMESTAMPS): both
    consumers count them, by reason, say so at the end, and parcagpu-trace leaves them out of the
    GPU time."""

    def spoil(self, mode, reason, agent_reason):
        lib = os.path.abspath(harness.LIB)
        with harness.TraceTool(["-l", lib, "--json"], allow_impossible=True) as js, \
                harness.TraceTool(["-l", lib], allow_impossible=True) as text, \
                harness.AgentConsumer(lib=lib, allow_impossible=True) as agent:
            r = harness.run_mockapp(MIX + ["--duration=2s"],
                                    env={"MOCK_CUDA_KERNEL_NS": str(KERNEL_NS),
                                         "MOCK_CUPTI_BAD_TIMESTAMPS": mode,
                                         "PARCAGPU_PC_SAMPLING": "0"})
            js.stop()
            text.stop()
            agent.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(len(r.exit_reports), 1, r.stderr[-2000:])
        spoiled = r.exit_reports[0]["stats"]["records_spoiled"]
        self.assertGreater(spoiled, 0, "the mock spoiled no record")
        # parcagpu-trace: the counter and its reason in the JSON summary ...
        summary = js.last_json()
        n = harness.impossible_records(summary)
        self.assertGreater(n, 0, summary)
        self.assertLessEqual(n, spoiled, summary)
        self.assertEqual(summary[reason], n, summary)
        # ... left out of the GPU time (a kernel of an hour would have made hours of it) ...
        self.assertLess(summary[C.gpu_ns_matched], 60 * 10**9, summary)
        # ... and the report's line.
        m = re.search(r"impossible kernel records: (\d+) of (\d+) \(([^)]*)\), left out of the "
                      r"GPU time", text.stdout)
        self.assertIsNotNone(m, text.stdout[-3000:])
        self.assertGreater(int(m[1]), 0)
        # agent-consumer: its JSON (the total and the process's reasons) and its closing line.
        total = harness.impossible_records(agent.result)
        self.assertGreater(total, 0, agent.result)
        self.assertLessEqual(total, spoiled)
        p = agent.process(r.summary["pid"])
        self.assertEqual(p["impossible_kernel_records"], total)
        self.assertEqual(p["impossible_by_reason"][agent_reason], total, p["impossible_by_reason"])
        self.assertRegex(agent.stderr, r"agent-consumer: %d impossible kernel records of \d+ "
                         r"\(%s %d\)" % (total, agent_reason, total))
        # The harness's shared check refuses such summaries.
        with self.assertRaises(AssertionError):
            harness.check_no_impossible_records(summary)
        with self.assertRaises(AssertionError):
            harness.check_no_impossible_records(agent.result)

    def test_reversed(self):
        self.spoil("reversed", C.impossible_reversed, "reversed")

    def test_long(self):
        self.spoil("long", C.impossible_longer_than_process, "longer_than_process")

    def test_overlap(self):
        self.spoil("overlap", C.impossible_stream_overlap, "stream_overlap")


if __name__ == "__main__":
    unittest.main()
