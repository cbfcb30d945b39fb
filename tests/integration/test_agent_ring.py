#!/usr/bin/env python3
"""The production agent's one ring buffer of 1 MiB (issue 42; docs/probe-abi.md, "The agent's
limits"): at the library's default rates, with a PC sampling consumer, launching threads, graphs
and busy CPUs, nothing the library fires is lost to it. The consumer is the agent-faithful one at
the agent's defaults (harness.AgentConsumer, scale factor 0): every event but cuda_correlation's
in one 1 MiB ring, each taking the agent's room (a PC record 712 bytes), the rest of a
pc_sample_batch firing given up at the first record that does not fit.

On the library before its firings were paced (src/base/agent_ring_pacer.h), a drain of 3,000 PC
records went out in firings of 1,024 back to back, 737 KB each, and the agent gave up half of
them: the graph test lost 1,543 of 3,034 and 1,496 of 2,987 PC records in two runs (and 1,047
kernel records in the first)."""
import re
import subprocess
import sys
import unittest

import harness


# The functions of the mock's cubin (tools/mock/pc_kernels.cu): only their kernels give PC
# records.
CUBIN_KERNELS = ["_Z5k_addPfi", "_Z5k_mulPfi", "_Z10gemm_tiledPKfS0_Pfiii", "_Z7softmaxPfPKfi",
                 "_Z9reduce_sumPfPKfi"]


def busy_cpus(test, n=2):
    for _ in range(n):
        p = subprocess.Popen([sys.executable, "-c", harness.BUSY_LOOP])
        test.addCleanup(p.wait)
        test.addCleanup(p.kill)


# CUDA 12.0's CUPTI (the mock's personality 12) has no PC sampling for us (correlation IDs in PC
# records came with 12.4): the PC firings this is about do not happen there.
@unittest.skipIf(harness.PERSONALITY == "12", "CUPTI older than 12.4: no PC sampling")
class AgentRing(unittest.TestCase):
    def run_app(self, args, read_bytes_per_s=None):
        with harness.AgentConsumer(read_bytes_per_s=read_bytes_per_s) as ac:
            r = harness.run_mockapp(args, env={"PARCAGPU_DEBUG": "1"}, timeout=180)
        ac.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        return r, ac.process(r.summary["pid"]), ac.result

    def check_nothing_lost(self, r, p, j):
        self.assertEqual(j["ring_bytes"], 1 << 20)
        pc = p["pc_samples"]
        self.assertGreater(pc["records"], 0, pc)
        self.assertGreater(p["kernel_records"], 0, p)
        lost = {probe: l for probe, l in p["lost"].items() if any(l.values())}
        self.assertEqual(lost, {}, "the agent would have lost these (PC records fired %d, "
                                   "received %d)" % (pc["records_fired"], pc["records"]))
        self.assertEqual(p["ringbuf_drops"], 0, p)
        self.assertEqual(pc["records"], pc["records_fired"], pc)
        self.assertEqual(harness.pc_sampling_problems(p), [])
        # Every record the library drained was fired to the consumer.
        fired = [int(x) for x in re.findall(r"pc sampling: drains=.*? records=(\d+)", r.stderr)]
        if fired:
            self.assertEqual(pc["records"], fired[-1], r.stderr[-2000:])

    def test_graphs_threads_and_busy_cpus_at_the_default_rates(self):
        # A training step as CUDA graphs replay it: each step an eager kernel and a graph of 200
        # (the five kernels of the mock's cubin in turn, 5 us each), on two threads. One window
        # of PC sampling holds thousands of records (3,041 in one drain). The agent ring is read
        # at the slowest speed the library is paced for (harness.AGENT_READ_BYTES_PER_S).
        busy_cpus(self)
        graph = ",".join("%s:5" % CUBIN_KERNELS[i % len(CUBIN_KERNELS)] for i in range(200))
        r, p, j = self.run_app(["--gpu-bound=%s:20" % CUBIN_KERNELS[0], "--gpu-graph=" + graph,
                                "--threads=2", "--duration=8s"],
                               read_bytes_per_s=harness.AGENT_READ_BYTES_PER_S)
        self.check_nothing_lost(r, p, j)
        self.assertGreater(p["pc_samples"]["records"], 1024, "no drain larger than one firing")

    def test_the_timed_mix_with_four_threads_at_the_default_rates(self):
        busy_cpus(self)
        r, p, j = self.run_app(["--threads=4", "--duration=6s", "--launch-rate=3000",
                                "--graph-rate=300"])
        self.check_nothing_lost(r, p, j)


if __name__ == "__main__":
    unittest.main()
