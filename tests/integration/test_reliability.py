#!/usr/bin/env python3
"""Reliability under forks, load and a second copy of the library: no hang, no silent loss, no
change of behaviour. Faults come from the mock (MOCK_CUPTI_FAIL, MOCK_CUDA_FAIL), never from the
library."""
import os
import re
import shutil
import tempfile
import unittest

import harness

C = harness.COUNTER  # the summary's counters, by name (tools/trace/counters.h)


# What the suite's mock CUPTI lacks anyway under MOCK_CUPTI_PERSONALITY=12: said once at start.
ABSENT = ["cuptiGetGraphExecId"] if harness.PERSONALITY == "12" else []


def parcagpu_lines(r, pid=None):
    """The library's stderr lines (of `pid` only, if given), less the start line naming the entry
    points this suite's mock CUPTI lacks."""
    lines = [l for l in r.parcagpu_errors() if not any("lacks " + n in l for n in ABSENT)]
    if pid is not None:
        lines = [l for l in lines if "parcagpu[%d]:" % pid in l]
    return lines


def pc_samples_left_out(testcase, r):
    """The library's lines less those saying, once each (and in the totals), which PC samples
    could not be put under a launch stack: those CUPTI itself does not attribute (kernels of
    graphs that threads starting late first uploaded between two PC sampling episodes,
    docs/pc-sampling.md P19), and those of a thread's first driver call after the callbacks went
    on (not known to be outermost, so not announced). Each is said at most once."""
    lines = parcagpu_lines(r)
    unattributed = [l for l in lines
                    if "CUPTI does not attribute" in l or "that were not announced" in l]
    testcase.assertLessEqual(len([l for l in unattributed if "counted, not published" in l]), 1)
    testcase.assertLessEqual(len([l for l in unattributed if "left out: no launch" in l]), 1)
    return [l for l in lines if l not in unattributed]


def total_line(what):
    """RepeatedError's summary at exit: 'WHAT: N UNIT in all'."""
    return re.compile(re.escape(what) + r": \d+ \w+ in all")


def reported_once(testcase, r, first, what):
    """The error `first` (a substring of its first report) was printed once, and at most once
    more as the count at exit ('WHAT: N ... in all'), never a line per occurrence."""
    lines = parcagpu_lines(r)
    totals = [l for l in lines if total_line(what).search(l)]
    firsts = [l for l in lines if first in l and l not in totals]
    testcase.assertEqual(len(firsts), 1, "\n".join(lines[-50:]))
    testcase.assertLessEqual(len(totals), 1, "\n".join(totals))
    return firsts[0]


class Fork(unittest.TestCase):
    def test_children_forked_under_load_exit_promptly(self):
        # Children forked while 16 threads launch with a consumer attached: whatever lock another
        # thread held at the fork stays held in the child, and the child's exit() must not wait
        # for it (nor for a thread that does not exist in the child).
        # No impossible kernel record either (checked at stop): the stream overlaps once seen
        # here (up to 1,207 in a CI run) were the mock's, see harness.check_no_impossible_records.
        with harness.Trace() as tr:
            r = harness.run_mockapp(["--threads=16", "--stress", "--duration=4s",
                                     "--fork-children=20"], env=harness.UNLIMITED, timeout=300)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        s = r.summary
        self.assertEqual(s["fork_children"], 20)
        self.assertEqual(s["fork_children_hung"], 0, r.stderr[-3000:])
        self.assertEqual(s["fork_children_failed"], 0, r.stderr[-3000:])
        # The parent still delivered its kernels to the consumer.
        self.assertGreater(tr.result[C.kernels_matched], 0, tr.result)


class SecondCopy(unittest.TestCase):
    """Two copies of the library in one process: the first to start profiles, the other changes
    nothing. CUPTI takes one subscriber and one pair of buffer callbacks."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="parcagpu-copy-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def copy_of_lib(self, name):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copy(harness.LIB, path)
        return path

    def check_first_copy_profiles(self, preloaded):
        # `preloaded` starts from its constructor; build/lib/libparcagpu.so comes later as
        # CUDA_INJECTION64_PATH, loaded by cuInit.
        with harness.Trace(lib=preloaded) as tr:
            r = harness.run_mockapp(
                ["--preload", "--no-inject", "--scenario=eager-runtime,graph-driver,conditional"],
                lib=preloaded, env=dict(harness.UNLIMITED, CUDA_INJECTION64_PATH=harness.LIB))
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        s = r.summary
        j = tr.result
        # Every kernel reached the consumer of the copy that profiles.
        self.assertEqual(j[C.kernel_records], s["kernels_run"], (j, r.stderr[-3000:]))
        self.assertEqual(j[C.kernels_matched], j[C.kernel_records], j)
        self.assertEqual(j[C.orphan_correlations_eager] + j[C.orphan_correlations_graph], 0, j)
        # The other copy said so once, and subscribed to nothing.
        lines = [l for l in parcagpu_lines(r) if "another copy of parcagpu" in l]
        self.assertEqual(len(lines), 1, r.parcagpu_errors())
        self.assertIn(preloaded, lines[0])
        self.assertEqual(r.exit_reports[0]["stats"]["subscribe_calls"], 1)

    def test_copy_with_another_name(self):
        self.check_first_copy_profiles(self.copy_of_lib("libother-name.so"))

    def test_copy_with_the_same_file_name(self):
        self.check_first_copy_profiles(self.copy_of_lib("sub/libparcagpu.so"))


ALL_SCENARIOS = ("eager-runtime,eager-driver,launch-ex,cooperative,ptsz,graph-runtime,graph-driver,"
                 "graph-driver-ptsz,capture,conditional,hostonly-graph,all-cbids")


class Scenarios16(unittest.TestCase):
    """Every scenario replayed by 16 threads at once, with and without a consumer: a clean run
    and a clean teardown (what make test-sanitize runs under ASan+UBSan and TSan)."""

    def assert_torn_down(self, r):
        exit_report = [e for e in r.exit_reports if e["pid"] == r.summary["pid"]][0]
        self.assertEqual(exit_report["still_enabled"], [])
        self.assertEqual(exit_report["activity_kinds_still_enabled"], [])
        self.assertFalse(exit_report["subscribed"])

    def test_without_consumer(self):
        r = harness.run_mockapp(["--threads=16", "--scenario=" + ALL_SCENARIOS, "--loop",
                                 "--duration=2s"], timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertEqual(r.summary["mock_errors"], 0)
        self.assertGreater(r.summary["kernels_run"], 0)
        self.assertEqual(r.summary["records_written"], 0, "no consumer, no kernel activity")
        self.assertEqual(parcagpu_lines(r), [])
        self.assert_torn_down(r)

    def test_with_consumer_every_kernel_delivered(self):
        # Every launch announced, 16 threads, in a fraction of a second: with whole launch stacks
        # (up to 128 KiB each; a mock thread's copy is the whole size, as memory above its stack
        # reads) that burst outran even a 128 MiB ring buffer under TSan (116 drops), a loss the
        # tool counts and says. This test is about delivery: no stacks, and room.
        with harness.Trace(extra=["--ringbuf-mb", "128", "--no-stacks"]) as tr:
            r = harness.run_mockapp(["--threads=16", "--scenario=" + ALL_SCENARIOS],
                                    env=harness.UNLIMITED, timeout=300)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        s, j = r.summary, tr.result
        self.assertEqual(s["mock_errors"], 0)
        why = (j, parcagpu_lines(r))
        # all-cbids launches through every copy and fill API too: their records (memory_batch)
        # are counted among the kernel records, one per copy call of each thread.
        self.assertGreater(j[C.memory_records], 0, why)
        self.assertEqual(j[C.kernel_records] - j[C.memory_records], s["kernels_run"], why)
        self.assertEqual(j[C.kernels_matched], j[C.kernel_records], why)
        self.assertEqual(j[C.orphan_correlations_eager] + j[C.orphan_correlations_graph], 0, why)
        self.assertEqual(j[C.graph_capture_launches], s["captured_launches"])
        # PC sampling runs too (parcagpu-trace attaches pc_sample_batch): samples it cannot put
        # under a launch stack are said once; nothing else is said.
        self.assertEqual(pc_samples_left_out(self, r), [])
        self.assert_torn_down(r)


class Loss(unittest.TestCase):
    """Every kernel of an announced launch reaches the consumer, or its loss is counted and
    said (stderr and the error probe); at default rates nothing is lost."""

    def test_default_rates_lose_nothing_with_16_stress_threads(self):
        with harness.Trace() as tr:
            r = harness.run_mockapp(["--threads=16", "--stress", "--duration=4s"], timeout=300)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        j = tr.result
        why = (j, parcagpu_lines(r), tr.stderr[-2000:])
        self.assertGreater(j[C.correlations], 0)
        self.assertEqual(j[C.orphan_correlations_eager], 0, why)
        self.assertEqual(j[C.orphan_correlations_graph], 0, why)
        self.assertEqual(j[C.kernels_matched], j[C.kernel_records], j)
        self.assertEqual(r.summary["records_dropped"], 0)
        # PC samples that cannot be put under a launch stack are said, once each; nothing else
        # is lost.
        self.assertEqual(pc_samples_left_out(self, r), [], "nothing lost, nothing to say")

    def test_default_rates_conditional_graphs_get_their_own_kernels(self):
        # Issue 42: four threads instantiating, launching twice and destroying a WHILE graph
        # (10 body kernels a launch, each with correlation ID 0) as fast as they can, at the
        # default rates: a hundred thousand execs go by before a flush, and the one an announced
        # launch ran must still hand its body kernels to that launch, no other launch's. Before
        # the fix: 46 of 77 announced launches got no kernels (their exec forgotten among the
        # last 1,024 destroyed), 158,523 records of never-announced execs said lost, and the
        # others got ~15 kernels each (the next launch's too, recorded while kernel activity was
        # held on for the announced one).
        with harness.Trace() as tr:
            r = harness.run_mockapp(["--threads=4", "--scenario=conditional", "--loop",
                                     "--duration=5s"], env={"PARCAGPU_DEBUG": "1"}, timeout=300)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        j = tr.result
        errors = [l for l in parcagpu_lines(r) if "] " in l and "error" in l.lower()]
        why = (j, errors, tr.stderr[-2000:])
        self.assertGreater(j[C.correlations], 0)
        self.assertEqual(j[C.orphan_correlations_graph], 0, why)
        # Nothing said lost. (Under the CUDA 12.0 personality the library says once that that
        # CUPTI lacks cuptiGetGraphExecId, an optional entry point: not a loss.)
        optional = 1 if harness.PERSONALITY == "12" else 0
        self.assertEqual(j[C.errors], optional, why)
        self.assertEqual(j[C.kernels_matched], j[C.kernel_records], j)
        # Each launch its ten body kernels, give or take: where two launches of one exec are
        # queued, where the first one's body ends is not in the records and the library guesses
        # (GraphTracker::conditional_launch; "ambiguous owner" in its totals). Measured: 0 to 3%
        # over, of which the library counts about half as guessed (issue 42, left open).
        totals = [l for l in r.stderr.splitlines() if " graphs: execs=" in l]
        self.assertEqual(len(totals), 1, r.stderr[-3000:])
        guessed = int(re.search(r"ambiguous owner=(\d+)", totals[0]).group(1))
        kernels, launches = j[C.graph_kernels_matched], j[C.correlations]
        print("conditional: %d launches, %d kernels, %d guessed" % (launches, kernels, guessed))
        self.assertLessEqual(abs(kernels - 10 * launches), launches, (totals, why))

    def test_limits_raised_at_a_small_cap_the_loss_is_counted_and_said(self):
        # Far more launches announced than the tracker holds while their records are pending:
        # launches past the cap are not announced (and that is said, once, on the error probe);
        # every launch that was announced gets its kernels.
        env = dict(harness.UNLIMITED, PARCAGPU_MAX_OUTSTANDING="64", PARCAGPU_DEBUG="1")
        with harness.Trace() as tr:
            r = harness.run_mockapp(["--threads=16", "--stress", "--duration=3s"], env=env,
                                    timeout=300)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        j = tr.result
        first = reported_once(self, r, "were not announced: the correlation tracker was full",
                              "launches not announced: the correlation tracker was full")
        self.assertIn("PARCAGPU_MAX_OUTSTANDING=64", first)
        self.assertGreaterEqual(j[C.errors], 1, "the error probe carried it")
        # What was announced and lost anyway is said at exit, to the launch.
        at_exit = [int(m.group(1)) for l in r.stderr.splitlines()
                   for m in [re.search(r"(\d+) announced launches had no kernel record", l)] if m]
        lost = at_exit[0] if at_exit else 0
        self.assertEqual(j[C.orphan_correlations_eager] + j[C.orphan_correlations_graph], lost, j)
        self.assertEqual(j[C.kernels_matched], j[C.kernel_records], j)


    def test_conditional_kernels_survive_exec_churn(self):
        # Thousands of graph execs come and go between a conditional graph's launches and the
        # flush that delivers its body kernels (correlation ID 0, handed back through the exec
        # the library remembers): the conditional exec must still be known then.
        env = dict(harness.UNLIMITED, PARCAGPU_FLUSH_INTERVAL_MS="600000",
                   PARCAGPU_FLUSH_THRESHOLD="1000000", PARCAGPU_MAX_OUTSTANDING="100000",
                   PARCAGPU_BUFFER_KIB="16384")  # one buffer holds every record of the run
        # That one buffer comes as a burst of 18020 kernel events at exit, after 6000-odd launch
        # events. With stack copies (8 KiB each, 43 KiB under ASan's larger frames) a consumer
        # still unwinding them on a loaded 2-core machine had its ring buffer full when the burst
        # came (32 MiB: 23047 events dropped; 256 MiB under ASan: 18018). The test is about
        # delivery, not stacks: none taken, and room for the whole run; drops still fail the
        # kernel count below.
        with harness.Trace(extra=["--ringbuf-mb", "256", "--no-stacks"]) as tr:
            r = harness.run_mockapp(["--scenario=conditional" + ",graph-runtime" * 1500],
                                    env=env, timeout=300)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        j = tr.result
        # (PC sampling samples these graphs' kernels in its learning episodes, resumed after each
        # new graph's first launch; graphs uploaded between episodes give no records, P19: said
        # once, which is not a loss of kernel timing.)
        self.assertEqual(pc_samples_left_out(self, r), [])
        self.assertEqual(j[C.kernel_records], r.summary["kernels_run"], j)
        self.assertEqual(j[C.orphan_correlations_graph], 0, j)


    def test_a_consumer_of_launches_only_loses_nothing(self):
        # A consumer of cuda_correlation alone (or one that attaches it before the kernel probes)
        # wants no kernels: nothing waits for kernels, so nothing is given up as lost.
        class LaunchesOnly(harness._Consumer):
            ready_pattern = r"READY"

            def __init__(self):
                super().__init__(["bpftrace", "-e",
                                  'BEGIN { printf("READY\\n"); } usdt:%s:parcagpu:cuda_correlation '
                                  '{ @launches = count(); }' % os.path.abspath(harness.LIB)])
        env = {"PARCAGPU_MAX_AGE_MS": "100", "PARCAGPU_FLUSH_INTERVAL_MS": "50"}
        with LaunchesOnly():
            r = harness.run_mockapp(["--duration=2s", "--launch-rate=2000", "--graph-rate=200"],
                                    env=env)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertEqual(parcagpu_lines(r), [])


class CuptiFaults(unittest.TestCase):
    """Persistent CUPTI failures: reported once then counted, nothing left switched on."""

    def run_traced(self, args, env, trace_args=()):
        with harness.Trace(extra=trace_args) as tr:
            r = harness.run_mockapp(args, env=env, timeout=300)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        return r, tr.result

    def test_persistent_disable_failure_once_not_per_launch(self):
        r, j = self.run_traced(["--duration=2s", "--launch-rate=1000", "--graph-rate=100"],
                               {"MOCK_CUPTI_FAIL": "cuptiActivityDisable"})
        reported_once(self, r, "cuptiActivityDisable(CONCURRENT_KERNEL) failed",
                      "cuptiActivityDisable failed")
        # Not retried per launch either: once a second, and at exit.
        self.assertLessEqual(r.summary["injected_failures"], 6, r.summary)
        self.assertGreater(j[C.kernels_matched], 0)

    def test_disable_failing_at_detach_is_retried_not_left_on(self):
        # The consumer leaves after 1 s of a 5 s run; the disable at its detach fails once.
        r, _ = self.run_traced(["--duration=5s", "--launch-rate=500", "--graph-rate=50"],
                               {"MOCK_CUPTI_FAIL": "cuptiActivityDisable*1",
                                "PARCAGPU_ACTIVITY_MODE": "consumer"},
                               trace_args=["-d", "1", "--linger", "0"])
        self.assertEqual(r.summary["injected_failures"], 1, r.summary)
        self.assertFalse(r.summary["activity_enabled_now"], r.stderr[-2000:])
        self.assertEqual(r.exit_reports[-1]["activity_kinds_still_enabled"], [])

    def test_persistent_flush_failure_once(self):
        r, _ = self.run_traced(["--threads=4", "--stress", "--duration=2s"],
                               dict(harness.UNLIMITED, MOCK_CUPTI_FAIL="cuptiActivityFlushAll"))
        reported_once(self, r, "cuptiActivityFlushAll failed", "cuptiActivityFlushAll failed")

    def test_next_record_failure_says_what_is_lost(self):
        r, j = self.run_traced(["--scenario=eager-runtime,graph-runtime"],
                               dict(harness.UNLIMITED,
                                    MOCK_CUPTI_FAIL="cuptiActivityGetNextRecord"))
        line = reported_once(self, r, "cuptiActivityGetNextRecord failed",
                             "buffers cut short by cuptiActivityGetNextRecord")
        self.assertIn("is lost", line)
        self.assertEqual(j[C.kernel_records], 0)

    def test_dropped_records_query_failure_is_said(self):
        r, _ = self.run_traced(["--scenario=eager-runtime,graph-runtime"],
                               dict(harness.UNLIMITED,
                                    MOCK_CUPTI_FAIL="cuptiActivityGetNumDroppedRecords"))
        reported_once(self, r, "cuptiActivityGetNumDroppedRecords failed",
                      "cuptiActivityGetNumDroppedRecords failed")

    def test_graph_id_failure_says_conditional_kernels_are_lost(self):
        r, j = self.run_traced(["--scenario=conditional,conditional"],
                               dict(harness.UNLIMITED, MOCK_CUPTI_FAIL="cuptiGetGraphId"))
        reported_once(self, r, "cuptiGetGraphId failed at instantiation",
                      "cuptiGetGraphId failed at instantiation")
        reported_once(self, r, "no known graph exec owns that graph",
                      "conditional body kernel records of no known graph exec")
        self.assertEqual(j[C.kernel_records], 0, "no body kernel can be attributed")

    def test_subscribe_failure_says_what_the_result_means(self):
        for result, meaning in [("INSUFFICIENT_PRIVILEGES", "restricted to administrators"),
                                ("MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", "another CUPTI client"),
                                ("NOT_COMPATIBLE", "cannot work with the CUDA driver")]:
            with self.subTest(result=result):
                r = harness.run_mockapp(["--scenario=eager-runtime"],
                                        env={"MOCK_CUPTI_FAIL": "cuptiSubscribe:" + result})
                self.assertEqual(r.returncode, 0)
                lines = parcagpu_lines(r)
                self.assertEqual(len(lines), 1, lines)
                self.assertIn("CUPTI_ERROR_" + result, lines[0])
                self.assertIn(meaning, lines[0])
                self.assertIn("inert", lines[0])
                if result != "MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED":
                    self.assertNotIn("Nsight", lines[0])

    def test_every_enable_failing_is_one_line_and_inert(self):
        r = harness.run_mockapp(["--scenario=eager-runtime"],
                                env={"MOCK_CUPTI_FAIL": "cuptiEnableCallback"})
        self.assertEqual(r.returncode, 0)
        lines = parcagpu_lines(r)
        self.assertEqual(len(lines), 2, lines)
        self.assertIn("cuptiEnableCallback(", lines[0])
        self.assertIn("inert", lines[1])
        self.assertFalse(r.summary["subscribed"], "the subscription is given back")


class DriverFaults(unittest.TestCase):
    """The libcuda half of the fault matrix: the library's driver calls fail (MOCK_CUDA_FAIL);
    the application exits 0 and the library says so once. Node types are asked at every
    instantiation; device facts when PC sampling starts (parcagpu-trace --pc), which the CUDA
    12.0 personality's CUPTI cannot do."""

    # entry point -> (first report, RepeatedError summary, consumer options)
    CASES = {"cuGraphNodeGetType": ("cuGraphNodeGetType failed", "cuGraphNodeGetType failed", [])}
    if harness.PERSONALITY != "12":
        CASES.update({
            "cuDeviceGetAttribute": ("cuDeviceGet/cuDeviceGetAttribute failed",
                                     "device queries failed", ["--pc"]),
            "cuDeviceGet": ("cuDeviceGet/cuDeviceGetAttribute failed", "device queries failed",
                            ["--pc"]),
        })

    def test_each_failing_driver_call(self):
        for entry, (first, total, trace_args) in self.CASES.items():
            for result in ("", ":INVALID_VALUE"):
                with self.subTest(entry=entry, result=result):
                    with harness.Trace(extra=trace_args) as tr:
                        r = harness.run_mockapp(
                            ["--scenario=graph-runtime,hostonly-graph,conditional,eager-runtime"],
                            env=dict(harness.UNLIMITED, MOCK_CUDA_FAIL=entry + result))
                    tr.stop()
                    self.assertEqual(r.returncode, 0, r.stderr[-3000:])
                    self.assertEqual(len(r.summaries), 1)
                    self.assertGreater(r.summary["cuda_injected_failures"], 0, "fault not hit")
                    reported_once(self, r, first, total)
                    self.assertGreater(tr.result[C.kernels_matched], 0)


class QuickExit(unittest.TestCase):
    def test_quick_exit_delivers_what_was_collected(self):
        # No flush before the end (long interval, high threshold): the kernels reach the
        # consumer only through the exit path, which quick_exit runs too.
        env = dict(harness.UNLIMITED, PARCAGPU_FLUSH_INTERVAL_MS="600000",
                   PARCAGPU_FLUSH_THRESHOLD="100000")
        with harness.Trace() as tr:
            r = harness.run_mockapp(["--scenario=eager-runtime,graph-runtime",
                                     "--exit=quick_exit"], env=env)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tr.result[C.kernel_records], r.summary["kernels_run"], tr.result)
        self.assertEqual(tr.result[C.kernels_matched], r.summary["kernels_run"])

    def test_a_buffer_cuptis_worker_holds_at_exit_is_waited_for(self):
        # CUPTI's worker thread takes a full buffer off its queue, then calls the library: a
        # worker preempted between the two (a loaded machine) holds kernels that the exit's flush
        # finds neither queued nor being read. The mock's worker holds each buffer 300 ms; small
        # buffers, so the last ones are in its hands at exit. Before, the exit said the launches
        # of that buffer lost (38 of 800, 1525 of 1600 kernels delivered), and with a shorter
        # hold delivered them after saying so (CI: orphans != the loss said).
        env = dict(harness.UNLIMITED, PARCAGPU_BUFFER_KIB="16", MOCK_CUPTI_WORKER_DELAY_MS="300")
        with harness.Trace(extra=["--no-stacks"]) as tr:
            r = harness.run_mockapp(["--scenario=" + ",".join(["eager-runtime,graph-runtime"] * 100)],
                                    env=env)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        j = tr.result
        self.assertEqual(j[C.kernel_records], r.summary["kernels_run"], (j, parcagpu_lines(r)))
        self.assertEqual(j[C.orphan_correlations_eager] + j[C.orphan_correlations_graph], 0, j)
        self.assertEqual([l for l in parcagpu_lines(r) if "had no kernel record" in l], [])


if __name__ == "__main__":
    harness.main()
