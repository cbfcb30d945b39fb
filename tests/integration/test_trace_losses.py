#!/usr/bin/env python3
"""parcagpu-trace says every loss where it happens (issue 30 item 2): a warning on stderr at the
first ring-buffer drop, the first launches and kernels forgotten at --max-pending and the first
error firing lost, each once and while tracing; the report's "lost" section names each loss with
the count the JSON summary has. And the library's error firings reach the tool even while kernel
events overflow the ring buffer: they go through a ring buffer of their own.

The storm: the mock app with 4 threads launching as fast as the mock goes, every launch announced
(harness.UNLIMITED), with stacks, into the smallest ring buffer (1 MiB: ~90 launch events). While
it keeps the ring buffer full (the consumer stopped for a moment: storm_with_errors), other
processes of the library fire `error` (the mock's cuptiActivityFlushAll fails three times: the
library says so at the first failure and at exit).

Seen before the fix (the errors shared the ring buffer with the storm): 4 of 8 error firings
lost, said by nobody."""
import json
import os
import re
import signal
import tempfile
import time
import unittest

import harness

C = harness.COUNTER

STORM = ["--threads=4", "--launch-rate=20000", "--graph-rate=2000", "--duration=4s"]
ERRORS = ["--procs=4", "--duration=1s", "--launch-rate=2000", "--graph-rate=200"]
ERROR_ENV = dict(harness.UNLIMITED, MOCK_CUPTI_FAIL="cuptiActivityFlushAll*3")
RECEIVED = re.compile(r"^parcagpu-trace: pid \d+: library error ", re.M)
WARNING = re.compile(r"^parcagpu-trace: warning: .* \(counted as (\w+)", re.M)


def lost_names():
    """The names of the report's "lost:" line, and the counters they are."""
    return {"orphan kernels": C.orphan_kernels,
            "launches without kernels (eager)": C.orphan_correlations_eager,
            "launches without kernels (graph)": C.orphan_correlations_graph,
            "ring-buffer drops": C.ringbuf_drops,
            "metadata ring-buffer drops": C.meta_ringbuf_drops,
            "error firings lost": C.errors_lost,
            "read errors": C.read_errors,
            "stacks dropped": C.stacks_dropped}


def storm_with_errors(trace):
    """Runs the storm under `trace` (a started consumer) and, once the ring buffer has overflowed
    (the warning, or 1.5 s), the processes that fire `error`, with the consumer stopped (SIGSTOP,
    as a consumer descheduled on a busy machine): the storm keeps the ring buffer full to its last
    byte meanwhile, so an error event that shares it finds no room. The consumer goes on
    (SIGCONT) once they have exited. Returns the library's error lines (each is one firing of
    `error`) and the consumer's stderr as it was before the storm's end."""
    storm = harness.start_mockapp(STORM, env=harness.UNLIMITED)
    try:
        deadline = time.time() + 1.5
        while time.time() < deadline and "(counted as %s" % "ringbuf_drops" not in trace._read(trace.err):
            time.sleep(0.05)
        os.kill(trace.proc.pid, signal.SIGSTOP)
        try:
            time.sleep(0.2)  # the storm fills what the consumer had read
            errs = harness.run_mockapp(ERRORS, env=ERROR_ENV)
        finally:
            os.kill(trace.proc.pid, signal.SIGCONT)
    finally:
        s = harness.finish_mockapp(storm)
    said_while_tracing = trace._read(trace.err)
    assert s.returncode == 0 and errs.returncode == 0, (s.stderr[-2000:], errs.stderr[-2000:])
    return s.parcagpu_errors() + errs.parcagpu_errors(), said_while_tracing


class ErrorsThroughAFullRingBuffer(unittest.TestCase):
    def test_every_error_firing_reaches_the_tool(self):
        with harness.Trace(extra=["--ringbuf-mb", "1"]) as tr:
            library_errors, _ = storm_with_errors(tr)
        tr.stop()
        self.assertEqual(tr.proc.returncode, 0, tr.stderr[-2000:])
        j = tr.result
        self.assertGreater(len(library_errors), 0)
        # The storm overflowed the ring buffer ...
        self.assertGreater(j[C.ringbuf_drops], 0, j)
        # ... and every error the library fired came through, printed as it came.
        received = RECEIVED.findall(tr.stderr)
        self.assertEqual(len(received), len(library_errors),
                         "the library fired %d errors, the tool printed %d:\n%s" % (
                             len(library_errors), len(received), "\n".join(library_errors)))
        self.assertEqual(j[C.error_firings], len(library_errors))
        self.assertEqual(j[C.errors], j[C.error_firings])
        self.assertEqual(j[C.errors_lost], 0)
        self.assertEqual(j[C.meta_ringbuf_drops], 0)
        print("\n%d kernel events dropped, %d of %d error firings received" % (
            j[C.ringbuf_drops], j[C.errors], j[C.error_firings]))


class LossesSaidWhereTheyHappen(unittest.TestCase):
    def test_warning_once_per_kind_and_the_lost_section(self):
        tmp = tempfile.mkdtemp(prefix="parcagpu-losses-")
        summary = os.path.join(tmp, "summary.json")
        try:
            # The text report on stdout, the JSON of the same run in a file.
            tr = harness.TraceTool(["-l", os.path.abspath(harness.LIB), "--ringbuf-mb", "1",
                                    "--max-pending", "4096", "--json=" + summary])
            with tr:
                library_errors, said_while_tracing = storm_with_errors(tr)
            tr.stop()
            self.assertEqual(tr.proc.returncode, 0, tr.stderr[-2000:])
            with open(summary) as f:
                j = json.load(f)
        finally:
            for name in os.listdir(tmp):
                os.unlink(os.path.join(tmp, name))
            os.rmdir(tmp)
        self.assertGreater(j[C.ringbuf_drops], 0)
        self.assertGreater(j[C.forgotten_at_max_pending], 0)
        self.assertEqual(j[C.errors_lost], 0)
        self.assertEqual(j[C.error_firings], len(library_errors))

        # One warning per kind of loss that happened, none for the others; the ring buffer's and
        # the joiner's while the storm ran (before the tool was stopped).
        warned = WARNING.findall(tr.stderr)
        for key in (C.ringbuf_drops, C.meta_ringbuf_drops, C.errors_lost, C.forgotten_at_max_pending):
            self.assertEqual(warned.count(key), 1 if j[key] else 0, (key, j[key], warned))
        for key in (C.ringbuf_drops, C.forgotten_at_max_pending):
            self.assertIn("(counted as %s" % key, said_while_tracing)

        # The report's lost section: each loss by name, with the JSON's count.
        lost = re.search(r"^  lost: (.*)$", tr.stdout, re.M)
        self.assertIsNotNone(lost, tr.stdout[:3000])
        names = lost_names()
        named = {}
        for item in lost[1].split(", "):
            name, n = item.rsplit(" ", 1)
            self.assertIn(name, names, lost[0])
            named[names[name]] = int(n)
        self.assertEqual(named, {key: j[key] for key in names.values() if j[key]})
        forgotten = re.search(r"^  of which forgotten: launches (\d+), kernels (\d+) \((\d+) of them at "
                              r"--max-pending 4096, the rest after 30 s\)$", tr.stdout, re.M)
        self.assertIsNotNone(forgotten, tr.stdout[:3000])
        self.assertEqual(int(forgotten[1]), j[C.forgotten_correlations_eager] + j[C.forgotten_correlations_graph])
        self.assertEqual(int(forgotten[2]), j[C.forgotten_kernels])
        self.assertEqual(int(forgotten[3]), j[C.forgotten_at_max_pending])
        self.assertIn("  library errors (error probe): %d received of %d fired\n" % (j[C.errors], j[C.error_firings]),
                      tr.stdout)
        print("\n" + "\n".join(l for l in tr.stderr.splitlines() if "warning:" in l and "counted as" in l))
        print("\n".join(l for l in tr.stdout.splitlines() if l.startswith(("  lost:", "  of which", "  library errors"))))


if __name__ == "__main__":
    harness.main()
