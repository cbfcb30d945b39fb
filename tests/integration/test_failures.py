#!/usr/bin/env python3
"""Bad input and CUPTI failures: a clear message, the error probe, and the application runs on
to a clean exit. Failures come from the mock (MOCK_CUPTI_FAIL), never from the library."""
import unittest

import harness

ENTRY_POINTS = ["cuptiSubscribe", "cuptiEnableCallback", "cuptiActivityRegisterCallbacks",
                "cuptiActivityEnable", "cuptiActivityDisable", "cuptiActivityFlushAll",
                "cuptiActivityGetNextRecord", "cuptiActivityGetNumDroppedRecords",
                "cuptiUnsubscribe", "cuptiGetVersion", "cuptiGetResultString", "cuptiGetGraphId",
                "cuptiGetGraphNodeId", "cuptiGetGraphExecId", "cuptiGetTimestamp"]


class Failures(unittest.TestCase):
    def test_each_failing_entry_point_leaves_the_app_running(self):
        # With a consumer attached, so the activity paths are exercised too.
        with harness.Bpftrace() as bt:
            runs = {}
            for ep in ENTRY_POINTS:
                runs[ep] = harness.run_mockapp(
                    ["--scenario=eager-runtime,graph-driver,capture,conditional,hostonly-graph"],
                    env=dict(harness.UNLIMITED, MOCK_CUPTI_FAIL=ep))
        bt.stop()
        for ep, r in runs.items():
            with self.subTest(entry_point=ep):
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                self.assertEqual(len(r.summaries), 1, "the app did not finish")
        # Subscription refused: one clear line, and the library stays inert.
        sub = runs["cuptiSubscribe"]
        self.assertTrue(any("cuptiSubscribe failed" in l for l in sub.parcagpu_errors()),
                        sub.stderr)
        self.assertEqual(sub.summary["enabled_callbacks"], [])
        # Activity refused (consumer attached): reported, launches still announced.
        act = runs["cuptiActivityEnable"]
        self.assertTrue(any("cuptiActivityEnable" in l for l in act.parcagpu_errors()))
        pid = act.summary["pid"]
        self.assertTrue([c for c in bt.correlations if c[0] == pid])
        self.assertTrue([e for e in bt.errors if e[0] == pid and e[2] == "activity"],
                        "the error probe carried the failure")

    def test_out_of_memory_from_cupti(self):
        with harness.Bpftrace() as bt:
            # Every launch announced: kernel activity is asked for at the first launch, whatever
            # the coin picks (a 4-launch scenario at the default rates may announce none).
            r = harness.run_mockapp(["--scenario=eager-runtime"],
                                    env=dict(harness.UNLIMITED,
                                             MOCK_CUPTI_FAIL="cuptiActivityEnable:OUT_OF_MEMORY"))
        bt.stop()
        self.assertEqual(r.returncode, 0)
        self.assertTrue(any("CUPTI_ERROR_OUT_OF_MEMORY" in l or "out of memory" in l.lower()
                            for l in r.parcagpu_errors()), r.stderr)

    def test_missing_libcupti(self):
        r = harness.run_mockapp(["--scenario=eager-runtime"],
                                env={"PARCAGPU_CUPTI_PATH": "/nonexistent/libcupti.so"})
        self.assertEqual(r.returncode, 0, r.stderr)
        errs = r.parcagpu_errors()
        self.assertEqual(len(errs), 1, errs)
        self.assertIn("/nonexistent/libcupti.so", errs[0])
        self.assertIn("inert", errs[0])
        self.assertGreater(r.summary["kernels_run"], 0)

    def test_bad_configuration_warns_names_and_uses_defaults(self):
        with harness.Bpftrace() as bt:
            # A timed mix long enough that the default rates announce some of it (launches are
            # picked by a coin, so a scenario of a few launches may announce none).
            r = harness.run_mockapp(["--duration=2s", "--launch-rate=500"],
                                    env={"PARCAGPU_RATE_LIMIT": "fast",
                                         "PARCAGPU_GRAPH_RATE_LIMIT": "-3",
                                         "PARCAGPU_RATELIMIT": "5"})
        bt.stop()
        self.assertEqual(r.returncode, 0)
        errs = "\n".join(r.parcagpu_errors())
        self.assertIn('PARCAGPU_RATE_LIMIT="fast"', errs)
        self.assertIn('PARCAGPU_GRAPH_RATE_LIMIT="-3"', errs)
        self.assertIn('PARCAGPU_RATELIMIT="5": unknown variable', errs)
        pid = r.summary["pid"]
        self.assertEqual(len([e for e in bt.errors if e[0] == pid and e[2] == "config"]), 3)
        # Defaults in force: a sample of the launches is announced, not none and not all.
        announced = len([c for c in bt.correlations if c[0] == pid])
        launched = sum(r.summary["launches_by_cbid"].values())
        self.assertGreater(announced, 0)
        self.assertLess(announced, launched // 2, (announced, launched))

    def test_preload_and_injection_start_once(self):
        r = harness.run_mockapp(["--preload", "--scenario=eager-runtime"],
                                env={"PARCAGPU_DEBUG": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("starting (LD_PRELOAD)"), 1, r.stderr)
        self.assertIn("already started; CUDA_INJECTION64_PATH ignored", r.stderr)
        self.assertEqual(r.summary["from_start_missing"], [])  # subscribed

    def test_preload_alone_starts_from_the_constructor(self):
        r = harness.run_mockapp(["--preload", "--no-inject", "--scenario=eager-runtime"],
                                env={"PARCAGPU_DEBUG": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("starting (LD_PRELOAD)", r.stderr)
        self.assertEqual(r.summary["from_start_missing"], [])  # subscribed


class TimestampBuffers(unittest.TestCase):
    """CUPTI keeps the GPU's kernel timestamps in buffers of its own on every context, in GPU
    memory by default since CUDA 12.0 Update 1: 14 MiB of a PyTorch process's GPU memory on an
    H200, 2 MiB with them in page-locked host memory (docs/cupti-facts.md, GPU memory). The
    library asks for host memory before any context exists; PARCAGPU_ACTIVITY_HOST_MEMORY=0 keeps
    CUPTI's default; a CUPTI that refuses leaves its default and nothing else changes."""

    def run_with(self, env):
        trace = harness.Trace()
        r = harness.run_mockapp(["--scenario=eager-runtime,graph-driver"],
                                env=dict(harness.UNLIMITED, PARCAGPU_DEBUG="1", **env))
        trace.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(len(r.exit_reports), 1, r.stderr[-2000:])
        # Kernels timed alike wherever their timestamps were kept.
        j = trace.result
        self.assertEqual(j[harness.COUNTER.kernel_records], r.summary["kernels_run"])
        self.assertEqual(j[harness.COUNTER.kernels_matched], r.summary["kernels_run"])
        return r

    def test_host_memory_by_default(self):
        r = self.run_with({})
        self.assertEqual(r.exit_reports[0]["activity_buffers"], "host")
        self.assertIn("kernel timestamps kept in page-locked host memory", r.stderr)

    def test_cuptis_default_kept_when_asked(self):
        r = self.run_with({"PARCAGPU_ACTIVITY_HOST_MEMORY": "0"})
        self.assertEqual(r.exit_reports[0]["activity_buffers"], "device")

    def test_refused_leaves_cuptis_default(self):
        r = self.run_with({"MOCK_CUPTI_FAIL": "cuptiActivitySetAttribute:NOT_SUPPORTED"})
        self.assertEqual(r.exit_reports[0]["activity_buffers"], "device")
        self.assertIn("kernel timestamps kept in CUPTI's device buffers", r.stderr)


if __name__ == "__main__":
    harness.main()
