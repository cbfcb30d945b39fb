#!/usr/bin/env python3
"""PC sampling (issue 10) end to end on the mock, with real eBPF consumers:

- no PC sampling at all (not even enabled) without a consumer of pc_sample_batch, and gpu_config
  never fired before PC sampling is configured (issue 9, item 3);
- a consumer that detaches leaves nothing enabled: PC sampling is torn down;
- a consumer that attaches late gets the stall-reason map, the cubins and gpu_config again;
- every PC Sampling API entry point failing (MOCK_CUPTI_FAIL) turns PC sampling off with one
  error, and kernel timing goes on;
- bad values of the PC variables: a warning, the error probe, the default;
- parcagpu-trace --pc as a user runs it: the PC section in the text report, in --json and in
  --json-lines' summary; the PC sampling programs attached to libraries found without -l (by -p, or in a
  cgroup by a process that starts later) and kept out of processes outside -c's cgroup.
"""
import datetime
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

import harness

C = harness.COUNTER  # the summary's counters, by name (tools/trace/counters.h)


def library_total(run, name):
    """A counter of the library's PARCAGPU_DEBUG totals at exit ("name=N")."""
    found = re.findall(r"%s=(\d+)" % re.escape(name), run.stderr)
    assert found, "no %r in the library's totals" % name
    return int(found[-1])


def mock_pc(run):
    """The mock CUPTI's PC sampling counters at exit."""
    assert run.exit_reports, run.stderr[-2000:]
    return run.exit_reports[-1]["pc_sampling"]


class Bt(harness._Consumer):
    """A bpftrace program of our own, attached to the library at the build's path."""
    ready_pattern = r"Attaching \d+ probes"

    def __init__(self, program):
        lib = os.path.abspath(harness.LIB)
        self.file = tempfile.NamedTemporaryFile("w", suffix=".bt", delete=False)
        self.file.write(program.replace("LIB", lib))
        self.file.close()
        super().__init__(["bpftrace", self.file.name])

    def stop(self, timeout=60):
        super().stop(timeout)
        os.unlink(self.file.name)
        return self


CORRELATION_AND_CONFIG = r"""
usdt:LIB:parcagpu:cuda_correlation { @corr[pid] = count(); }
usdt:LIB:parcagpu:gpu_config { printf("GPU_CONFIG pid=%d factor=%u\n", pid, (uint32)arg1); }
"""


class NoConsumerNoCost(unittest.TestCase):
    def test_without_any_consumer_pc_sampling_is_never_enabled(self):
        r = harness.run_mockapp(["--duration=1s", "--launch-rate=500", "--graph-rate=100"],
                                env=harness.UNLIMITED)
        self.assertEqual(r.returncode, 0)
        pc = mock_pc(r)
        self.assertEqual(pc["enables"], 0, pc)
        self.assertEqual(pc["starts"], 0, pc)

    def test_gpu_config_never_fires_before_pc_sampling_is_configured(self):
        # A consumer of launches and gpu_config, but not of pc_sample_batch: PC sampling is
        # never configured, so no sampling factor is in force and gpu_config must not fire.
        with Bt(CORRELATION_AND_CONFIG) as bt:
            r = harness.run_mockapp(["--duration=1s", "--launch-rate=500"], env=harness.UNLIMITED)
            time.sleep(0.5)
            bt.stop()
        self.assertEqual(r.returncode, 0)
        self.assertEqual(mock_pc(r)["enables"], 0)
        self.assertNotIn("GPU_CONFIG", bt.stdout)


class SamplesHangUnderAnnouncedLaunches(unittest.TestCase):
    def test_launches_in_a_window_are_announced_at_default_rates(self):
        # Default rate limits: most launches are not announced. The ones PC sampling samples must
        # be, or the agent has no stack to hang their samples under.
        with harness.AgentConsumer() as ac:
            r = harness.run_mockapp(["--duration=6s", "--launch-rate=2000", "--graph-rate=200",
                                     "--threads=2"])
        ac.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        s = r.summary
        p = ac.process(s["pid"])
        ids = p["pc_samples"]["correlation_ids"]
        # A window must have run (started and stopped) for its launches to be judged.
        self.assertGreater(mock_pc(r)["stops"], 0, mock_pc(r))
        self.assertLess(sum(p["correlations_by_cbid"].values()), s["launches"] / 2,
                        "the rate limits are not in force: nothing to show")
        self.assertGreater(ids["announced"], 0, p["pc_samples"])
        self.assertEqual(ids["unannounced"], 0, p["pc_samples"])


class Episodes(unittest.TestCase):
    """PC sampling is enabled only in episodes while a consumer listens (docs/pc-sampling.md)."""

    def test_enabled_in_short_episodes_not_for_the_whole_attachment(self):
        env = {"PARCAGPU_DEBUG": "1"}
        with harness.AgentConsumer() as ac:
            r = harness.run_mockapp(["--duration=6s", "--launch-rate=1000", "--graph-rate=100"],
                                    env=env)
        ac.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        pc = mock_pc(r)
        # Several episodes, each enabled and disabled again; nothing left enabled.
        self.assertGreaterEqual(pc["enables"], 2, pc)
        self.assertEqual(pc["disables"], pc["enables"], pc)
        self.assertEqual(pc["enabled_now"], 0, pc)
        p = ac.process(r.summary["pid"])
        self.assertGreater(p["pc_samples"]["records"], 0)
        self.assertEqual(p["pc_samples"]["correlation_ids"]["unannounced"], 0, p["pc_samples"])
        # Kernel activity is on for every launch only during episodes: far fewer kernel records
        # than kernels run (at the default rates), every one of them matched.
        self.assertLess(p["kernel_records"], r.summary["kernels_run"] / 2, p)
        self.assertEqual(p["orphan_kernels"], 0, p)


class FirstEnable(unittest.TestCase):
    """Once PC sampling has been enabled, every module loaded after is loaded whole, every
    kernel's code on the GPU (what it costs a PyTorch MLP step: docs/pc-sampling.md P34; the mock
    counts such modules). PARCAGPU_PC_START_QUIET_MS puts the first Enable off until no
    module has loaded for that long; kernels first run before it are sampled all the same (P20).
    By default (0) it comes at the first launch."""

    # Eager launches only: the timed workload instantiates its graphs before its first launch.
    EAGER = ["--scenario=eager-runtime,eager-driver,launch-ex", "--loop", "--duration=4s"]

    def run_with(self, env, args=EAGER):
        with harness.AgentConsumer() as ac:
            r = harness.run_mockapp(args, env=env)
        ac.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        return mock_pc(r), ac.process(r.summary["pid"])

    def test_the_first_enable_comes_after_the_modules_load(self):
        pc, p = self.run_with({"PARCAGPU_PC_START_QUIET_MS": "1000"})
        self.assertEqual(pc["modules_loaded_whole"], 0, pc)
        self.assertGreater(pc["enables"], 0, pc)
        # Sampled all the same: the kernels first run before the Enable give records.
        self.assertGreater(p["pc_samples"]["records"], 0, p["pc_samples"])
        self.assertGreater(pc["kernels_sampled"], 0, pc)
        self.assertEqual(pc["nonuser_kernels"], 0, pc)
        self.assertEqual(p["orphan_kernels"], 0, p)

    def test_a_graph_registered_during_start_up_begins_the_first_episode(self):
        # A graph instantiated at the start: its registration enables PC sampling, and a kernel
        # first run outside an episode after it would be lost (P20: here the cooperative and the
        # per-thread-stream kernels), so the first episode begins at once.
        pc, p = self.run_with({"PARCAGPU_PC_START_QUIET_MS": "1000",
                               "PARCAGPU_PC_GRAPH_SHADOWS": "1"},
                              ["--scenario=graph-runtime,cooperative,ptsz", "--loop",
                               "--duration=4s"])
        self.assertGreater(pc["kernels_sampled"], 0, pc)
        self.assertEqual(pc["functions_first_run_between_episodes"], 0, pc)
        self.assertEqual(p["orphan_kernels"], 0, p)

    def test_by_default_enabled_at_the_first_launch_the_module_is_loaded_whole(self):
        pc, p = self.run_with({})
        self.assertGreater(pc["modules_loaded_whole"], 0, pc)
        self.assertGreater(p["pc_samples"]["records"], 0, p["pc_samples"])

    # A step warmed up eagerly, then captured and replayed (PyTorch): only graph launches after
    # the warm-up, so every kernel sampled or not attributed is one of the replays'.
    WARMED_GRAPH = ["--scenario=graph-warm"]

    def test_a_graph_warmed_up_before_the_first_enable_is_not_sampled(self):
        # Its kernels first ran before PC sampling was ever enabled and its exec was uploaded
        # outside an episode: real CUPTI never attributes their samples in it (P19; a PyTorch
        # MLP step on the H200, P36). The price of the quiet start, counted and said.
        pc, p = self.run_with({"PARCAGPU_PC_START_QUIET_MS": "1000"}, self.WARMED_GRAPH)
        self.assertGreater(pc["enables"], 0, pc)
        self.assertEqual(pc["kernels_sampled"], 0, pc)
        self.assertGreater(pc["nonuser_kernels"], 0, pc)
        self.assertEqual(p["orphan_kernels"], 0, p)

    def test_a_graph_warmed_up_before_the_first_enable_is_sampled_once_registered(self):
        # The registration's own exec, uploaded while enabled with kernel activity off, registers
        # kernels first run before the first Enable (pc_episode_facts shadow warm, P36).
        pc, _ = self.run_with({"PARCAGPU_PC_START_QUIET_MS": "1000",
                               "PARCAGPU_PC_GRAPH_SHADOWS": "1"}, self.WARMED_GRAPH)
        self.assertGreater(pc["kernels_sampled"], 0, pc)
        self.assertEqual(pc["nonuser_kernels"], 0, pc)

    def test_a_step_warmed_up_after_a_pause_is_first_run_in_an_episode(self):
        # The program paused longer than learning lasts (2 s), so the first episode ended at the
        # first launch after the pause; the step's kernels, first run after it, were lost for
        # good (P20: an H200's PyTorch step, 0 PC records, P37). The module loaded before them
        # resumes learning, and they are first run in an episode. (Whether a window then
        # samples them is the sample credit's affair: under load some runs open none in time.)
        with harness.AgentConsumer() as ac:
            r = harness.run_mockapp(["--scenario=graph-after-pause"],
                                    env={"PARCAGPU_DEBUG": "1"})
        ac.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        pc = mock_pc(r)
        self.assertGreater(pc["enables"], 1, pc)
        self.assertEqual(pc["functions_first_run_between_episodes"], 0, pc)
        self.assertGreaterEqual(library_total(r, "learning resumed at a module load"), 1,
                                r.stderr[-3000:])

    def test_a_graph_warmed_up_in_the_first_episode_is_sampled(self):
        # By default the first episode covers the warm-up: the kernels first ran while enabled.
        pc, _ = self.run_with({}, self.WARMED_GRAPH)
        self.assertGreater(pc["kernels_sampled"], 0, pc)
        self.assertEqual(pc["functions_first_run_between_episodes"], 0, pc)


# The kernels tools/mock's graph-late scenario first runs in a graph, after start-up.
LATE_GRAPH_KERNELS = {"_Z10gemm_tiledPKfS0_Pfiii", "_Z7softmaxPfPKfi", "_Z10reduce_sumPfPKfi"}


class GraphUploads(unittest.TestCase):
    """A graph first launched (uploaded) while PC sampling is enabled is registered with it for
    good: every later launch of it costs more, episode or not (docs/pc-sampling.md P21); one
    instantiated while it is enabled likewise, however it is uploaded (P26). By default no graph is instantiated or uploaded in an episode; PARCAGPU_PC_GRAPHS=1 samples them."""

    def run_with(self, env, scenarios="capture,graph-runtime,graph-driver"):
        trace = harness.Trace(extra=["--pc"])
        # Graphs created, first launched and destroyed all the time: many uploads fall in episodes.
        r = harness.run_mockapp(["--scenario=" + scenarios, "--loop",
                                 "--duration=2500ms"], env=dict(env, PARCAGPU_DEBUG="1"))
        trace.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        return r, trace.result

    def test_by_default_no_graph_is_uploaded_while_pc_sampling_is_enabled(self):
        r, j = self.run_with({})
        pc = mock_pc(r)
        self.assertGreater(pc["enables"], 0, "episodes ran")
        # At most one each: in 1 of 4 fresh-clone runs one upload and one instantiation went in
        # with PC sampling enabled. A launch whose EXIT came in another epoch of the launch
        # callbacks used to leave PC sampling's count of its thread set (fixed since:
        # LaunchGate.AnExitInALaterEpochEndsTheCallItsEnterBegan), which would explain it; the
        # flake never reproduced here (0 of 12 runs under two busy loops, before and after), so
        # the bound stays. Without the guard (PARCAGPU_PC_GRAPHS=1,
        # test_pc_graphs_on_samples_graph_kernels) the uploads of every episode go in.
        self.assertLessEqual(pc["graphs_uploaded_enabled"], 1, pc)
        self.assertLessEqual(pc["graphs_instantiated_enabled"], 1, pc)
        ended = [l for l in r.stderr.splitlines() if "ended before a graph's first launch" in l]
        self.assertTrue(ended, "an episode under way met a graph's first launch")
        # Timing is untouched: every kernel of an announced launch matched.
        self.assertGreater(j["kernels_matched"], 0)
        self.assertEqual(j["orphan_kernels"], 0, j)
        # Episodes ended that way are spaced like any other (not one per new graph: 2.5 s at a
        # 20 ms charge and 2% duty allow about 3), apart from the learning episodes resumed at
        # once after a graph's first launch while kernels are first used: 32 at most
        # (PcScheduler::Params::max_learning_resumes).
        resumed = [int(m) for m in re.findall(r"learning resumed after one=(\d+)", r.stderr)]
        self.assertEqual(len(resumed), 1, "the debug totals say how many were resumed")
        self.assertLessEqual(resumed[0], 32)
        # By default (PARCAGPU_PC_GRAPH_SHADOWS=0) no graph is registered; each registration
        # enables once more, apart from episodes (test_every_graph_instantiated_is_...).
        registered = library_total(r, "graphs registered")
        self.assertEqual(registered, 0)
        self.assertLess(pc["enables"] - registered, 15 + resumed[0], pc)

    def test_explicit_uploads_are_kept_out_of_episodes_too(self):
        # cudaGraphUpload / cuGraphUpload ahead of the first launch (PyTorch, and
        # tools/bench/launch_overhead.cu, upload right after instantiation): the upload, not the first
        # launch, registers the graph (P24). The library saw only first launches before.
        r, j = self.run_with({}, scenarios="graph-upload,eager-runtime")
        pc = mock_pc(r)
        self.assertGreater(pc["enables"], 0, "episodes ran")
        self.assertEqual(pc["graphs_uploaded_enabled"], 0, pc)
        self.assertEqual(j["orphan_kernels"], 0, j)

    def run_graph_late(self, env):
        """The mock app's graph-late scenario under parcagpu-trace --pc: the run, the trace's
        JSON and the functions it has PC samples of."""
        trace = harness.Trace(extra=["--pc"])
        r = harness.run_mockapp(["--scenario=graph-late"], env=dict(env, PARCAGPU_DEBUG="1"))
        trace.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        j = trace.result
        return r, j, {k["function"] for k in j["pc"]["kernels"] if k["samples"] > 0}

    def test_late_graph_kernels_sampled_without_their_graph_paying(self):
        """Kernels first run inside a graph after PC sampling stopped learning the program's
        kernels (an inference server's decode graphs, made after start-up) are lost: their first
        use comes between episodes (P19). With PARCAGPU_PC_GRAPH_SHADOWS=1 the library
        registers a graph's kernels before its instantiation through an exec of its own, uploaded
        while PC sampling is enabled and kernel activity is off, and destroyed (docs/pc-sampling.md
        P32, P33); the application's exec, instantiated and uploaded with PC sampling off, pays
        nothing per launch (P30). The mock, as an H200, registers nothing by an upload made with
        kernel activity on."""
        r, j, sampled = self.run_graph_late({"PARCAGPU_PC_GRAPH_SHADOWS": "1"})
        pc = mock_pc(r)
        self.assertEqual(library_total(r, "graphs registered"), 1, r.stderr[-3000:])
        # No kernel of the graph had its first use between episodes, and no exec the application
        # launched went in with PC sampling enabled.
        self.assertEqual(pc["of_them_in_graphs"], 0, pc)
        self.assertEqual(pc["nonuser_kernels"], 0, pc)
        self.assertEqual(pc["graphs_uploaded_enabled"], 0, pc)
        self.assertEqual(pc["graphs_instantiated_enabled"], 0, pc)
        self.assertEqual(j["orphan_kernels"], 0, j)
        self.assertTrue(LATE_GRAPH_KERNELS & sampled, "a window in 4 s of the graph's replay "
                        "sampled its kernels: %s" % sorted(sampled))

    def test_late_graph_kernels_lost_without_the_registration(self):
        # The control and the default: PARCAGPU_PC_GRAPH_SHADOWS=0, the graph's three kernels
        # first used between episodes, their samples counted as not attributed.
        r, _, sampled = self.run_graph_late({})
        self.assertEqual(library_total(r, "graphs registered"), 0, r.stderr[-3000:])
        self.assertEqual(mock_pc(r)["of_them_in_graphs"], 3, mock_pc(r))
        self.assertFalse(LATE_GRAPH_KERNELS & sampled, sorted(sampled))

    def test_every_graph_instantiated_is_registered_within_the_budget(self):
        # Graphs created, instantiated (runtime and driver) and destroyed all the time: each
        # instantiation is registered once (the runtime's and the driver's callback of one call
        # are one), also a new graph at a freed graph's address, until the budget says no: a
        # burst of 256, then 2 a second (kGraphRegistrationsPerSecond), the rest counted. Graph
        # launches not announced here: while an announced graph's kernels run, kernel activity
        # may not be switched off, and a registration is refused (counted too; next test).
        r, _ = self.run_with({"PARCAGPU_GRAPH_RATE_LIMIT": "0", "PARCAGPU_PC_GRAPH_SHADOWS": "1"},
                             scenarios="graph-runtime,graph-driver")
        registered = library_total(r, "graphs registered")
        self.assertGreaterEqual(registered, 256, r.stderr[-2000:])
        self.assertLessEqual(registered, 256 + 2 * 2.5 + 2)
        self.assertGreater(library_total(r, "graphs not registered"), 0)

    def test_no_registration_while_an_announced_graphs_kernels_run(self):
        # Every launch announced, graphs instantiated among their replays: a registration would
        # switch kernel activity off under a graph whose kernels still run, and their records
        # would end at the next enable (an overlap on the stream, docs/cupti-facts.md). Those
        # registrations are refused and counted; no kernel record is impossible (the harness
        # checks the trace for it at its stop). (Orphans are no measure here: every launch
        # announced in a tight loop overflows the consumer's ring buffer.)
        r, _ = self.run_with(dict(harness.UNLIMITED, PARCAGPU_PC_GRAPH_SHADOWS="1"),
                             scenarios="graph-runtime,graph-driver")
        self.assertGreater(library_total(r, "graphs not registered"), 0, r.stderr[-2000:])
        self.assertGreater(library_total(r, "graphs registered"), 0, "between graphs in flight")

    def test_pc_graphs_on_samples_graph_kernels(self):
        r, j = self.run_with({"PARCAGPU_PC_GRAPHS": "1"})
        pc = mock_pc(r)
        self.assertGreater(pc["graphs_uploaded_enabled"], 0, pc)
        self.assertGreater(pc["graphs_instantiated_enabled"], 0, pc)
        self.assertGreater(j["pc"]["records"], 0, j["pc"])


class AttachDetach(unittest.TestCase):
    def test_detach_tears_down_and_a_later_consumer_gets_the_metadata_again(self):
        env = dict(harness.UNLIMITED, PARCAGPU_DEBUG="1")
        # Long enough for two attach/detach cycles on a slow machine; the waits below are for
        # conditions, the duration only bounds them.
        app = harness.start_mockapp(["--duration=40s", "--launch-rate=300", "--graph-rate=50",
                                     "--status-interval=100"], env=env)

        def wait_for(cond, what, timeout=30):
            deadline = time.time() + timeout
            while not cond():
                self.assertIsNone(app.poll(), "the app ended before " + what)
                self.assertLess(time.time(), deadline, "timed out waiting for " + what)
                time.sleep(0.05)

        def count(what):
            return sum(what in l for l in app.err_lines)

        # The app is launching (its module loaded long before anyone attaches).
        wait_for(lambda: any("MOCKAPP_STATUS" in l for l in app.lines), "the app to launch")
        traces = []
        for i in range(2):  # attach, detach, attach again: each gets everything
            before = count("PC sampling enabled")
            t = harness.Trace(pid=app.pid, extra=["--pc"])
            # PC sampling runs in episodes while a consumer listens: several in a second.
            wait_for(lambda: count("PC sampling enabled") >= before + 2, "two PC sampling episodes")
            time.sleep(1.0)
            t.stop()
            detached = datetime.datetime.now()
            traces.append(t)
            # After the detach the episode under way ends at a launch, and no other begins (the
            # debug lines carry their time of day; they reach us a little later).
            wait_for(lambda: count("PC sampling enabled") == count("PC sampling disabled: episode"),
                     "the end of the episode under way at detach %d" % (i + 1))
            time.sleep(1.0)
            late = [l for l in app.err_lines if "PC sampling enabled" in l and
                    datetime.datetime.combine(detached.date(), datetime.datetime.strptime(
                        l.split()[0], "%H:%M:%S.%f").time()) > detached +
                    datetime.timedelta(seconds=0.2)]
            self.assertEqual(late, [], ("an episode without a consumer", i, str(detached),
                                        [l for l in app.err_lines if "PC sampling" in l][-6:]))
        r = harness.finish_mockapp(app, timeout=120)
        self.assertEqual(r.returncode, 0)
        for i, t in enumerate(traces):
            pc = t.result["pc"]
            self.assertTrue(pc["stall_reasons_named"], (i, {k: pc[k] for k in ("records", "stall_reason_maps", "gpu_configs")}))
            self.assertEqual([g["sampling_factor"] for g in pc["gpu_configs"]], [harness.DEFAULT_SAMPLING_FACTOR], i)
            self.assertTrue(pc["cubins"] and all(c["read"] and c["bytes_crc32"] == c["crc"]
                                                 for c in pc["cubins"]), (i, pc["cubins"]))
            self.assertGreater(pc["records"], 0, i)
            self.assertEqual(pc["bpf"]["read_errors"], 0, i)
        pc = mock_pc(r)
        self.assertGreaterEqual(pc["enables"], 4, pc)
        self.assertEqual(pc["disables"], pc["enables"], pc)
        self.assertEqual(pc["enabled_now"], 0, pc)
        self.assertEqual(pc["started_now"], 0, pc)


    def test_a_consumer_still_attaching_when_its_semaphore_rose_gets_the_metadata(self):
        # The kernel raises a probe's semaphore when it installs the uprobe, and libbpf attaches
        # the program in a later system call: metadata fired at the rise reached nobody (seen
        # as a flake of the test above, a second consumer with PC records and no stall table).
        # Here a consumer stays half-attached long enough for the watcher to see the rise.
        app = harness.start_mockapp(["--duration=60s", "--launch-rate=300", "--graph-rate=50",
                                     "--status-interval=100"],
                                    env=dict(harness.UNLIMITED, PARCAGPU_DEBUG="1"))
        deadline = time.time() + 30
        while not app.lines and time.time() < deadline:
            time.sleep(0.05)
        first = harness.Trace(pid=app.pid, extra=["--pc"])  # PC sampling builds its stall table
        while not any("PC sampling disabled: episode" in l for l in app.err_lines):
            self.assertIsNone(app.poll(), "the app ended")
            self.assertLess(time.time(), deadline + 30, "no PC sampling episode")
            time.sleep(0.1)
        first.stop()
        self.assertTrue(first.result["pc"]["stall_reasons_named"])
        metadata = ["stall_reason_map", "gpu_config", "cubin_loaded"]
        # The second consumer must be attached within the library's settle time (1 s) of the
        # rise; on a slow moment the try is repeated.
        for attempt in range(5):
            time.sleep(1.5)  # the last try's semaphores fell and were seen to fall
            half = harness.HalfAttached(harness.LIB, app.pid, metadata)
            raised = time.time()
            # The watcher (every 100 ms) sees the rise. 0.15 s, not more: parcagpu-trace --pc
            # takes 0.58-0.78 s to attach on a 2-CPU VM (2026-11-29), and the rise to the attach
            # must stay inside the settle time.
            time.sleep(0.15)
            second = harness.Trace(pid=app.pid, extra=["--pc"])
            in_time = time.time() - raised < 0.9
            time.sleep(2.0)
            half.close()
            second.stop()
            if in_time:
                break
        self.assertTrue(in_time, "parcagpu-trace never attached within 0.75 s")
        pc = second.result["pc"]
        self.assertTrue(pc["stall_reasons_named"], {k: pc[k] for k in ("records", "stall_reason_maps")})
        self.assertEqual([g["sampling_factor"] for g in pc["gpu_configs"]], [harness.DEFAULT_SAMPLING_FACTOR])
        self.assertTrue(pc["cubins"], pc["cubins"])
        app.kill()
        harness.finish_mockapp(app, timeout=60)


class TwoProcessesOnOneGpu(unittest.TestCase):
    """PC sampling enabled in two processes on one GPU at once makes the later one's Start fail
    with CUPTI_ERROR_UNKNOWN, and CUPTI then crashes that process at its next activity call (H100,
    docs/pc-sampling.md P27; the mock refuses the Start the same way). The library takes the GPU's
    lock file before it enables PC sampling there, so processes sample it in turn."""

    def test_processes_sample_the_gpu_in_turn(self):
        trace = harness.Trace(extra=["--pc"])
        apps = [harness.start_mockapp(["--duration=4s", "--launch-rate=1000", "--graph-rate=100"],
                                      env={"PARCAGPU_DEBUG": "1"}) for _ in range(2)]
        runs = [harness.finish_mockapp(a, timeout=120) for a in apps]
        trace.stop()
        for r in runs:
            self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        pcs = [mock_pc(r) for r in runs]
        self.assertEqual([p["start_conflicts"] for p in pcs], [0, 0], pcs)
        for r in runs:
            self.assertNotIn("cuptiPCSamplingStart failed", r.stderr)
        self.assertGreater(sum(p["enables"] for p in pcs), 0, pcs)
        put_off = [int(n) for r in runs
                   for n in re.findall(r"put off for another process=(\d+)", r.stderr)]
        self.assertEqual(len(put_off), 2, "each process's debug totals say it")
        self.assertGreater(sum(put_off), 0, "one process waited for the other's episode")
        self.assertGreater(trace.result["pc"]["records"], 0)


class ExpectedIsNoError(unittest.TestCase):
    """What is expected is counted, not reported as an error (issue 44): samples of kernels first
    launched between episodes, which CUPTI does not attribute (P19-P20), went to the error probe
    and into the application's stderr as "library error -6 ... counted, not published"."""

    def test_non_user_samples_are_no_error(self):
        trace = harness.Trace(extra=["--pc"])
        r = harness.run_mockapp(["--duration=2s", "--threads=2", "--launch-rate=500", "--graph-rate=100"])
        trace.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertGreater(mock_pc(r)["nonuser_kernels"], 0, "the case did not happen: %s" % mock_pc(r))
        self.assertEqual(r.parcagpu_errors(), [], "the application's stderr is not ours to write in")
        self.assertNotIn("library error", trace.stderr)
        self.assertEqual(trace.result[C.errors], 0, trace.stderr)
        self.assertGreater(trace.result["pc"]["records"], 0)

    def test_non_user_samples_are_counted(self):
        trace = harness.Trace(extra=["--pc"])
        r = harness.run_mockapp(["--duration=2s", "--threads=2", "--launch-rate=500", "--graph-rate=100"],
                                env={"PARCAGPU_DEBUG": "1"})
        trace.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertGreater(library_total(r, "non-user samples"), 0)


class LockDirectoryUnusable(unittest.TestCase):
    """A PARCAGPU_PC_LOCK_DIR where no lock can be had (missing, not a directory) keeps PC
    sampling off: sampling without the lock is what lets two processes crash one of them (P27).
    Said once without PARCAGPU_DEBUG, on stderr and the error probe, and counted (issue 44)."""

    def test_pc_sampling_stays_off_and_says_so_once(self):
        for lock_dir in ("/nonexistent-parcagpu-locks", "/etc/hostname"):
            with self.subTest(lock_dir=lock_dir):
                trace = harness.Trace(extra=["--pc"])
                r = harness.run_mockapp(["--duration=1s", "--launch-rate=300", "--graph-rate=30"],
                                        env=dict(harness.UNLIMITED, PARCAGPU_PC_LOCK_DIR=lock_dir))
                trace.stop()
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                self.assertEqual(mock_pc(r)["enables"], 0, mock_pc(r))
                said = [l for l in r.parcagpu_errors() if "PARCAGPU_PC_LOCK_DIR" in l]
                self.assertEqual(len(said), 1, r.parcagpu_errors())
                self.assertIn("PC sampling stays off", said[0])
                self.assertRegex(said[0], r"\(open: (No such file or directory|Not a directory);")
                self.assertEqual(len(re.findall(r"library error -1 \[pc_sampling\].*PARCAGPU_PC_LOCK_DIR",
                                                trace.stderr)), 1, trace.stderr)
                self.assertEqual(trace.result["pc"]["records"], 0)
                self.assertGreater(trace.result[C.kernels_matched], 0)

    def test_counted_in_the_totals(self):
        trace = harness.Trace(extra=["--pc"])
        r = harness.run_mockapp(["--duration=1s", "--launch-rate=300"],
                                env=dict(harness.UNLIMITED, PARCAGPU_DEBUG="1",
                                         PARCAGPU_PC_LOCK_DIR="/nonexistent-parcagpu-locks"))
        trace.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(library_total(r, "contexts off without their GPU's lock"), 1)


FAILING_ENTRY_POINTS = [
    "cuptiPCSamplingEnable:NOT_SUPPORTED",
    "cuptiPCSamplingGetNumStallReasons",
    "cuptiPCSamplingGetStallReasons",
    "cuptiPCSamplingSetConfigurationAttribute",
    "cuptiPCSamplingGetConfigurationAttribute",
    "cuptiPCSamplingStart",
    "cuptiPCSamplingStop",
    "cuptiPCSamplingGetData:OUT_OF_MEMORY",
]


class FaultInjection(unittest.TestCase):
    def run_with(self, fail):
        # Graph registrations off: each enables PC sampling once more without a Start, Stop or
        # Get Data (GraphUploads tests them), and the enables counted here are the episodes'.
        env = dict(harness.UNLIMITED, MOCK_CUPTI_FAIL=fail, PARCAGPU_PC_GRAPH_SHADOWS="0")
        trace = harness.Trace(extra=["--pc"])
        # Eager launches only: a graph's first launch ends the first episode before its window
        # (PARCAGPU_PC_GRAPHS=0), and each entry point must fail in the first episode here.
        r = harness.run_mockapp(["--duration=1.5s", "--launch-rate=300", "--graph-rate=0"],
                                env=env)
        trace.stop()
        return r, trace.result

    def test_each_pc_entry_point_failing_turns_pc_sampling_off_once(self):
        for fail in FAILING_ENTRY_POINTS:
            with self.subTest(fail=fail):
                r, j = self.run_with(fail)
                self.assertEqual(r.returncode, 0, r.stderr[-2000:])
                errors = [l for l in r.parcagpu_errors() if "pc_sampling" in l]
                self.assertEqual(len(errors), 1, errors)
                self.assertIn(fail.split(":")[0], errors[0])
                self.assertIn("PC sampling is off", errors[0])
                pc = mock_pc(r)
                self.assertEqual(pc["enabled_now"], 0, pc)
                self.assertLessEqual(pc["enables"], 1, pc)
                # Kernel timing goes on: every kernel of an announced launch matched.
                self.assertGreater(j[C.kernels_matched], 0)
                self.assertEqual(j[C.orphan_kernels], 0)
                if fail.startswith("cuptiPCSamplingEnable"):
                    self.assertEqual(j["pc"]["gpu_configs"], [], "factor never in force")

    def test_missing_cubin_crc_only_leaves_cubins_unpublished(self):
        r, j = self.run_with("cuptiGetCubinCrc")
        self.assertEqual(r.returncode, 0)
        # Said once; the count of the repeats comes at exit ("... N times in all").
        errors = [l for l in r.parcagpu_errors() if "cuptiGetCubinCrc" in l and " in all" not in l]
        self.assertEqual(len(errors), 1, r.parcagpu_errors())
        self.assertEqual(j["pc"]["cubins"], [])
        self.assertGreater(j[C.kernels_matched], 0)


class BadValues(unittest.TestCase):
    def test_bad_values_warn_fire_error_and_keep_defaults(self):
        env = dict(harness.UNLIMITED, PARCAGPU_SAMPLING_FACTOR="3", PARCAGPU_PC_SAMPLING_RATE="-2",
                   PARCAGPU_PC_HW_BUFFER_MB="lots")
        trace = harness.Trace(extra=["--pc"])
        r = harness.run_mockapp(["--duration=1s", "--launch-rate=300"], env=env)
        trace.stop()
        errs = r.parcagpu_errors()
        for var in ("PARCAGPU_SAMPLING_FACTOR", "PARCAGPU_PC_SAMPLING_RATE",
                    "PARCAGPU_PC_HW_BUFFER_MB"):
            self.assertEqual(len([l for l in errs if var in l]), 1, errs)
        self.assertGreaterEqual(trace.result[C.errors], 3)
        # The library's default factor, reported as in force (CUPTI's would be 11, as on the H100).
        self.assertEqual([g["sampling_factor"] for g in trace.result["pc"]["gpu_configs"]], [harness.DEFAULT_SAMPLING_FACTOR])

    def test_off_switch(self):
        trace = harness.Trace(extra=["--pc"])
        r = harness.run_mockapp(["--duration=1s", "--launch-rate=300"],
                                env=dict(harness.UNLIMITED, PARCAGPU_PC_SAMPLING="0"))
        trace.stop()
        self.assertEqual(mock_pc(r)["enables"], 0)
        self.assertEqual(trace.result["pc"]["records"], 0)
        self.assertGreater(trace.result[C.kernels_matched], 0)


class PcSamplingInTheTool(unittest.TestCase):
    """parcagpu-trace --pc through the tool's own structure: reports, discovery, cgroup."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="parcagpu-pc-")
        # A copy at a path no one knows: discovery must find it by its notes, and no other run
        # maps this file.
        self.lib = os.path.join(self.tmp, "libgpuhook-%d.so" % os.getpid())
        shutil.copy(harness.LIB, self.lib)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def assert_pc_of(self, pc, pid):
        """Everything the PC profile shows of process `pid`: samples with named stall reasons tied
        to announced launches, its cubin read with the CRC it was announced with and mapped to
        source lines, gpu_config with the factor in force, and no read lost."""
        mine = [k for k in pc["kernels"] if k["pid"] == pid]
        self.assertTrue(mine and sum(k["samples"] for k in mine) > 0, pc)
        self.assertTrue([n for n in pc["stall_reasons_named"] if n["pid"] == pid], pc["stall_reasons_named"])
        for k in mine:
            self.assertFalse([s for s in k["stall_reasons"] if s["name"].startswith("#")], k)
        cubins = [c for c in pc["cubins"] if c["pid"] == pid]
        self.assertTrue(cubins, pc["cubins"])
        for c in cubins:
            self.assertTrue(c["read"] and c["bytes_crc32"] == c["crc"] and c["has_lines"], c)
        self.assertEqual([g["sampling_factor"] for g in pc["gpu_configs"] if g["pid"] == pid], [harness.DEFAULT_SAMPLING_FACTOR])
        announced = sum(n for k in mine for what, n in k["by_launch"].items()
                        if what not in ("unannounced", "gpu_only"))
        self.assertGreater(announced, 0, [k["by_launch"] for k in mine])
        self.assertTrue(any(h.get("file", "").endswith("pc_kernels.cu") for k in mine for h in k["hot_pcs"]),
                        [k["hot_pcs"] for k in mine])
        self.assertEqual(pc["bpf"]["read_errors"], 0, pc["bpf"])
        self.assertEqual(pc["bpf"]["ringbuf_drops"], 0, pc["bpf"])
        self.assertEqual(pc["malformed_events"], 0)

    def test_text_report_has_the_pc_section(self):
        tool = harness.TraceTool(["-l", self.lib, "--pc", "-n", "2"])
        r = harness.run_mockapp(["--duration=1.5s", "--launch-rate=300", "--graph-rate=60"],
                                env=harness.UNLIMITED, lib=self.lib)
        tool.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tool.proc.returncode, 0, tool.stderr)
        out = tool.stdout
        # The tracer's report, then the view's section after it.
        self.assertIn("GPU time by launch stack", out)
        self.assertRegex(out, r"\nPC samples: [1-9]\d* samples in \d+ records")
        self.assertLess(out.index("GPU time by launch stack"), out.index("PC samples:"))
        pid = r.summary["pid"]
        self.assertIn("device 0: sampling factor %d" % harness.DEFAULT_SAMPLING_FACTOR, out)
        # Kernels demangled as everywhere in the tool, with stall reasons and source lines.
        self.assertRegex(out, r"\n +1\. \w+\([^)]*\)  \(pid %d\)\n" % pid)
        self.assertRegex(out, r"\n +stalls: [a-z_]+ \d+\.\d%")
        self.assertRegex(out, r"\n +\+0x[0-9a-f]{4} +\d+ +\d+\.\d% +[a-z_]+ +\S*pc_kernels\.cu:\d+\n")

    def test_gpu_only_samples_apart_from_those_with_a_stack(self):
        # Default rate limits: a launch inside a sampling window that the coin did not pick is not
        # announced, and the library publishes its samples with correlation ID 0 (a GPU-only
        # stack, issue 28). The tool counts them per kernel apart from the samples under a CPU
        # stack, in the JSON and in the text, and never as errors.
        # Samples under a stack come from the few launches both in a window and picked: about 3.5
        # such launches in 3 s (one run of CI's had none), about 9 in 8 s.
        app = ["--duration=8s", "--launch-rate=2000", "--graph-rate=200", "--threads=2"]
        tool = harness.TraceTool(["-l", self.lib, "--pc", "--json"])
        r = harness.run_mockapp(app, lib=self.lib)
        tool.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tool.proc.returncode, 0, tool.stderr)
        j = tool.last_json()
        pc, pid = j["pc"], r.summary["pid"]
        self.assertLess(j[C.correlations], r.summary["launches"] / 2, "the rate limits are not in force")
        mine = [k for k in pc["kernels"] if k["pid"] == pid]
        self.assertTrue(mine, pc)
        for k in mine:
            self.assertEqual(k["samples"], k["samples_with_stack"] + k["samples_gpu_only"] +
                             k["samples_unannounced"], k)
            self.assertEqual(k["by_launch"].get("gpu_only", 0), k["samples_gpu_only"], k)
            self.assertNotIn("uncorrelated", k["by_launch"])
            self.assertNotIn(0, k["correlation_ids"])
        self.assertGreater(sum(k["samples_gpu_only"] for k in mine), 0, [k["by_launch"] for k in mine])
        self.assertGreater(sum(k["samples_with_stack"] for k in mine), 0, [k["by_launch"] for k in mine])
        self.assertEqual(pc["samples_gpu_only"], sum(k["samples_gpu_only"] for k in pc["kernels"]))
        self.assertEqual(pc["samples"], pc["samples_with_stack"] + pc["samples_gpu_only"] +
                         pc["samples_unannounced"])
        # Not errors: nothing malformed, no complaint, the exit status 0 (above). (The library may
        # report its non-user kernels' samples on its error probe: that is no ID 0 sample.)
        self.assertEqual(pc["malformed_events"], 0)
        self.assertNotRegex(tool.stderr, r"(?i)gpu.only|uncorrelated|correlation id 0")

        # The text report: per kernel, its samples with a CPU stack and its GPU-only ones.
        tool = harness.TraceTool(["-l", self.lib, "--pc"])
        r = harness.run_mockapp(app, lib=self.lib)
        tool.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tool.proc.returncode, 0, tool.stderr)
        out = tool.stdout
        m = re.search(r"\nPC samples: (\d+) samples in \d+ records \(\d+ PC/stall-reason pairs\), \d+ kernels; "
                      r"(\d+) with a CPU stack, (\d+) GPU-only", out)
        self.assertIsNotNone(m, out)
        self.assertGreater(int(m[3]), 0, out)
        self.assertRegex(out, r"\n +\d+ samples, \d+\.\d% of all: \d+ with a CPU stack \(\d+ launch(es)?\), "
                              r"[1-9]\d* GPU-only")
        self.assertRegex(out, r"\n +by launch: .*GPU-only \d+\.\d%")

    def test_json_lines_summary_has_the_pc_section(self):
        tool = harness.TraceTool(["-l", self.lib, "--pc", "--json-lines"])
        r = harness.run_mockapp(["--duration=1.5s", "--launch-rate=300", "--graph-rate=60"],
                                env=harness.UNLIMITED, lib=self.lib)
        tool.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        j = tool.last_json()
        self.assertEqual(j["type"], "summary")
        self.assert_pc_of(j["pc"], r.summary["pid"])

    def test_found_by_pid_without_lib(self):
        app = harness.start_mockapp(["--duration=5s", "--launch-rate=300", "--graph-rate=60",
                                     "--status-interval=100"], env=harness.UNLIMITED, lib=self.lib)
        try:
            deadline = time.time() + 30
            while not app.lines and time.time() < deadline:  # the library is loaded by then
                time.sleep(0.05)
            tool = harness.TraceTool(["-p", str(app.pid), "--pc", "--json"])
            tool.proc.wait(timeout=60)  # ends with the process
            tool.stop()
        finally:
            r = harness.finish_mockapp(app)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(tool.proc.returncode, 0, tool.stderr)
        self.assertIn("attached 12 probes to %s (found in process %d)" % (self.lib, app.pid), tool.stderr)
        j = tool.last_json()
        self.assertEqual(j["libraries"], [self.lib])
        self.assert_pc_of(j["pc"], app.pid)

    def cgroup(self):
        root = harness.cgroup2_root()
        if not root:
            self.skipTest("no cgroup2 file system mounted")
        cg = os.path.join(root, "parcagpu-pc-test-%d" % os.getpid())
        os.mkdir(cg)
        self.addCleanup(os.rmdir, cg)
        return cg

    def test_found_in_a_cgroup_by_a_process_that_starts_later(self):
        cg = self.cgroup()
        tool = harness.TraceTool(["-c", cg, "--pc", "--json"], ready=r"warning: no process in ")
        env = harness.base_env(harness.UNLIMITED)
        p = subprocess.run(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cg, harness.MOCKAPP,
                            self.lib, "--duration=3s", "--launch-rate=300", "--graph-rate=60"],
                           env=env, capture_output=True, text=True, timeout=120)
        r = harness.MockRun(p, p.stdout, p.stderr)
        tool.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        pid = r.summary["pid"]
        self.assertRegex(tool.stderr, r"attached 12 probes to %s \(found in process %d\)" %
                         (re.escape(self.lib), pid))
        j = tool.last_json()
        self.assertEqual(j["libraries"], [self.lib])
        self.assert_pc_of(j["pc"], pid)

    def test_cgroup_filter_keeps_other_processes_out(self):
        # The uprobes are per file: the process outside the cgroup has its semaphores raised and
        # samples, but the view's programs drop what it fires, as the tracer's do.
        cg = self.cgroup()
        tool = harness.TraceTool(["-l", self.lib, "-c", cg, "--pc", "--json"])
        r = harness.run_mockapp(["--duration=1.5s", "--launch-rate=300", "--graph-rate=60"],
                                env=harness.UNLIMITED, lib=self.lib)
        tool.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertGreaterEqual(mock_pc(r)["enables"], 1, "PC sampling ran in the process")
        j = tool.last_json()
        self.assertEqual(j[C.kernels_matched], 0)
        pc = j["pc"]
        self.assertEqual((pc["bpf"]["batches"], pc["records"], pc["stall_reasons_named"], pc["cubins"],
                          pc["gpu_configs"]), (0, 0, [], [], []), pc)


class PcOption(unittest.TestCase):
    def test_help_documents_pc(self):
        r = subprocess.run([harness.TRACE, "--pc", "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\n +--pc +Also PC sampling")
        self.assertIn("parcagpu-trace --pc -p 1234", r.stdout)


# CUDA 12.0's CUPTI (the mock's personality 12) predates correlation IDs in PC records (12.4):
# PC sampling stays off there, and everything else works.
OLD_CUPTI = harness.PERSONALITY == "12"
if OLD_CUPTI:
    for case in (SamplesHangUnderAnnouncedLaunches, Episodes, FirstEnable, GraphUploads,
                 AttachDetach, TwoProcessesOnOneGpu, LockDirectoryUnusable, ExpectedIsNoError,
                 FaultInjection, BadValues, PcSamplingInTheTool):
        for name in [n for n in dir(case) if n.startswith("test_")]:
            setattr(case, name, unittest.skip("CUPTI older than 12.4: no PC sampling")(getattr(case, name)))


@unittest.skipUnless(OLD_CUPTI, "CUDA 12.0 personality only")
class OlderCupti(unittest.TestCase):
    def test_pc_sampling_stays_off_and_kernel_timing_goes_on(self):
        trace = harness.Trace(extra=["--pc"])
        r = harness.run_mockapp(["--duration=1s", "--launch-rate=300", "--graph-rate=60"],
                                env=dict(harness.UNLIMITED, PARCAGPU_DEBUG="1"))
        trace.stop()
        self.assertEqual(r.returncode, 0)
        self.assertEqual(mock_pc(r)["enables"], 0)
        self.assertIn("PC sampling off: CUPTI API version 19", r.stderr)
        self.assertEqual(trace.result["pc"]["gpu_configs"], [])
        self.assertGreater(trace.result[C.kernels_matched], 0)


if __name__ == "__main__":
    harness.main()
