#!/usr/bin/env python3
"""Kernel names longer than a consumer reads (issue 43 item 2, issue 42 item 3), end to end on the
mock with real eBPF.

The production agent keeps a PC record's function name to 127 bytes and a kernel record's name to
255 (docs/probe-abi.md); parcagpu-trace's probes copy no more. The mock cubin has four kernels whose
mangled names are longer (tools/mock/pc_kernels.cu): two of 167 bytes, two of 305, all four alike
in their first 127 bytes, the two long ones in their first 255. parcagpu-mockapp launches them by
name (--kernel-names), and parcagpu-trace --pc must show each as its own kernel, whole and
demangled, in the text report and the JSON.
"""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import harness

C = harness.COUNTER  # the summary's counters, by name (tools/trace/counters.h)

NAMESPACE, NESTED, mangled = harness.LONG_NAMESPACE, harness.LONG_NESTED, harness.long_kernel_name

# Mangled name -> demangled.
LONG = {mangled("variant", 1, False): "void %s::variant<1>(float*)" % NAMESPACE,
        mangled("variant", 2, False): "void %s::variant<2>(float*)" % NAMESPACE,
        mangled("deep", 1, True): "void %s::%s::deep<1>(float*)" % (NAMESPACE, NESTED),
        mangled("deep", 2, True): "void %s::%s::deep<2>(float*)" % (NAMESPACE, NESTED)}


def name_hash(name):
    """parcagpu_name_hash (include/parcagpu/abi.h): 64-bit FNV-1a."""
    h = 14695981039346656037
    for b in name.encode():
        h = ((h ^ b) * 1099511628211) % (1 << 64)
    return h


def stand_in(name, limit):
    """What the library hands over for a name longer than `limit` (parcagpu_name_stand_in)."""
    return name if len(name) <= limit else name[:limit - 17] + "#%016x" % name_hash(name)


class LongNames(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # The names are the cubin's: a mock kernel of another name is not sampled.
        cubin = os.path.join(harness.BUILD, "tools", "mock", "pc_kernels.cubin")
        syms = subprocess.run(["readelf", "-sW", cubin], capture_output=True, text=True).stdout
        for name in LONG:
            assert name in syms, "%s is not a symbol of the mock cubin" % name
        assert min(len(n) for n in LONG) > 127 and len({n[:127] for n in LONG}) == 1
        assert len({n[:255] for n in LONG if len(n) > 255}) == 1

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="parcagpu-names-")
        self.names = os.path.join(self.tmp, "names.txt")
        with open(self.names, "w") as f:
            f.write("\n".join(list(LONG) + ["_Z5k_addPfi"]) + "\n")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_traced(self, args):
        tool = harness.TraceTool(["-l", harness.LIB, "--pc"] + args)
        # Eager launches only: a kernel first run in a graph between episodes is never sampled
        # (P19, the mock as the H100), which the report of kernels never sampled shows.
        r = harness.run_mockapp(["--duration=2s", "--launch-rate=400", "--graph-rate=0",
                                 "--kernel-names=" + self.names], env=harness.UNLIMITED)
        tool.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tool.proc.returncode, 0, tool.stderr)
        return tool, r.summary["pid"]

    @unittest.skipIf(harness.PERSONALITY == "12", "CUPTI older than 12.4: no PC sampling")
    def test_pc_report_names_each_long_kernel_whole(self):
        tool, pid = self.run_traced(["--json"])
        pc = tool.last_json()["pc"]
        mine = {k["function"]: k for k in pc["kernels"] if k["pid"] == pid}
        for name, demangled in LONG.items():
            self.assertIn(name, mine, "not a kernel of its own, whole: %s\nkernels: %s" % (name, list(mine)))
            k = mine[name]
            self.assertGreater(k["samples"], 0, k)
            self.assertNotIn("name_cut", k)
            self.assertEqual(k["demangled"], demangled)
            self.assertTrue(any(h.get("file", "").endswith("pc_kernels.cu") for h in k["hot_pcs"]), k)
        self.assertFalse([f for f in mine if len(f) == 127], "a name still cut at 127 bytes")
        self.assertEqual(pc["names_left_cut"], 0, pc)
        self.assertGreater(pc["names_completed_from_cubin"], 0, pc)

        tool, pid = self.run_traced([])
        for demangled in LONG.values():
            self.assertRegex(tool.stdout, r"\n +\d+\. %s  \(pid %d\)\n" % (re.escape(demangled), pid))

    def test_what_the_agent_receives_fits_and_tells_the_kernels_apart(self):
        # Issue 42 item 3: the production agent reads 127 bytes of a PC function name and 255 of
        # a kernel record's name. The library hands over each longer name as its stand-in, of
        # exactly that length: the kernels stay apart, and the whole name is the cubin symbol with
        # the stand-in's hash. parcagpu-trace reads the names as the agent does, and shows them
        # whole (with --pc, which reads the cubins).
        tool, pid = self.run_traced(["--json"])
        j = tool.last_json()
        by_name = j[C.kernels_by_name]
        for name in LONG:
            self.assertIn(stand_in(name, 255), by_name, "kernel names received: %s" % list(by_name))
        self.assertFalse([n for n in by_name if len(n) == 255 and "#" not in n], "a name cut at 255")
        shown = {k["kernel"]: k["demangled"] for s in j["gpu_time_by_stack"] for k in s["by_kernel"]}
        for name, demangled in LONG.items():
            self.assertEqual(shown.get(stand_in(name, 255)), demangled, shown)
        if harness.PERSONALITY == "12":
            return  # CUPTI older than 12.4: no PC sampling, the kernel records only
        mine = {k["function"]: k for k in j["pc"]["kernels"] if k["pid"] == pid}
        for name in LONG:
            self.assertEqual(mine[name].get("received_name"), stand_in(name, 127), mine[name])


if __name__ == "__main__":
    unittest.main()
