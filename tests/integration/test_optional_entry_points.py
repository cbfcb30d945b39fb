#!/usr/bin/env python3
"""Degrade, don't die (issue 9, item 4): a libcupti without one of the entry points the eager path
does not need is still used. The mock hides entry points from dlsym (MOCK_CUPTI_HIDE); with each
optional one of src/base/cupti_api.h's table hidden in turn, eager and graph launches must be
announced and their kernels delivered as with nothing hidden, only what needed the missing entry
point may be off, and one `error` probe with one line must name it. A missing required one leaves
the library inert, saying which."""
import os
import re
import unittest

import harness

SCENARIOS = "--scenario=eager-runtime,graph-driver,capture,conditional,hostonly-graph"


def optional_entry_points():
    """The PARCAGPU_CUPTI_OPTIONAL list of src/base/cupti_api.h: entry points added there later are
    covered too."""
    with open(os.path.join(harness.SOURCE, "src", "base", "cupti_api.h")) as f:
        text = f.read()
    block = text.split("#define PARCAGPU_CUPTI_OPTIONAL(X)", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"X\((cupti\w+),", block)


OPTIONAL = optional_entry_points()
# What the suite's mock CUPTI lacks anyway: CUDA 12.0's CUPTI had no cuptiGetGraphExecId.
ABSENT = ["cuptiGetGraphExecId"] if harness.PERSONALITY == "12" else []


class OptionalEntryPoints(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.runs = {}
        with harness.Bpftrace() as bt:
            for name in [None] + OPTIONAL + [",".join(OPTIONAL)]:
                env = dict(harness.UNLIMITED)
                if name:
                    env["MOCK_CUPTI_HIDE"] = name
                cls.runs[name] = harness.run_mockapp([SCENARIOS], env=env)
            # Without a required one, nothing else on the machine may stand in: isolated.
            cls.null_userdata = harness.run_mockapp([SCENARIOS], env=dict(
                harness.UNLIMITED, MOCK_CUPTI_NULL_USERDATA="1"))
            cls.required = harness.run_mockapp([SCENARIOS], env=dict(
                harness.UNLIMITED, MOCK_CUPTI_HIDE="cuptiSubscribe"), isolated=True)
        cls.bt = bt.stop()

    def seen(self, run):
        """What consumers got from one run: announced launches by cbid, delivered kernels (by
        announced launch), capture launches, clones and error probes."""
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])
        pid = run.summary["pid"]
        corrs = {}
        for c in self.bt.correlations:
            if c[0] == pid:
                corrs[c[2]] = corrs.get(c[2], 0) + 1
        announced = {c[1] for c in self.bt.correlations if c[0] == pid}
        kernels = [k for k in self.bt.kernels if k[0] == pid]
        self.assertTrue(all(k[1] in announced for k in kernels), "a kernel of no announced launch")
        return {
            "corrs": corrs,
            "kernels": len(kernels),
            "captures": [c for c in self.bt.captures if c[0] == pid],
            "clones": [c for c in self.bt.clones if c[0] == pid],
            "errors": [e for e in self.bt.errors if e[0] == pid],
        }

    def error_line(self, run, seen):
        """The one error probe of the run and its full line on stderr (bpftrace cuts at 64)."""
        self.assertEqual(len(seen["errors"]), 1, seen["errors"])
        _, _, component, message = seen["errors"][0]
        self.assertEqual(component, "cupti")
        lines = [l for l in run.stderr.splitlines() if "cupti: " + message in l]
        self.assertEqual(len(lines), 1, run.stderr[-3000:])
        return lines[0]

    def test_table_lists_the_graph_and_time_entry_points(self):
        for name in ("cuptiGetGraphId", "cuptiGetGraphNodeId", "cuptiGetGraphExecId",
                     "cuptiGetTimestamp"):
            self.assertIn(name, OPTIONAL)

    def test_nothing_hidden_is_the_baseline(self):
        run = self.runs[None]
        base = self.seen(run)
        if ABSENT:
            line = self.error_line(run, base)
            for name in ABSENT:
                self.assertIn("lacks %s (" % name, line)
        else:
            self.assertEqual(base["errors"], [])
        s = self.runs[None].summary
        self.assertEqual(base["kernels"], s["kernels_run"])
        self.assertGreater(s["conditional_kernels_run"], 0)
        self.assertTrue(base["clones"])
        self.assertTrue(all(c[2] != 0 and c[3] != 0 for c in base["captures"]), base["captures"])

    def test_each_optional_entry_point_missing(self):
        base = self.seen(self.runs[None])
        conditional = self.runs[None].summary["conditional_kernels_run"]
        for name in OPTIONAL:
            with self.subTest(hidden=name):
                run = self.runs[name]
                got = self.seen(run)
                line = self.error_line(run, got)
                for missing in sorted(set(ABSENT + [name])):
                    self.assertIn(missing + " (", line)
                self.assertIn("those are off, launches are still profiled", line)
                # Eager and graph launches announced as without anything hidden.
                self.assertEqual(got["corrs"], base["corrs"])
                if name == "cuptiGetGraphId":
                    # Conditional bodies are found by graph id: their kernels are given up.
                    self.assertEqual(got["kernels"], base["kernels"] - conditional)
                    self.assertTrue(got["captures"])
                    self.assertTrue(all(c[2] == 0 for c in got["captures"]), got["captures"])
                else:
                    self.assertEqual(got["kernels"], base["kernels"])
                if name == "cuptiGetGraphNodeId":
                    self.assertEqual(got["clones"], [], "clones without node ids")
                    self.assertTrue(all(c[3] == 0 for c in got["captures"]), got["captures"])
                else:
                    self.assertEqual(len(got["clones"]), len(base["clones"]))

    def test_all_optional_entry_points_missing_one_line_names_them_all(self):
        run = self.runs[",".join(OPTIONAL)]
        got = self.seen(run)
        line = self.error_line(run, got)
        for name in OPTIONAL:
            self.assertIn(name + " (", line)
        base = self.seen(self.runs[None])
        self.assertEqual(got["corrs"], base["corrs"])
        conditional = self.runs[None].summary["conditional_kernels_run"]
        self.assertEqual(got["kernels"], base["kernels"] - conditional)

    def test_callback_with_null_userdata(self):
        # A CUPTI that calls back with NULL userdata: same launches and kernels, no crash.
        got = self.seen(self.null_userdata)
        base = self.seen(self.runs[None])
        self.assertEqual(got["corrs"], base["corrs"])
        self.assertEqual(got["kernels"], base["kernels"])

    def test_required_entry_point_missing_leaves_the_library_inert(self):
        run = self.required
        got = self.seen(run)
        self.assertEqual(got["corrs"], {})
        self.assertFalse(run.summary["subscribed"])
        self.assertGreater(run.summary["kernels_run"], 0)
        line = self.error_line(run, got)
        self.assertIn("lacks cuptiSubscribe", line)
        self.assertIn("stays inert", line)


if __name__ == "__main__":
    harness.main()
