#!/usr/bin/env python3
"""parcagpu-trace as a user runs it (issue 12): GPU time by launch stack (table, --folded,
--svg flame graph), finding the library wherever it is, --json-lines, intervals, names as the
program wrote them, the capabilities it asks for, and its command line.

Everything stays on this test's own processes: -l names this build's library, or -p / -c narrow
discovery to a process or cgroup of the test (other test runs on the machine are left alone)."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

import harness

sys.path.insert(0, os.path.join(harness.SOURCE, "scripts"))
from pprof_decode import decode as decode_pprof, one  # noqa: E402 (--pprof's output read back)

C = harness.COUNTER  # the summary's counters, by name (tools/trace/counters.h)

MECHANISM = re.compile(r"libparcagpu|libcupti|libcuda\.so|libgpuhook")
SVG_NS = "{http://www.w3.org/2000/svg}"
FLAMEGRAPH = os.path.join(harness.BUILD, "bin", "parcagpu-flamegraph")


def run_trace(args, timeout=60):
    return subprocess.run([harness.TRACE] + list(args), capture_output=True, text=True, timeout=timeout)


def traced_mockapp(test, trace_extra, app_args):
    """The mock app (rate limits raised) run under parcagpu-trace --json with `trace_extra`;
    asserts that both exited 0. Returns the app's run and the stopped Trace."""
    with harness.Trace(extra=trace_extra) as tr:
        r = harness.run_mockapp(app_args, env=harness.UNLIMITED)
    tr.stop()
    test.assertEqual(r.returncode, 0)
    test.assertEqual(tr.proc.returncode, 0, tr.stderr)
    return r, tr


class FlameGraph(unittest.TestCase):
    def test_gpu_time_by_stack_of_a_mock_run(self):
        tmp = tempfile.mkdtemp(prefix="parcagpu-flame-")
        try:
            svg, folded = os.path.join(tmp, "gpu.svg"), os.path.join(tmp, "gpu.folded")
            r, tr = traced_mockapp(self, ["--svg", svg, "--folded", folded],
                                   ["--duration=1s", "--launch-rate=1000", "--graph-rate=100",
                                    "--threads=2"])
            j = tr.result
            self.assertEqual(j[C.kernels_matched], r.summary["kernels_run"])
            total = j[C.gpu_ns_matched]
            self.assertGreater(total, 0)

            # The table: every stack is the mock app's launch site, symbolized with file:line,
            # without the mechanism (the library, CUPTI, the driver).
            rows = j["gpu_time_by_stack"]
            self.assertGreaterEqual(len(rows), 1)
            self.assertEqual(sum(r["gpu_ns"] for r in rows), total)
            self.assertEqual(sum(r["kernels"] for r in rows), j[C.kernels_matched])
            for row in rows:
                self.assertRegex(row["frames"][0], r"launch_thread \(mockapp_workload\.cc:\d+\)$", row)
                for f in row["frames"]:
                    self.assertIsNone(MECHANISM.search(f), f)
                self.assertEqual(sum(k["gpu_ns"] for k in row["by_kernel"]), row["gpu_ns"])
            self.assertTrue(any(k["demangled"] == "k_add(float*, int)"
                                for row in rows for k in row["by_kernel"]))

            # Folded: "frame;...;[gpu] kernel NS", root first, the same total.
            with open(folded) as f:
                lines = f.read().splitlines()
            self.assertGreater(len(lines), 0)
            values = 0
            for line in lines:
                m = re.fullmatch(r"([^ ].*) (\d+)", line)
                self.assertIsNotNone(m, line)
                frames = m[1].split(";")
                self.assertTrue(frames[-1].startswith("[gpu] "), line)
                self.assertIn("mockapp::(anonymous namespace)::launch_thread",
                              [harness.frame_function(f) for f in frames])
                values += int(m[2])
            self.assertEqual(values, total)

            # The SVG: valid XML, one frame per tree node, widths proportional to GPU time,
            # each frame one row above its parent and inside it.
            root = ET.parse(svg).getroot()
            self.assertEqual(root.tag, SVG_NS + "svg")
            self.assertEqual(int(root.get("data-total-ns")), total)
            frames = []
            for g in root.iter(SVG_NS + "g"):
                rect = g.find(SVG_NS + "rect")
                title = g.find(SVG_NS + "title")
                self.assertIsNotNone(rect)
                self.assertTrue(title.text.startswith(g.get("data-name") + " ("), title.text)
                frames.append(dict(name=g.get("data-name"), kind=g.get("data-kind"),
                                   value=int(g.get("data-value")), depth=int(g.get("data-depth")),
                                   x=float(rect.get("x")), y=float(rect.get("y")),
                                   w=float(rect.get("width")), h=float(rect.get("height"))))
            all_ = [f for f in frames if f["depth"] == 0]
            self.assertEqual(len(all_), 1)
            self.assertEqual(all_[0]["value"], total)
            scale = all_[0]["w"] / total
            for f in frames:
                self.assertAlmostEqual(f["w"], f["value"] * scale, delta=0.02)
            # Parents: the frame one level down whose x-range holds this one.
            for f in frames:
                if f["depth"] == 0:
                    continue
                parents = [p for p in frames if p["depth"] == f["depth"] - 1 and
                           p["x"] - 0.01 <= f["x"] and f["x"] + f["w"] <= p["x"] + p["w"] + 0.02]
                self.assertEqual(len(parents), 1, f)
                self.assertAlmostEqual(parents[0]["y"] - f["y"], f["h"] + 1, delta=0.01)
            gpu = [f for f in frames if f["kind"] == "gpu"]
            self.assertGreater(len(gpu), 0)
            self.assertEqual(sum(f["value"] for f in gpu), total)  # every leaf is a kernel
            self.assertIn("[gpu] k_add", {f["name"] for f in gpu})
            self.assertIn("mockapp::(anonymous namespace)::launch_thread",
                          {harness.frame_function(f["name"]) for f in frames})
            for f in frames:
                self.assertIsNone(MECHANISM.search(f["name"]), f)

            # parcagpu-flamegraph draws the folded file as the same picture (the GPU machines'
            # runs keep folded files): every frame with its kind, GPU time and depth.
            redrawn = os.path.join(tmp, "redrawn.svg")
            with open(redrawn, "w") as out:
                rc = subprocess.run([FLAMEGRAPH, folded], stdout=out, stderr=subprocess.PIPE, text=True)
            self.assertEqual(rc.returncode, 0, rc.stderr)
            key = lambda f: (f["depth"], f["name"], f["kind"], f["value"])
            self.assertEqual(sorted(map(key, svg_frames(redrawn))), sorted(map(key, frames)))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_flamegraph_tool_reads_what_the_tool_adds(self):
        # Frames the tool adds are drawn as such, and a line that is not a folded stack is said.
        tmp = tempfile.mkdtemp(prefix="parcagpu-flame-")
        try:
            folded = os.path.join(tmp, "in.folded")
            with open(folded, "w") as f:
                f.write("m.py:3 f;[backward] MmBackward0;g (x.cc:9) [inlined];[gpu] k 300\n"
                        "[stack cut short];h+0x10 (liba.so);[gpu] k 100\nnot a stack\n")
            rc = subprocess.run([FLAMEGRAPH, folded], capture_output=True, text=True)
            self.assertEqual(rc.returncode, 1)
            self.assertIn("in.folded:3", rc.stderr)
            svg = os.path.join(tmp, "out.svg")
            with open(svg, "w") as out:
                out.write(rc.stdout)
            kinds = {f["name"]: (f["kind"], f["value"]) for f in svg_frames(svg)}
            self.assertEqual(kinds["[backward] MmBackward0"], ("pseudo", 300))
            self.assertEqual(kinds["[stack cut short]"], ("pseudo", 100))
            self.assertEqual(kinds["g (x.cc:9) [inlined]"], ("inlined", 300))
            self.assertEqual(kinds["[gpu] k"][0], "gpu")
            self.assertEqual(kinds["m.py:3 f"], ("cpu", 300))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_graph_kernels_under_their_capture_site(self):
        folded = tempfile.mktemp(prefix="parcagpu-folded-")
        with harness.Trace(extra=["--capture-sites", "--folded", folded]) as tr:
            r = harness.run_mockapp(["--scenario=capture"], env=harness.UNLIMITED)
        tr.stop()
        self.assertEqual(r.returncode, 0)
        with open(folded) as f:
            lines = f.read().splitlines()
        os.unlink(folded)
        self.assertTrue(lines)
        for line in lines:
            self.assertRegex(line, r";mockapp::\(anonymous namespace\)::scenario_capture "
                                   r"\(mockapp_workload\.cc:\d+\);\[gpu\] k_(add|mul) \d+$")
        j = tr.result
        rows = j["gpu_time_by_stack"]
        # Every graph kernel under the capture site. (One stack per capture site is not asserted:
        # in a fresh-clone CI run both personalities put the first capture's 8 kernels in a row
        # whose stack was unwound only up to main and the other 4 in a whole one, and 1 of 18
        # runs did here. That is the stack's tail, not the capture site; not explained yet.)
        self.assertTrue(rows)
        for row in rows:
            self.assertRegex(row["frames"][0], r"scenario_capture \(mockapp_workload\.cc:\d+\)", rows)
        self.assertEqual(sum(row["kernels"] for row in rows), r.summary["graph_kernels_run"], rows)
        # Without --capture-sites the same kernels are under the replay (cudaGraphLaunch) site.
        with harness.Trace() as tr2:
            harness.run_mockapp(["--scenario=capture"], env=harness.UNLIMITED)
        tr2.stop()
        rows2 = tr2.result["gpu_time_by_stack"]
        self.assertEqual(sum(r["kernels"] for r in rows2), r.summary["graph_kernels_run"])
        self.assertNotEqual(rows2[0]["frames"], rows[0]["frames"])


def folded_lines(path):
    """(frames, value) of each line of a folded file; asserts that no key comes twice."""
    with open(path) as f:
        lines = f.read().splitlines()
    keys = [l.rsplit(" ", 1)[0] for l in lines]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    assert not dup, "keys repeated in the folded file: %s" % dup
    return [(l.rsplit(" ", 1)[0].split(";"), int(l.rsplit(" ", 1)[1])) for l in lines]


def svg_frames(path):
    """The flame graph's frames: name, kind, value, depth and the rectangle."""
    frames = []
    for g in ET.parse(path).getroot().iter(SVG_NS + "g"):
        rect = g.find(SVG_NS + "rect")
        frames.append(dict(name=g.get("data-name"), kind=g.get("data-kind"),
                           value=int(g.get("data-value")), depth=int(g.get("data-depth")),
                           x=float(rect.get("x")), w=float(rect.get("width"))))
    return frames


LAUNCH_SITE = re.compile(r"^mockapp::\(anonymous namespace\)::launch_thread \(mockapp_workload\.cc:(\d+)\)$")


class TwoLaunchSitesOfOneFunction(unittest.TestCase):
    """The mock app's launch_thread launches k_add from two lines (an eager launch and a graph
    launch): two stacks in the text report, so two in the folded stacks, the flame graph and pprof
    too, never one key twice (issue 29: they were one tower, the folded file repeating its key)."""

    def test_folded_svg_and_pprof_keep_the_sites_apart(self):
        tmp = tempfile.mkdtemp(prefix="parcagpu-sites-")
        try:
            folded, svg, pprof = (os.path.join(tmp, n) for n in ("gpu.folded", "gpu.svg", "gpu.pb.gz"))
            r, tr = traced_mockapp(self, ["-n", "1000", "--folded", folded, "--svg", svg, "--pprof", pprof],
                                   ["--duration=1s", "--launch-rate=1000", "--graph-rate=100",
                                    "--threads=2"])
            j = tr.result
            # The text report's stacks: launch_thread at (at least) two lines, both with k_add.
            rows = j["gpu_time_by_stack"]
            self.assertEqual(len(rows), j[C.stacks_total])
            sites = {}
            for row in rows:
                m = LAUNCH_SITE.match(row["frames"][0])
                self.assertIsNotNone(m, row["frames"])
                if any(k["kernel"] == "_Z5k_addPfi" for k in row["by_kernel"]):
                    sites.setdefault(int(m[1]), 0)
                    sites[int(m[1])] += 1
            self.assertGreaterEqual(len(sites), 2, [r["frames"][0] for r in rows])

            # Folded: one line per (stack, kernel) of the report, no key twice (folded_lines).
            stacks = folded_lines(folded)
            self.assertEqual(len(stacks), sum(len(row["by_kernel"]) for row in rows))
            self.assertEqual(sum(v for _, v in stacks), j[C.gpu_ns_matched])
            add_sites = {LAUNCH_SITE.match(f[-2])[1] for f, _ in stacks if f[-1] == "[gpu] k_add"}
            self.assertEqual(add_sites, {str(s) for s in sites})

            # The flame graph: launch_thread once per line, each with its own k_add above it, and
            # no two frames of one name side by side under one parent.
            frames = svg_frames(svg)
            seen = set()
            for f in frames:
                parent = [p for p in frames if p["depth"] == f["depth"] - 1 and
                          p["x"] - 0.01 <= f["x"] and f["x"] + f["w"] <= p["x"] + p["w"] + 0.02]
                key = (f["name"], f["depth"], (parent[0]["x"], parent[0]["name"]) if parent else None)
                self.assertNotIn(key, seen)
                seen.add(key)
            by_line = {LAUNCH_SITE.match(f["name"])[1] for f in frames if LAUNCH_SITE.match(f["name"])}
            self.assertEqual(by_line, {str(s) for s in sites})
            for f in frames:
                if LAUNCH_SITE.match(f["name"]) and LAUNCH_SITE.match(f["name"])[1] in add_sites:
                    above = [k for k in frames if k["depth"] == f["depth"] + 1 and k["name"] == "[gpu] k_add"
                             and f["x"] - 0.01 <= k["x"] and k["x"] + k["w"] <= f["x"] + f["w"] + 0.02]
                    self.assertEqual(len(above), 1, f)

            # pprof: launch_thread's two lines are two locations, each under a k_add sample.
            with open(pprof, "rb") as f:
                p = decode_pprof(f.read())
            s = p["string_table"]
            functions = {one(f, "id"): s[one(f, "name")] for f in p["function"]}
            lt = {}  # line -> location ids
            for loc in p["location"]:
                for ln in loc["line"]:
                    if functions[one(ln, "function_id")] == "mockapp::(anonymous namespace)::launch_thread":
                        lt.setdefault(one(ln, "line"), set()).add(one(loc, "id"))
            self.assertEqual(set(lt), set(sites))
            for ids in lt.values():
                self.assertEqual(len(ids), 1, lt)
            leaves = {x["location_id"][0] for x in p["sample"]
                      if any(s[one(l, "key")] == "kernel" and s[one(l, "str")] == "k_add(float*, int)"
                             for l in x.get("label", []))}
            self.assertTrue(all(next(iter(lt[s_])) in leaves for s_ in sites), (lt, leaves))
            self.assertEqual(len(p["sample"]), len(stacks))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class TheFlagsSayWhatIsDone(unittest.TestCase):
    """The tool does what its flags say (issue 29)."""

    def test_without_pc_the_library_samples_no_pcs(self):
        # PC sampling's probes are not attached: no consumer of pc_sample_batch, so the library
        # never turns PC sampling on. The library's error probe still reaches the user.
        env = dict(harness.UNLIMITED, PARCAGPU_PC_HW_BUFFER_MB="lots")
        with harness.Trace() as tr:
            r = harness.run_mockapp(["--duration=1s", "--launch-rate=500", "--graph-rate=50"], env=env)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr)
        pc = r.exit_reports[-1]["pc_sampling"]
        self.assertEqual((pc["enables"], pc["configures"], pc["starts"]), (0, 0, 0), pc)
        self.assertRegex(tr.stderr, r"attached 7 probes to ")
        j = tr.result
        self.assertGreater(j[C.kernels_matched], 0)
        self.assertEqual((j[C.pc_sample_batches], j[C.pc_sample_records], j[C.stall_reason_maps],
                          j[C.cubin_loaded], j[C.gpu_config]), (0, 0, 0, 0, 0))
        self.assertNotIn("pc", j)
        self.assertRegex(tr.stderr, r"parcagpu-trace: pid %d: library error .*PARCAGPU_PC_HW_BUFFER_MB"
                         % r.summary["pid"])
        self.assertGreaterEqual(j[C.errors], 1)

    @unittest.skipIf(harness.PERSONALITY == "12", "CUPTI older than 12.4: no PC sampling")
    def test_with_pc_the_library_samples_pcs(self):
        with harness.Trace(extra=["--pc"]) as tr:
            r = harness.run_mockapp(["--duration=1s", "--launch-rate=500", "--graph-rate=50"],
                                    env=harness.UNLIMITED)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr)
        pc = r.exit_reports[-1]["pc_sampling"]
        self.assertGreaterEqual(pc["enables"], 1, pc)
        self.assertRegex(tr.stderr, r"attached 12 probes to ")
        self.assertGreater(tr.result["pc"]["records"], 0)

    def test_unwritable_output_fails_at_start(self):
        tmp = tempfile.mkdtemp(prefix="parcagpu-out-")
        try:
            fine = os.path.join(tmp, "gpu.folded")
            for flag, path, why in (("--svg", "/nonexistent-parcagpu/gpu.svg", "No such file or directory"),
                                    ("--pprof", tmp, "Is a directory"),
                                    ("--folded", os.path.join(tmp, "missing", "x"), "No such file or directory")):
                start = time.time()
                r = run_trace(["-l", harness.LIB, "-d", "30s", "--folded", fine, flag, path])
                self.assertLess(time.time() - start, 10)  # not after the 30 s trace
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertEqual(r.stderr, "parcagpu-trace: %s %s: cannot write it: %s\n" % (flag, path, why))
                self.assertEqual(r.stdout, "")
                # What the check created to try is gone again.
                self.assertFalse(os.path.exists(fine))
            # An existing file is kept as it is until the end.
            with open(fine, "w") as f:
                f.write("old\n")
            r = run_trace(["-l", harness.LIB, "-d", "200ms", "--folded", fine, "--svg", "/nonexistent-parcagpu/x"])
            self.assertEqual(r.returncode, 2)
            with open(fine) as f:
                self.assertEqual(f.read(), "old\n")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class OutputsThatFailAtExit(unittest.TestCase):
    """A file output whose write fails at exit (a full disk: /dev/full, which the check at start
    cannot tell) says which option, which file and why, and the exit status is 1; the report is
    printed all the same. An empty FILE is refused at the start (issue 44: exit 1 without a
    word, and `--pprof ""` quietly wrote nothing)."""

    def test_each_output_on_a_full_disk(self):
        for flag in ("--pprof", "--svg", "--folded", "--json"):
            with self.subTest(flag=flag):
                with harness.TraceTool(["-l", harness.LIB, flag + "=/dev/full"]) as tr:
                    r = harness.run_mockapp(["--duration=500ms", "--launch-rate=300", "--graph-rate=30"],
                                            env=harness.UNLIMITED)
                tr.stop()
                self.assertEqual(r.returncode, 0)
                self.assertEqual(tr.proc.returncode, 1, tr.stderr)
                self.assertIn("parcagpu-trace: %s /dev/full: cannot write it: No space left on device\n" % flag,
                              tr.stderr)
                self.assertIn("GPU time by launch stack", tr.stdout)  # the report, all the same

    def test_empty_file_names_are_refused(self):
        for args, flag in ((["--pprof", ""], "--pprof"), (["--svg="], "--svg"), (["--folded", ""], "--folded"),
                           (["--json="], "--json"), (["-l", ""], "-l"), (["-c", ""], "-c")):
            with self.subTest(args=args):
                start = time.time()
                r = run_trace(["-d", "5s"] + args + (["-l", harness.LIB] if flag != "-l" else []))
                self.assertLess(time.time() - start, 4)  # refused, not traced
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertRegex(r.stderr, r"^parcagpu-trace: %s: an empty (file name|path)" % re.escape(flag))
                self.assertEqual(r.stdout, "")


class StopsInTime(unittest.TestCase):
    """SIGINT and -d end parcagpu-trace within 2 s whatever the backlog (issue 44: 47-62 s
    before): under overload (every launch announced, 4 threads without sleeps, graphs, the ring
    buffer full) while short processes start and exit all around, as on a busy machine. Each exit
    was forgotten by a walk of everything every process had left, inside the ring buffer's poll,
    and the exit read until the ring buffer was empty. What is still queued at the end of the
    exit's reading is counted as left."""

    def overloaded(self, trace_args, stop):
        """Runs the overload and the process churn around parcagpu-trace TRACE_ARGS; stop(tr)
        ends the tool. Returns (seconds from stop() to its exit, the stopped TraceTool)."""
        churn = subprocess.Popen(["bash", "-c", "while :; do /bin/true; done"], start_new_session=True)
        app = harness.start_mockapp(["--stress", "--threads=4", "--duration=60s", "--launch-rate=20000",
                                     "--graph-rate=2000"], env=harness.UNLIMITED)
        try:
            tr = harness.TraceTool(["-l", harness.LIB] + trace_args)
            time.sleep(4)  # state piles up: streams, stacks, processes gone
            stopped = time.time()
            stop(tr)
            tr.proc.wait(timeout=120)
            took = time.time() - stopped
            tr.stop()
            print("\nended %.2f s after the stop" % took)
        finally:
            os.killpg(churn.pid, signal.SIGKILL)
            churn.wait()
            app.kill()
            harness.finish_mockapp(app)
        return took, tr

    def test_sigint_under_overload(self):
        took, tr = self.overloaded([], lambda tr: tr.proc.send_signal(signal.SIGINT))
        self.assertLess(took, 2.0, tr.stderr[-3000:])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr[-3000:])
        self.assertIn("GPU time by launch stack", tr.stdout)

    def test_duration_under_overload(self):
        took, tr = self.overloaded(["-d", "3s", "--json"], lambda tr: None)
        # -d 3s runs from about when the tool said it attached; `took` counts from 4 s after that:
        # done within 2 s of the end of -d.
        self.assertLess(took, 1.0, tr.stderr[-3000:])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr[-3000:])
        self.assertGreater(json.loads(tr.stdout)[C.kernels_matched], 0)


class FoldedOnStdout(unittest.TestCase):
    """--folded=- is for pipes (`parcagpu-trace --folded=- | flamegraph.pl`): stdout carries the
    folded lines and nothing else; the report goes to stderr (issue 18)."""

    def test_stdout_holds_only_folded_lines(self):
        with harness.TraceTool(["-l", harness.LIB, "--folded=-", "-k"]) as tr:
            r = harness.run_mockapp(["--duration=1s", "--launch-rate=500", "--graph-rate=50"],
                                    env=harness.UNLIMITED)
        tr.stop()
        self.assertEqual(r.returncode, 0)
        self.assertEqual(tr.proc.returncode, 0, tr.stderr)
        lines = tr.stdout.splitlines()
        self.assertGreater(len(lines), 0, tr.stderr)
        for line in lines:
            m = re.fullmatch(r"([^ ;][^;]*(?:;[^;]+)*) (\d+)", line)
            self.assertIsNotNone(m, "not a folded line on stdout: %r" % line)
            self.assertTrue(m[1].split(";")[-1].startswith("[gpu] "), line)
        # The report (and -k's kernel lines) went to stderr instead.
        self.assertIn("GPU time by launch stack", tr.stderr)
        self.assertIn("kernels matched", tr.stderr)

    def test_stdout_claimed_twice_is_refused(self):
        for args in (["--folded=-", "--json"], ["--folded=-", "--json-lines"], ["--folded=-", "--svg=-"],
                     ["--pprof=-", "--json"], ["--pprof=-", "--folded=-"]):
            r = run_trace(args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn("stdout (-)", r.stderr, args)
            self.assertEqual(r.stdout, "", args)


class Pprof(unittest.TestCase):
    """--pprof FILE: a gzipped perftools.profiles.Profile, read back with protobuf (issue 18)."""

    def test_profile_of_a_mock_run(self):
        tmp = tempfile.mkdtemp(prefix="parcagpu-pprof-")
        try:
            path = os.path.join(tmp, "gpu.pb.gz")
            r, tr = traced_mockapp(self, ["--pprof", path],
                                   ["--duration=1s", "--launch-rate=500", "--graph-rate=50",
                                    "--threads=2"])
            j = tr.result
            self.assertGreater(j[C.kernels_matched], 0)
            with open(path, "rb") as f:
                raw = f.read()
            self.assertEqual(raw[:2], b"\x1f\x8b")  # gzip, as pprof wants it on disk
            p = decode_pprof(raw)
            s = p["string_table"]
            self.assertEqual(s[0], "")
            self.assertEqual([(s[one(t, "type")], s[one(t, "unit")]) for t in p["sample_type"]],
                             [("kernels", "count"), ("gpu", "nanoseconds")])
            self.assertEqual(s[one(p, "default_sample_type")], "gpu")
            self.assertGreater(one(p, "duration_nanos"), 0)
            # Every matched kernel is in it, with the same GPU time as the JSON summary.
            self.assertEqual(sum(x["value"][0] for x in p["sample"]), j[C.kernels_matched])
            self.assertEqual(sum(x["value"][1] for x in p["sample"]), j[C.gpu_ns_matched])
            functions = {one(f, "id"): f for f in p["function"]}
            locations = {one(l, "id"): l for l in p["location"]}
            kernels = set()
            launch_sites = 0
            for x in p["sample"]:
                labels = {s[one(l, "key")]: s[one(l, "str")] for l in x.get("label", [])}
                self.assertIn("kernel", labels)
                # The process's name, 15 bytes of it: not "exe" (the mock app re-executed itself
                # through /proc/self/exe before, issue 44).
                self.assertEqual(labels.get("comm"), "parcagpu-mockap")
                kernels.add(labels["kernel"])
                self.assertTrue(x.get("location_id"))
                lines = []
                for lid in x["location_id"]:
                    for ln in locations[lid]["line"]:
                        f = functions[one(ln, "function_id")]
                        lines.append((s[one(f, "name")], s[one(f, "filename")], one(ln, "line")))
                for name, _, _ in lines:
                    self.assertIsNone(MECHANISM.search(name), name)
                if any(name == "mockapp::(anonymous namespace)::launch_thread" and
                       file.endswith("mockapp_workload.cc") and line > 0 for name, file, line in lines):
                    launch_sites += 1
            self.assertIn("k_add(float*, int)", kernels)
            self.assertGreater(launch_sites, 0)
            for m in p.get("mapping", []):
                self.assertTrue(s[one(m, "filename")])
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class MockAppName(unittest.TestCase):
    """The mock app re-executes itself when its environment must change (--preload, or the mock
    libraries not on the loader path, as in the packaged demo): the process keeps its name,
    which consumers show (pprof's comm label read "exe" after a re-exec through /proc/self/exe,
    issue 44)."""

    def test_comm_after_the_reexec(self):
        app = harness.start_mockapp(["--preload", "--duration=3s", "--status-interval=100"])
        try:
            deadline = time.time() + 30
            while not app.lines and time.time() < deadline:
                time.sleep(0.05)
            with open("/proc/%d/comm" % app.pid) as f:
                comm = f.read().strip()
            with open("/proc/%d/environ" % app.pid, "rb") as f:
                reexecuted = b"LD_PRELOAD=" in f.read()
        finally:
            harness.finish_mockapp(app)
        self.assertTrue(reexecuted, "--preload re-executes the app with LD_PRELOAD set")
        self.assertEqual(comm, "parcagpu-mockap")


class Names(unittest.TestCase):
    def test_non_ascii_kernel_name_stays_utf8(self):
        tmp = tempfile.mkdtemp(prefix="parcagpu-names-")
        try:
            names = os.path.join(tmp, "names.txt")
            with open(names, "w", encoding="utf-8") as f:
                f.write("k_café\n_Z5k_addPfi\n")
            with harness.Trace() as tr:
                r = harness.run_mockapp(["--duration=1s", "--launch-rate=200", "--graph-rate=0",
                                         "--kernel-names=" + names], env=harness.UNLIMITED)
            tr.stop()
            self.assertEqual(r.returncode, 0)
            raw = tr.stdout.strip().splitlines()[-1]
            self.assertIn('"k_café":', raw)  # UTF-8 as the program wrote it, no \\u00c3\\u00a9
            self.assertNotIn("\\u00c3", raw)
            byname = tr.result[C.kernels_by_name]
            self.assertIn("k_café", byname)
            self.assertEqual(byname["k_café"]["matched"], byname["k_café"]["records"])
            self.assertEqual(byname["_Z5k_addPfi"]["demangled"], "k_add(float*, int)")
            print("\nJSON of the non-ASCII kernel name:",
                  json.dumps({"k_café": byname["k_café"]}, ensure_ascii=False))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class Discovery(unittest.TestCase):
    def lib_copy(self, tmp):
        lib = os.path.join(tmp, "libgpuhook-%d.so" % os.getpid())  # a name and path no one knows
        shutil.copy(harness.LIB, lib)
        return lib

    def test_pid_finds_the_library_whatever_its_path(self):
        tmp = tempfile.mkdtemp(prefix="parcagpu-where-")
        try:
            lib = self.lib_copy(tmp)
            # The app must outlive the tool's start (3-4 s beside other tests: with 4 s it had
            # ended before the tool attached).
            app = harness.start_mockapp(["--duration=8s", "--launch-rate=500", "--graph-rate=50",
                                         "--status-interval=100"], env=harness.UNLIMITED, lib=lib)
            try:
                tr = harness.trace_when_loaded(app, ["--json"])
            finally:
                r = harness.finish_mockapp(app)
            self.assertEqual(r.returncode, 0)
            self.assertEqual(tr.proc.returncode, 0, tr.stderr)
            self.assertIn("attached 7 probes to %s (found in process %d)" % (lib, app.pid), tr.stderr)
            j = tr.last_json()
            self.assertEqual(j["libraries"], [lib])
            self.assertGreater(j[C.kernels_matched], 0)
            self.assertEqual(j[C.orphan_kernels], 0)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_cgroup_process_started_later_at_an_unknown_path(self):
        root = harness.cgroup2_root()
        if not root:
            self.skipTest("no cgroup2 file system mounted")
        tmp = tempfile.mkdtemp(prefix="parcagpu-where-")
        cg = os.path.join(root, "parcagpu-test-%d" % os.getpid())
        os.mkdir(cg)
        try:
            lib = self.lib_copy(tmp)
            tr = harness.TraceTool(["-c", cg, "--json"], ready=r"warning: no process in ")
            self.assertRegex(tr._read(tr.err), r"warning: no process in %s has loaded a library with "
                             r"parcagpu probes; waiting for one" % re.escape(cg))
            # A process that starts after the tool, in the cgroup, loading the copy.
            env = harness.base_env(harness.UNLIMITED)
            p = subprocess.run(["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cg, harness.MOCKAPP,
                                lib, "--duration=3s", "--launch-rate=500", "--graph-rate=50"],
                               env=env, capture_output=True, text=True, timeout=120)
            r = harness.MockRun(p, p.stdout, p.stderr)
            tr.stop()
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(tr.stderr, r"attached 7 probes to %s \(found in process %d\)" %
                             (re.escape(lib), r.summary["pid"]))
            j = tr.result = tr.last_json()
            self.assertEqual(j["libraries"], [lib])
            self.assertEqual(j[C.pids], 1)
            # Attached within the first mapping records' drain: most of the 3 s run is traced.
            self.assertGreater(j[C.kernels_matched], r.summary["kernels_run"] // 2, j)
            self.assertEqual(j[C.orphan_kernels], 0)
            print("\ndiscovery:", [l for l in tr.stderr.splitlines() if "parcagpu-trace:" in l],
                  "kernels_matched", j[C.kernels_matched], "of", r.summary["kernels_run"])
        finally:
            os.rmdir(cg)
            shutil.rmtree(tmp, ignore_errors=True)

    def test_warns_when_nothing_matches(self):
        tmp = tempfile.mkdtemp(prefix="parcagpu-where-")
        try:
            lib = self.lib_copy(tmp)
            r = run_trace(["-l", lib, "-d", "300ms", "--json"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("warning: no running process has loaded %s" % lib, r.stderr)
            sleeper = subprocess.Popen(["sleep", "30"])
            try:
                r = run_trace(["-p", str(sleeper.pid), "-d", "300ms", "--json"])
                self.assertIn("warning: process %d has not loaded a library with parcagpu probes "
                              "(yet)" % sleeper.pid, r.stderr)
                r = run_trace(["-l", lib, "-p", str(sleeper.pid), "-d", "300ms", "--json"])
                self.assertIn("warning: process %d has not loaded %s (yet)" % (sleeper.pid, lib), r.stderr)
            finally:
                sleeper.kill()
                sleeper.wait()
            r = run_trace(["-l", "/nonexistent/libparcagpu.so"])
            self.assertEqual(r.returncode, 1)
            self.assertIn("cannot open /nonexistent/libparcagpu.so", r.stderr)
            r = run_trace(["-l", "/bin/true"])
            self.assertEqual(r.returncode, 1)
            self.assertIn("has no USDT probes of provider 'parcagpu'", r.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class Streams(unittest.TestCase):
    def test_json_lines(self):
        with harness.TraceTool(["-l", harness.LIB, "--json-lines"]) as tr:
            r = harness.run_mockapp(["--duration=1s", "--launch-rate=500", "--graph-rate=50"],
                                    env=harness.UNLIMITED)
        tr.stop()
        self.assertEqual(r.returncode, 0)
        objs = [json.loads(l) for l in tr.stdout.splitlines()]
        types = [o["type"] for o in objs]
        self.assertEqual(types[0], "library")
        self.assertEqual(types[-1], "summary")
        stacks = set()
        kernels = 0
        for o in objs:
            if o["type"] == "stack":
                stacks.add(o["id"])
                self.assertTrue(o["frames"])
            elif o["type"] == "kernel":
                kernels += 1
                self.assertIn(o["stack_id"], stacks)  # each stack before its first kernel
                self.assertEqual(o["gpu_ns"], o["end"] - o["start"])
        summary = objs[-1]
        self.assertEqual(kernels, summary[C.kernels_matched])
        self.assertEqual(summary[C.kernels_matched], r.summary["kernels_run"])
        with open(os.path.join(harness.BUILD, "generated", "parcagpu_version.h")) as f:
            self.assertEqual(summary["version"], f.read().split('"')[1])

    def test_intervals_then_exit(self):
        app = harness.start_mockapp(["--duration=20s", "--launch-rate=300", "--graph-rate=30"])
        try:
            t0 = time.time()
            r = run_trace(["-p", str(app.pid), "--json-lines", "1s", "3"])
            elapsed = time.time() - t0
        finally:
            app.kill()
            harness.finish_mockapp(app)
        self.assertEqual(r.returncode, 0, r.stderr)
        objs = [json.loads(l) for l in r.stdout.splitlines()]
        intervals = [o for o in objs if o["type"] == "interval"]
        self.assertEqual(len(intervals), 3)
        self.assertLess(elapsed, 15)  # COUNT ended it, not the app
        for o in intervals:
            self.assertGreaterEqual(o["seconds"], 1.0)
            self.assertEqual(sum(s["kernels"] for s in o["gpu_time_by_stack"]), o["kernels"])
        self.assertGreater(sum(o["kernels"] for o in intervals), 0)
        self.assertEqual(objs[-1]["type"], "summary")
        # The text form: one table per interval.
        app = harness.start_mockapp(["--duration=20s", "--launch-rate=300", "--graph-rate=30"])
        try:
            r = run_trace(["-p", str(app.pid), "500ms", "2"])
        finally:
            app.kill()
            harness.finish_mockapp(app)
        self.assertEqual(len(re.findall(r"GPU time by launch stack, last \d", r.stdout)), 2, r.stdout)


class CommandLine(unittest.TestCase):
    def test_version_help_and_bad_arguments(self):
        r = run_trace(["--version"])
        self.assertEqual(r.returncode, 0)
        self.assertRegex(r.stdout, r"^parcagpu-trace \d+\.\d+\.\d+\n")
        r = run_trace(["--help"])
        self.assertEqual(r.returncode, 0)
        self.assertIn("EXAMPLES:", r.stdout)
        self.assertIn("--svg=FILE", r.stdout)
        for bad in (["-d", "ten"], ["-d", "5parsecs"], ["-p", "x"], ["--linger", "-1s"], ["1s", "0"],
                    ["--ringbuf-mb", "3"], ["--json", "--json-lines"], ["--nope"], ["--stack-bytes", "7"],
                    ["--stack-bytes", "32"], ["--stack-bytes", "131080"]):
            r = run_trace(bad)
            self.assertEqual(r.returncode, 2, (bad, r.stderr))
        r = run_trace(["-l", harness.LIB, "-d", "700ms", "--json"])  # a duration with a unit
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertAlmostEqual(json.loads(r.stdout)["duration_s"], 0.7, delta=0.5)


class HelpNamesItsDocumentation(unittest.TestCase):
    """--help names the documentation where it is: installed next to the tool (PREFIX/bin,
    PREFIX/share/doc/parcagpu/parcagpu-trace.md, as the package lays them out), else the source's
    tools/trace/README.md (issue 44: it named the source's path after an install too)."""

    def test_installed_and_in_the_build_tree(self):
        r = run_trace(["--help"])
        self.assertIn("See tools/trace/README.md in parcagpu's source", r.stdout.replace("\n", " "))
        tmp = tempfile.mkdtemp(prefix="parcagpu-help-")
        try:
            os.makedirs(os.path.join(tmp, "bin"))
            doc = os.path.join(tmp, "share", "doc", "parcagpu")
            os.makedirs(doc)
            shutil.copy(harness.TRACE, os.path.join(tmp, "bin", "parcagpu-trace"))
            shutil.copy(os.path.join(harness.SOURCE, "tools", "trace", "README.md"),
                        os.path.join(doc, "parcagpu-trace.md"))
            r = subprocess.run([os.path.join(tmp, "bin", "parcagpu-trace"), "--help"], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("See %s." % os.path.join(doc, "parcagpu-trace.md"), r.stdout.replace("\n", " "))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class Capabilities(unittest.TestCase):
    """What the tool says when it lacks privileges, checked by dropping capabilities (setpriv
    bounds what root gets on exec)."""

    def as_caps(self, caps):
        if not shutil.which("setpriv"):
            self.skipTest("setpriv (util-linux) not installed")
        bounding = "-all" + "".join(",+" + c for c in caps)
        return subprocess.run(["setpriv", "--bounding-set=" + bounding, "--inh-caps=-all", "--",
                               harness.TRACE, "-l", harness.LIB, "-d", "200ms", "--json"],
                              capture_output=True, text=True, timeout=60)

    def test_messages_name_what_is_missing(self):
        results = {}
        r = self.as_caps([])
        results["none"] = r
        self.assertEqual(r.returncode, 1)
        self.assertIn("loading BPF programs needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN); "
                      "missing CAP_BPF, CAP_PERFMON", r.stderr)
        r = self.as_caps(["bpf"])
        results["bpf"] = r
        self.assertEqual(r.returncode, 1)
        self.assertIn("missing CAP_PERFMON; this process has CAP_BPF", r.stderr)
        r = self.as_caps(["bpf", "perfmon"])
        results["bpf,perfmon"] = r
        if r.returncode == 0:  # a kernel before commit ba677dbe77af: CAP_PERFMON suffices
            self.assertRegex(r.stderr, r"attached \d+ probes")
        else:
            self.assertEqual(r.returncode, 1)
            self.assertIn("this kernel requires CAP_SYS_ADMIN to attach uprobes", r.stderr)
            self.assertIn("this process has CAP_BPF, CAP_PERFMON", r.stderr)
        r = self.as_caps(["sys_admin"])
        results["sys_admin"] = r
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"attached 7 probes")
        r = self.as_caps(["bpf", "perfmon", "sys_admin"])
        results["bpf,perfmon,sys_admin"] = r
        self.assertEqual(r.returncode, 0, r.stderr)
        print()
        for caps, r in results.items():
            print("caps {%s}: exit %d: %s" % (caps, r.returncode, r.stderr.strip().splitlines()[-1]
                                               if r.stderr.strip() else ""))


if __name__ == "__main__":
    harness.main()
