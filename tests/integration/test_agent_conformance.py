#!/usr/bin/env python3
"""Production conformance: what the real profiler agent would see of the library is what the
mock application launched.

The consumer is build/bin/agent-consumer (tools/agent/), which attaches the way the production
agent's loader does (per probe name the last note only, only the names the agent knows, the
semaphores through the uprobe reference counter) and reads records at the offsets and sizes
the agent reads, giving up where the agent gives up (docs/probe-abi.md). Every scenario must
deliver every kernel of every announced launch to it, with no failed read.

The library under test can be swapped with PARCAGPU_TEST_LIB (harness.py); the closing note of
issue 9 runs this file against a library from before the one-site fix to show it red.

Also here: the consumer's own behaviour on known input (agent-fake-producer), and the drop-in
points for deployments of the upstream library (libparcagpucupti.so, upstream variable names).
"""
import os
import re
import subprocess
import time
import unittest

import harness

# The probes the agent attaches in a library that has all of them (docs/probe-abi.md).
AGENT_PROBES = ["cuda_correlation", "activity_batch", "cubin_loaded", "pc_sample_batch",
                "stall_reason_map", "error", "gpu_config"]


def observed(args, env=None, lib=None):
    """Runs the mock app under the library with the agent-consumer attached to it."""
    lib = lib or harness.LIB
    with harness.AgentConsumer(lib=lib) as ac:
        r = harness.run_mockapp(args, env=dict(harness.UNLIMITED, **(env or {})), lib=lib)
    ac.stop()
    return r, ac


class AgentSeesEverything(unittest.TestCase):
    """Every kernel record of an announced launch reaches the agent, and no read fails."""

    def check(self, r, ac, announced_by_cbid=None):
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(ac.proc.returncode, 0, ac.stderr)
        self.assertEqual(ac.result["attached"], AGENT_PROBES, ac.result)
        self.assertEqual(ac.result["bad_events"], 0)
        for s in r.summaries:
            p = ac.process(s["pid"])
            launched = harness.cbid_key(s["launches_by_cbid"])
            expected = launched if announced_by_cbid is None else announced_by_cbid
            got = harness.cbid_key(p["correlations_by_cbid"])
            self.assertEqual(got, expected, "announced launches by cbid")
            failures = {k: v for k, v in p["read_failures_by_kind"].items() if v}
            self.assertEqual(p["read_failures"], 0, "failed reads: %s" % failures)
            self.assertEqual(
                (p["kernel_records"], p["matched"], p["orphan_kernels"]),
                (s["kernels_run"], s["kernels_run"], 0),
                "kernel records that reached the agent (kernels run %d, records fired %d in %d "
                "batches)" % (s["kernels_run"], p["batch_records"], p["batches"]))
            self.assertEqual(p["orphan_correlations_eager"], 0, p)
            self.assertEqual(p["orphan_correlations_graph"], 0, p)
            graph_launches = sum(n for c, n in got.items() if harness.is_graph_launch(c))
            self.assertEqual(p["graph_launches_with_kernels"], graph_launches)
            self.assertEqual(p["graph_kernels_matched"], s["graph_kernels_run"])
            self.assertEqual((p["batch_over_cap"], p["batch_abandoned"], p["ringbuf_drops"]),
                             (0, 0, 0))
            self.assertEqual(p["correlation_repeats"], 0)
        return r

    def scenario(self, name, announced_by_cbid=None):
        r, ac = observed(["--scenario=" + name])
        return self.check(r, ac, announced_by_cbid)

    def test_eager_runtime(self):
        self.scenario("eager-runtime")

    def test_eager_driver(self):
        self.scenario("eager-driver")

    def test_launch_ex(self):
        self.scenario("launch-ex")

    def test_cooperative(self):
        self.scenario("cooperative")

    def test_per_thread_stream(self):
        self.scenario("ptsz")

    def test_graph_runtime(self):
        self.scenario("graph-runtime")

    def test_graph_driver(self):
        self.scenario("graph-driver")

    def test_graph_driver_per_thread_stream(self):
        self.scenario("graph-driver-ptsz")

    def test_stream_capture(self):
        r = self.scenario("capture")
        self.assertGreater(r.summary["captured_launches"], 0)

    def test_conditional_graph(self):
        r = self.scenario("conditional")
        self.assertGreater(r.summary["conditional_kernels_run"], 0)

    def test_host_only_graph_is_not_announced(self):
        r = self.scenario("hostonly-graph", announced_by_cbid={})
        self.assertGreater(r.summary["launches"], 0)

    def test_every_subscribed_launch_path(self):
        self.scenario("all-cbids")

    def test_eight_threads(self):
        # Enough kernels that activity buffers fill and full batches of 128 are fired.
        r, ac = observed(["--duration=2s", "--launch-rate=4000", "--graph-rate=400",
                          "--threads=8"])
        self.check(r, ac)
        p = ac.process(r.summary["pid"])
        self.assertGreater(p["batch_records"], 2 * 128)

    def test_two_processes(self):
        r, ac = observed(["--duration=2s", "--launch-rate=1000", "--graph-rate=200",
                          "--procs=2"])
        self.assertEqual(len(r.summaries), 2)
        self.check(r, ac)


class ConsumerReadsLikeTheAgent(unittest.TestCase):
    """The consumer itself, on known input (tools/agent/fake_producer.c)."""

    def produce(self, mode):
        with harness.AgentConsumer(lib=harness.AGENT_FAKE_PRODUCER) as ac:
            p = subprocess.Popen([harness.AGENT_FAKE_PRODUCER, mode], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                line = p.stdout.readline()
                if not line.startswith("FAKE_PRODUCER "):
                    p.stdin.close()
                    p.wait(timeout=60)  # it gives up waiting for the semaphores after 30 s
                    self.fail("agent-fake-producer %s: %r %s" % (mode, line, p.stderr.read()))
                fired = harness.json.loads(line.split(" ", 1)[1])
                # The producer stays alive until its memory has been read: the consumer reads
                # everything left in its ring buffer, cubins included, when it stops.
                ac.stop()
            finally:
                p.stdin.close()
                p.wait(timeout=30)
                p.stdout.close()
                p.stderr.close()
        self.assertEqual(p.returncode, 0)
        return fired, ac.result, ac.process(fired["pid"])

    def test_only_the_last_site_of_a_probe_is_seen(self):
        fired, j, p = self.produce("sites")
        self.assertEqual(j["sites"]["activity_batch"], 2)
        self.assertEqual(p["correlations"], fired["first_site_records"] + fired["last_site_records"])
        self.assertEqual(p["kernel_records"], fired["last_site_records"])
        self.assertEqual(p["orphan_correlations_eager"], fired["first_site_records"])
        self.assertEqual(p["read_failures"], 0)

    def test_pc_samples_stall_map_cubins_and_gpu_config(self):
        fired, _, p = self.produce("pc")
        pc = p["pc_samples"]
        self.assertEqual((pc["records_fired"], pc["records"], pc["over_cap"]), (1100, 1024, 76))
        # Per record 1 + i % 3 stall reasons of 10 samples each; the 64 - count entries behind
        # them (1000000 samples each) are copied and must not be counted.
        self.assertEqual(pc["stall_samples"], 20470)
        self.assertEqual(pc["by_stall_reason"],
                         {"stall_reason_1": 10240, "stall_reason_2": 6820, "stall_reason_3": 3410})
        self.assertEqual(pc["correlation_ids"], {"announced": 819, "unannounced": 102, "zero": 103})
        self.assertEqual(pc["records_by_crc"], {fired["crc_a"]: 768, fired["crc_b"]: 256})
        self.assertEqual(pc["function_names"], 3)
        self.assertEqual(p["stall_reason_map"]["count"], 11)
        self.assertEqual(p["stall_reason_map"]["names"][:3], ["", "stall_reason_1", "stall_reason_2"])
        self.assertEqual(p["gpu_configs"], [{"device": 0, "sampling_factor": 20,
                                             "clock_khz": 1980000, "sm_count": 132}])
        self.assertEqual(p["gpu_config_repeats"], 1)
        cubins = {c["crc"]: c for c in p["cubins"]}
        self.assertEqual(set(cubins), {fired["crc_a"], fired["crc_b"]})
        self.assertTrue(cubins[fired["crc_a"]]["readable"] and cubins[fired["crc_a"]]["elf"])
        self.assertTrue(cubins[fired["crc_b"]]["readable"])
        self.assertFalse(cubins[fired["crc_b"]]["elf"])  # 4 KiB of an ELF file
        self.assertEqual(p["cubin_repeats"], 1)
        self.assertEqual(p["read_failures"], 0)
        # The PC checks a library run is held to find exactly the bad cubin and the records
        # beyond the cap here.
        self.assertEqual(harness.pc_sampling_problems(p),
                         ["256 PC records of cubin %s, which is not a readable ELF image"
                          % fired["crc_b"],
                          "PC records the agent never reads: 76 over the cap of 1024 per firing, "
                          "0 given up after a failed read"])

    def test_a_failed_pc_read_gives_up_the_rest_of_the_firing(self):
        _, _, p = self.produce("bad-pc")
        failures = {k: v for k, v in p["read_failures_by_kind"].items() if v}
        self.assertEqual(failures, {"pc_function_name": 1, "pc_stall_reasons": 1, "pc_ptrs": 1})
        pc = p["pc_samples"]
        # 20 of 40 before the NULL functionName, 5 of 10 before the bad stallReason, 0 of 3
        # whose pointer array ends before an unreadable page (16 pointers are read at once).
        self.assertEqual((pc["records"], pc["abandoned"], pc["records_fired"]), (25, 28, 53))

    def test_a_failed_activity_read(self):
        _, _, p = self.produce("bad-batch")
        failures = {k: v for k, v in p["read_failures_by_kind"].items() if v}
        self.assertEqual(failures, {"record": 1, "record_ptrs": 1})
        self.assertEqual((p["kernel_records"], p["batch_abandoned"], p["orphan_correlations_eager"]),
                         (9, 3, 4))


class DropInForUpstreamDeployments(unittest.TestCase):
    """Deployments of the upstream library (parca-dev/parcagpu) mount libparcagpucupti.so and
    may set its environment variables."""

    def test_libparcagpucupti_is_the_library(self):
        link = os.path.join(harness.BUILD, "lib", "libparcagpucupti.so")
        self.assertTrue(os.path.islink(link), link)
        self.assertEqual(os.path.realpath(link),
                         os.path.realpath(os.path.join(harness.BUILD, "lib", "libparcagpu.so")))
        # Run through the same link beside this test's own copy of the library (harness.LIB): the
        # build tree's file is the demo's, which runs at the same time as other tests.
        private_link = os.path.join(os.path.dirname(harness.LIB), "libparcagpucupti.so")
        os.symlink(os.path.basename(harness.LIB), private_link)
        self.addCleanup(os.unlink, private_link)
        self.assertEqual(os.path.realpath(private_link), os.path.realpath(harness.LIB))
        r, ac = observed(["--scenario=eager-runtime,graph-driver"], lib=private_link)
        AgentSeesEverything.check(self, r, ac)

    def test_upstream_variables_are_understood(self):
        # Upstream's names, present and past (PARCAGPU_LIMITER_DISABLE until its April 2026
        # rewrite). PARCAGPU_DEBUG is on whenever set, as upstream has it.
        env = {"PARCAGPU_DEBUG": "", "PARCAGPU_RATE_LIMIT": "5", "PARCAGPU_GRAPH_RATE_LIMIT": "5",
               "PARCAGPU_LIMITER_DISABLE": "1"}
        with harness.AgentConsumer() as ac:
            r = harness.run_mockapp(["--duration=1s", "--launch-rate=500", "--graph-rate=50"],
                                    env=env)
        ac.stop()
        self.assertEqual(r.returncode, 0)
        p = ac.process(r.summary["pid"])
        unknown = [l for l in r.parcagpu_errors() if "unknown" in l]
        self.assertEqual(unknown, [])
        self.assertEqual([e for e in p["error_list"] if "unknown" in e["message"]], [])
        # PARCAGPU_LIMITER_DISABLE: every launch announced despite the rate limits of 5/s.
        self.assertEqual(harness.cbid_key(p["correlations_by_cbid"]),
                         harness.cbid_key(r.summary["launches_by_cbid"]))
        # PARCAGPU_DEBUG set (empty): the debug log is on, and says the limits are off.
        self.assertTrue(any("rate limits eager=1e+09/s graph=1e+09/s" in l
                            for l in r.parcagpu_errors()), r.stderr[-3000:])


if __name__ == "__main__":
    harness.main()
