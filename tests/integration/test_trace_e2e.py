#!/usr/bin/env python3
"""End to end with our own consumer: parcagpu-mockapp under the library, parcagpu-trace attached
(system-wide or to the pid), its --json summary checked against what the mock app says it
launched. The consumer reads probe arguments and the records behind activity_batch exactly as
the production agent does, so a layout mistake in the library shows up here."""
import time
import unittest

import harness

C = harness.COUNTER  # the summary's counters, by name (tools/trace/counters.h)


class TraceEndToEnd(unittest.TestCase):
    def traced(self, args, env=None, trace_args=()):
        with harness.Trace(extra=trace_args) as tr:
            r = harness.run_mockapp(args, env=env)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr)
        return r, tr.result

    # With every launch announced the consumer takes thousands of events a second, each with a
    # copy of the launching thread's stack (8 KiB by default): on a loaded 2-CPU machine the
    # default 32 MiB ring buffer can fill before parcagpu-trace drains it (443 events dropped
    # once). These tests are about joining, so they give it room; drops are still asserted 0.
    ROOMY = ("--ringbuf-mb", "256")

    def traced_all_announced(self, args):
        """A run with the rate limits raised, so every launch is announced: it must be clean and
        every launch announced."""
        r, j = self.traced(args, env=harness.UNLIMITED, trace_args=self.ROOMY)
        self.assert_clean(j)
        self.assert_everything_announced(r.summaries, j)
        return r, j

    def assert_clean(self, j):
        self.assertEqual(j[C.orphan_kernels], 0, j)
        self.assertEqual(j[C.orphan_correlations_eager], 0, j)
        self.assertEqual(j[C.orphan_correlations_graph], 0, j)
        self.assertEqual(j[C.ringbuf_drops], 0)
        self.assertEqual(j[C.read_errors], 0)
        self.assertEqual(j[C.kernels_matched], j[C.kernel_records])

    def assert_everything_announced(self, summaries, j):
        launched, kernels, graph_kernels = {}, 0, 0
        for s in summaries:
            for cbid, n in harness.cbid_key(s["launches_by_cbid"]).items():
                launched[cbid] = launched.get(cbid, 0) + n
            kernels += s["kernels_run"]
            graph_kernels += s["graph_kernels_run"]
        self.assertEqual(harness.cbid_key(j[C.correlations_by_cbid]), launched)
        self.assertEqual(j[C.kernel_records], kernels)
        # Every graph launch's kernels, all of them, arrived under its ID.
        self.assertEqual(j[C.graph_kernels_matched], graph_kernels)
        graph_launches = sum(n for c, n in launched.items() if harness.is_graph_launch(c))
        self.assertEqual(j[C.graph_launches_with_kernels], graph_launches)

    def test_default_rate_limits_one_thread(self):
        # The production configuration: a PC-sample consumer attached (--pc), default rates.
        r, j = self.traced(["--duration=2s", "--launch-rate=1000", "--graph-rate=100"],
                           trace_args=("--pc",))
        self.assert_clean(j)
        s = r.summary
        self.assertGreater(j[C.correlations], 0)
        # Per thread: 100 eager + 20 graph per second, plus one second's burst of each.
        self.assertLessEqual(j[C.correlations], (100 + 20) * 3 + 5)
        self.assertLess(j[C.correlations], s["launches"])
        for cbid, n in harness.cbid_key(j[C.correlations_by_cbid]).items():
            self.assertLessEqual(n, harness.cbid_key(s["launches_by_cbid"])[cbid])
        graph = sum(n for c, n in harness.cbid_key(j[C.correlations_by_cbid]).items()
                    if harness.is_graph_launch(c))
        self.assertGreater(graph, 0, "graph launches have their own bucket")
        self.assertEqual(j[C.pids], 1)
        # gpu_config once PC sampling is configured (pc_sample_batch attached), which needs a CUPTI
        # of 12.4 or later (not personality 12's).
        if harness.PERSONALITY == "12":
            self.assertEqual(j[C.gpu_config], 0)
        else:
            self.assertGreaterEqual(j[C.gpu_config], 1)

    def test_default_rate_limits_eight_threads(self):
        r, j = self.traced(["--duration=2s", "--launch-rate=4000", "--graph-rate=400",
                            "--threads=8"], trace_args=("--pc",))
        self.assert_clean(j)
        self.assertLessEqual(j[C.correlations], 8 * ((100 + 20) * 3 + 5))

    def test_limits_raised_one_thread(self):
        self.traced_all_announced(["--duration=2s", "--launch-rate=1000", "--graph-rate=100"])

    def test_limits_raised_eight_threads(self):
        self.traced_all_announced(["--duration=2s", "--launch-rate=4000", "--graph-rate=400",
                                   "--threads=8"])

    def test_graph_rate_half_of_the_launches(self):
        r, j = self.traced_all_announced(["--duration=2s", "--launch-rate=1000", "--graph-rate=500",
                                          "--threads=2"])
        c = harness.cbid_key(j[C.correlations_by_cbid])
        self.assertGreater(c.get(harness.signed_cbid("cuGraphLaunch"), 0), 0)
        self.assertGreater(c.get(harness.signed_cbid("cuGraphLaunch_ptsz"), 0), 0)

    def test_two_processes(self):
        r, j = self.traced_all_announced(["--duration=2s", "--launch-rate=1000", "--graph-rate=200",
                                          "--procs=2"])
        self.assertEqual(len(r.summaries), 2)
        self.assertEqual(j[C.pids], 2)

    def test_scenarios_have_no_orphans(self):
        r, j = self.traced(["--scenario=eager-runtime,eager-driver,launch-ex,cooperative,ptsz,"
                            "graph-runtime,graph-driver,graph-driver-ptsz,capture,conditional,"
                            "hostonly-graph"], env=harness.UNLIMITED)
        self.assert_clean(j)
        s = r.summary
        self.assertEqual(j[C.kernel_records], s["kernels_run"])
        # Captured launches (recorded, never run) and host-only graph launches are not announced.
        announced = sum(harness.cbid_key(j[C.correlations_by_cbid]).values())
        self.assertEqual(announced, s["launches"] - 4)  # the 4 host-only graph launches

    def test_trace_one_pid_stops_when_it_exits(self):
        # The app must outlive the tool's start: loading its BPF programs took 3-4 s here with
        # other tests running beside it (make test), and with a 3 s app the tool found no process.
        app = harness.start_mockapp(["--duration=8s", "--launch-rate=500", "--graph-rate=50"],
                                    env=harness.UNLIMITED)
        try:
            # No -d and no signal: the tool must end by itself when the process does. (Not a
            # `with` block: leaving it stops the consumer at once, which this test must not.)
            tr = harness.Trace(pid=app.pid)
            tr.proc.wait(timeout=60)
            tr.stop()
        finally:
            r = harness.finish_mockapp(app)
        self.assertEqual(tr.proc.returncode, 0, tr.stderr)
        self.assertEqual(tr.result[C.pids], 1)
        self.assertGreater(tr.result[C.kernels_matched], 0)
        self.assertEqual(tr.result[C.orphan_kernels], 0)
        self.assertEqual(r.returncode, 0)


class AttachDetach(unittest.TestCase):
    def test_attach_detach_three_times(self):
        # Each attachment takes about 3-5 s (attach, 2 s, linger, detach), over 10 s beside
        # other tests on 2 CPUs (make test runs them side by side): the app must outlive all three.
        app = harness.start_mockapp(["--duration=90s", "--launch-rate=1000", "--graph-rate=100",
                                     "--status-interval=100"])
        results = []
        windows = []  # (start, end) of each attachment, in the app's t_ms clock
        try:
            time.sleep(1.5)
            for _ in range(3):
                self.assertIsNone(app.poll(), "the app ended before the attachments did")
                t0 = time.time()
                with harness.Trace(pid=app.pid, extra=["-d", "2"]) as tr:
                    tr.proc.wait(timeout=60)
                tr.stop()
                results.append(tr.result)
                windows.append((t0, time.time()))
                time.sleep(1.5)
        finally:
            r = harness.finish_mockapp(app)
        self.assertEqual(r.returncode, 0)
        for j in results:
            self.assertGreater(j[C.kernels_matched], 0, j)
            self.assertEqual(j[C.orphan_kernels], 0, j)
        statuses = r.statuses
        self.assertGreater(len(statuses), 50)
        # Before the first attachment nothing is collected; after each detachment kernel
        # activity is switched off again (the library notices within its flush interval).
        self.assertFalse(any(s["activity_enabled"] for s in statuses if s["t_ms"] < 1000))
        self.assertEqual(statuses[0]["records_written"], 0)
        self.assertFalse(r.summary["activity_enabled_now"])
        # Lazy subscription: no launch callback is enabled before the first consumer, some are
        # while one listens, none after the last one left.
        self.assertFalse(any(s["launch_cbids_enabled"] for s in statuses if s["t_ms"] < 1000))
        self.assertTrue(any(s["launch_cbids_enabled"] for s in statuses))
        self.assertEqual(statuses[-1]["launch_cbids_enabled"], 0)
        self.assertEqual(r.summary["launch_enabled_now"], [])
        # The mock's record count grows only while a consumer is attached: it is flat in the
        # last second of every gap between attachments.
        def written_at(ms):
            return max((s["records_written"] for s in statuses if s["t_ms"] <= ms), default=0)
        start_wall = windows[0][0] - 1.5
        for (_, end), (nxt, _) in zip(windows, windows[1:] + [(windows[-1][1] + 1.5, None)]):
            a = (end - start_wall) * 1000 + 400
            b = (nxt - start_wall) * 1000 - 100
            if b > a:
                self.assertEqual(written_at(a), written_at(b),
                                 "records written with no consumer attached")


if __name__ == "__main__":
    harness.main()
