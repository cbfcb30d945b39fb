#!/usr/bin/env python3
"""Capture-site attribution end to end (issue 5, item 3): parcagpu-trace --capture-sites on the
mock app's `capture` scenario, which records three launches into a graph in the function
scenario_capture (tools/mock/mockapp_workload.cc) and replays the graph four times. Every graph kernel
must be traced back, through the graph_node_clone map, to its graph_capture_launch, and the user
stack taken there must name scenario_capture. The mock process lives a few milliseconds: its
stacks are symbolized from the mappings the kernel reported (perf mmap records), not from
/proc/PID/maps, which is gone by the time the events are read."""
import os
import re
import shutil
import tempfile
import unittest

import harness

C = harness.COUNTER  # the summary's counters, by name (tools/trace/counters.h)

MECHANISM = re.compile(r"\((libparcagpu[^)]*|libcupti[^)]*|libcuda\.so[^)]*)\)$")


class CaptureSites(unittest.TestCase):
    def traced(self, scenarios, trace_args=("--capture-sites",), lib=harness.LIB):
        with harness.Trace(extra=list(trace_args), lib=lib) as tr:
            r = harness.run_mockapp(["--scenario=" + scenarios], env=harness.UNLIMITED, lib=lib)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr)
        return r, tr

    def assert_named_scenario_capture(self, sites):
        for site in sites:
            self.assertIn("scenario_capture", site["captured_at"], site)
            self.assertTrue(any("scenario_capture" in f for f in site["stack"]), site)
            self.assertTrue(site["stack"][0].lstrip("?").startswith(site["captured_at"]), site)
            for f in site["stack"]:
                self.assertIsNone(MECHANISM.search(f), "mechanism frame kept: %s" % f)

    def test_graph_kernels_point_back_to_scenario_capture(self):
        r, tr = self.traced("capture")
        j, s = tr.result, r.summary
        self.assertGreater(s["captured_launches"], 0)
        self.assertEqual(j[C.graph_capture_launches], s["captured_launches"])
        # Captured launches are recorded, never run: no cuda_correlation for them.
        self.assertEqual(harness.cbid_key(j[C.correlations_by_cbid]),
                         {harness.signed_cbid("cudaGraphLaunch"): 4})
        self.assertEqual(j[C.kernel_records], s["kernels_run"])
        self.assertEqual(j[C.graph_kernel_records], s["graph_kernels_run"])
        self.assertGreaterEqual(j[C.graph_node_clones], s["captured_launches"])
        self.assertEqual(j[C.graph_kernels_with_capture_site], j[C.graph_kernel_records])
        self.assertEqual(j[C.graph_kernels_without_capture_site], 0)
        sites = j["capture_sites"]
        self.assertEqual({c["kernel"] for c in sites}, {"_Z5k_addPfi", "_Z5k_mulPfi"}, sites)
        self.assertEqual(sum(c["records"] for c in sites), j[C.graph_kernel_records])
        self.assertTrue(all(c["total_ns"] > 0 for c in sites), sites)
        self.assert_named_scenario_capture(sites)
        self.assertEqual(j[C.ringbuf_drops], 0)
        self.assertEqual(j[C.read_errors], 0)

    def test_counters_without_capture_sites(self):
        r, tr = self.traced("capture", trace_args=())
        j = tr.result
        self.assertEqual(j[C.graph_capture_launches], r.summary["captured_launches"])
        self.assertEqual(j[C.graph_kernels_with_capture_site], j[C.graph_kernel_records])
        self.assertEqual(j[C.graph_kernels_without_capture_site], 0)
        self.assertNotIn("capture_sites", j)

    def test_built_graphs_and_conditional_bodies_have_no_capture_site(self):
        _, alone = self.traced("capture")
        captured_kernels = alone.result[C.graph_kernel_records]
        r, tr = self.traced("graph-runtime,capture,conditional,graph-driver")
        j = tr.result
        self.assertEqual(j[C.graph_kernels_with_capture_site], captured_kernels)
        self.assertEqual(j[C.graph_kernels_with_capture_site] +
                         j[C.graph_kernels_without_capture_site], j[C.graph_kernel_records])
        self.assertGreater(j[C.graph_kernels_without_capture_site], 0)
        self.assertEqual(sum(c["records"] for c in j["capture_sites"]), captured_kernels)
        self.assert_named_scenario_capture(j["capture_sites"])
        self.assertEqual(j[C.orphan_kernels], 0)

    def test_live_table_and_summary(self):
        with harness.TraceTool(["-l", os.path.abspath(harness.LIB), "--capture-sites", "-k"]) as tr:
            r = harness.run_mockapp(["--scenario=capture"], env=harness.UNLIMITED)
        tr.stop()
        self.assertEqual(r.returncode, 0)
        self.assertEqual(tr.proc.returncode, 0, tr.stderr)
        rows = [l for l in tr.stdout.splitlines() if "cudaGraphLaunch(311)" in l]
        self.assertEqual(len(rows), r.summary["graph_kernels_run"], tr.stdout)
        # -k: each graph kernel row ends with the frame it was captured at.
        self.assertTrue(all(re.search(r"scenario_capture \(mockapp_workload\.cc:\d+\)$", l) for l in rows),
                        tr.stdout)
        # The summary: GPU time under the capture stack, and the capture sites with their stack.
        self.assertRegex(tr.stdout, r"GPU time by launch stack \(graph kernels by capture stack\): "
                         r".* in %d kernels, 1 stack" % r.summary["graph_kernels_run"])
        self.assertRegex(tr.stdout, r"stack +mockapp::\(anonymous namespace\)::scenario_capture")
        self.assertRegex(tr.stdout, r"captured at .*scenario_capture")
        self.assertRegex(tr.stdout, r"=> #0\s+.*scenario_capture")

    def test_library_without_the_capture_probes(self):
        # An older library: the same file with the two probes renamed in its SDT notes. The
        # other probes attach and work; the missing ones are a -v note, not an error.
        tmp = tempfile.mkdtemp(prefix="parcagpu-oldlib-")
        try:
            old = os.path.join(tmp, "libparcagpu.so")
            shutil.copy(harness.LIB, old)
            with open(old, "rb") as f:
                data = f.read()
            for name in (b"graph_capture_launch", b"graph_node_clone"):
                needle = b"parcagpu\0" + name + b"\0"
                self.assertGreater(data.count(needle), 0, name)  # one note per firing site
                data = data.replace(needle, b"parcagpu\0" + name[:-1].upper() + b"X\0")
            with open(old, "wb") as f:
                f.write(data)
            r, tr = self.traced("capture", trace_args=("--capture-sites", "-v"), lib=old)
            attached = int(re.search(r"attached (\d+) probes", tr.stderr)[1])
            # 14 probes: parcagpu-trace attaches its own, less the two renamed; without --pc neither the five PC probes.
            self.assertEqual(attached, 5, tr.stderr[-3000:])
            self.assertRegex(tr.stderr, r"probe graph_capture_launch not in .*not attached")
            self.assertRegex(tr.stderr, r"probe graph_node_clone not in .*not attached")
            j = tr.result
            self.assertEqual(j[C.graph_capture_launches], 0)
            self.assertEqual(j[C.graph_node_clones], 0)
            self.assertEqual(j[C.graph_kernels_without_capture_site], j[C.graph_kernel_records])
            self.assertEqual(j["capture_sites"], [])
            self.assertEqual(j[C.kernel_records], r.summary["kernels_run"])
            self.assertEqual(j[C.orphan_kernels], 0)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    harness.main()
