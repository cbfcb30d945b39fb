#!/usr/bin/env python3
"""parcagpu-trace --pc --pprof FILE: the PC samples in the pprof profile, as sample types of their
own, labelled with their stall reason (issue 43 item 3), on the mock with real eBPF; decoded with
protoc from the tool's own tools/trace/proto/profile.proto.

A Parca or Pyroscope user who loads the profile sees, beside the GPU time by launch stack, the PC
samples (pc_samples, and pc_gpu in ns from gpu_config's sampling period) at their kernel's source
lines (-lineinfo) or PC offsets, with the labels stall_reason, kernel, device, pid and comm.
"""
import os
import shutil
import tempfile
import unittest

import harness
from test_trace_tool import decode_pprof, one


class PcPprof(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="parcagpu-pc-pprof-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_pc_samples_by_stall_reason_and_line(self):
        path = os.path.join(self.tmp, "pc.pb.gz")
        tool = harness.TraceTool(["-l", harness.LIB, "--pc", "--json", "--pprof", path])
        r = harness.run_mockapp(["--duration=2s", "--launch-rate=400", "--graph-rate=40"],
                                env=harness.UNLIMITED)
        tool.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tool.proc.returncode, 0, tool.stderr)
        pid = r.summary["pid"]
        pc = tool.last_json()["pc"]
        self.assertGreater(pc["samples"], 0, pc)
        with open(path, "rb") as f:
            p = decode_pprof(f.read())
        s = p["string_table"]
        self.assertEqual([(s[one(t, "type")], s[one(t, "unit")]) for t in p["sample_type"]],
                         [("kernels", "count"), ("gpu", "nanoseconds"),
                          ("pc_samples", "count"), ("pc_gpu", "nanoseconds")])
        self.assertEqual(s[one(p, "default_sample_type")], "gpu")
        functions = {one(f, "id"): f for f in p["function"]}
        locations = {one(l, "id"): l for l in p["location"]}
        config = [g for g in pc["gpu_configs"] if g["pid"] == pid]
        self.assertEqual(len(config), 1, pc["gpu_configs"])
        ns_per_sample = 2 ** config[0]["sampling_factor"] * 1e6 / config[0]["clock_khz"]

        by_kernel, by_reason, gpu_ns, with_line = {}, {}, 0, 0
        pc_rows = [x for x in p["sample"] if x["value"][2] or x["value"][3]]
        self.assertTrue(pc_rows)
        for x in p["sample"]:
            if x not in pc_rows:
                self.assertGreater(x["value"][0], 0)  # GPU time: no PC values
                continue
            self.assertEqual(x["value"][:2], [0, 0])  # a PC sample: no kernels, no GPU time
            labels = {s[one(l, "key")]: (s[one(l, "str")] if one(l, "str") else one(l, "num"))
                      for l in x["label"]}
            self.assertEqual(set(labels) - {"local_rank", "rank"},
                             {"stall_reason", "kernel", "device", "pid", "comm"}, labels)
            self.assertEqual((labels["pid"], labels["device"]), (pid, 0))
            self.assertTrue("parcagpu-mockapp".startswith(labels["comm"]), labels)
            by_kernel[labels["kernel"]] = by_kernel.get(labels["kernel"], 0) + x["value"][2]
            by_reason[labels["stall_reason"]] = by_reason.get(labels["stall_reason"], 0) + x["value"][2]
            gpu_ns += x["value"][3]
            # One location: the PC's line in the kernel (the mock cubin has -lineinfo).
            self.assertEqual(len(x["location_id"]), 1, x)
            line = locations[x["location_id"][0]]["line"][0]
            f = functions[one(line, "function_id")]
            self.assertEqual(s[one(f, "system_name")], labels["kernel"])
            if one(line, "line") > 0 and s[one(f, "filename")].endswith("pc_kernels.cu"):
                with_line += x["value"][2]
        # The same samples as the report, per kernel and in all.
        mine = [k for k in pc["kernels"] if k["pid"] == pid]
        self.assertEqual(by_kernel, {k["demangled"] if "demangled" in k else k["function"]: k["samples"]
                                     for k in mine})
        self.assertEqual(sum(by_reason.values()), pc["samples"])
        self.assertFalse([r for r in by_reason if r.startswith("#")], by_reason)
        self.assertGreater(with_line, pc["samples"] / 2, "most samples at a source line")
        self.assertAlmostEqual(gpu_ns, pc["samples"] * ns_per_sample, delta=len(pc_rows))


# CUDA 12.0's CUPTI (the mock's personality 12) has no PC sampling for us (correlation IDs in PC
# records came with 12.4).
if harness.PERSONALITY == "12":
    PcPprof = unittest.skip("CUPTI older than 12.4: no PC sampling")(PcPprof)

if __name__ == "__main__":
    unittest.main()
