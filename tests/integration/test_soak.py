#!/usr/bin/env python3
"""Soak (issue 30 items 3 and 4, issue 27 item 3): the mock app replays the eager, graph, capture
and conditional scenarios on 4 threads in a loop under the library, with parcagpu-trace --pc
attached (production always has a PC-sample consumer), first at the default rate limits, then
with every launch announced (harness.UNLIMITED). In each phase:

- the application's RSS grows less than 16 MiB after warm-up (the first minute, or the first
  25% of a shorter phase): the library's and the mock's stores are bounded by what is live;
- parcagpu-trace's RSS grows less than 16 MiB after its own warm-up (TRACE_WARMUP_S, below) at
  the default rates, and stays under the ceiling its caps allow with every launch announced,
  where the mock outruns it (TRACE_CEILING_MIB);
- every loss parcagpu-trace counts in its JSON summary is also said in its text report;
- no impossible kernel record (tools/trace/timestamp_check.h), at the default rates and with every
  launch announced;
and at the default rates, no ring-buffer drop at all (issue 30 item 3: 22M drops in 180 s once,
from graph_node_clone firing for every clone). With every launch announced, at least
MIN_GRAPH_RECORDS_PER_S kernel records of graph launches (conditional bodies included) a second
must go through the library (written by the mock CUPTI into its buffers, graph_records_written);
the full run (scripts/soak.sh, 10 minutes) asserts 25M of them. That many outrun the trace on
2 CPUs (ring-buffer drops: reported, and its own count of graph kernel records is printed), so
the library's side is what is counted.

PARCAGPU_SOAK_SECONDS: the whole run (default 120, ctest's short form): 40% at the default rates,
60% with every launch announced (the records count there).
PARCAGPU_SOAK_GRAPH_RECORDS: graph kernel records the every-launch phase must put through the
library (default: 25M for a run of 600 s or more, else none beyond the rate floor).
PARCAGPU_SOAK_OUT: a directory to save each phase's outputs in (RSS series, trace text and JSON,
app stderr).
"""
import json
import os
import re
import time
import unittest

import harness

TOTAL_S = float(os.environ.get("PARCAGPU_SOAK_SECONDS", "120"))
DEFAULT_PHASE_S = 0.4 * TOTAL_S
ANNOUNCED_PHASE_S = 0.6 * TOTAL_S
OUT_DIR = os.environ.get("PARCAGPU_SOAK_OUT", "")
# Impossible kernel records with every launch announced were 8 in 61M over six runs (all stream
# overlaps): the mock's own, found on 2026-11-27 (harness.check_no_impossible_records says how).
# None is allowed in either form (PARCAGPU_SOAK_STRICT=0 only says them, to look at others).
STRICT_IMPOSSIBLE = os.environ.get("PARCAGPU_SOAK_STRICT", "1") == "1"
GRAPH_RECORDS = int(float(os.environ.get("PARCAGPU_SOAK_GRAPH_RECORDS",
                                         "25e6" if TOTAL_S >= 600 else "0")))
SCENARIOS = "capture,conditional,graph-runtime,eager-runtime,graph-driver-ptsz"
# The app's warm-up: the first minute, or the first 25% of a shorter phase. Before it the stores
# fill to their working size (activity buffers, the tracker's live launches, PC sampling's buffers:
# steps of 2 to 9 MiB were seen in the first 20 s, none after).
def app_warmup(phase_s):
    return min(60.0, phase_s / 4)


APP_GROWTH_MIB = 16
# parcagpu-trace's stores are capped (the joiner's --max-pending 262144 launches and kernels, the
# stack table's 65536) and it forgets what waited --max-age (30 s) in generations of max-age/2.
# With every launch announced the mock outruns it (ring-buffer drops, so orphans): the joiner
# fills to its cap, ~200 MiB, within about 1.5 max-ages, and stays there. So the trace's warm-up is
# 45 s (or the app's, if longer), and after it 16 MiB is the bound: flat but for allocator noise,
# while a leak of one entry per event (thousands a second) would cross it within seconds. At the
# default rates the trace held within 1 MiB of its start for the whole phase.
TRACE_WARMUP_S = 45.0
TRACE_GROWTH_MIB = 16
# With every launch announced the mock outruns the trace for the whole phase, and its stores fill
# toward their caps past the joiner's: the capture sites (2^20 entries, two generations) took
# ~60 MiB more between the 4th and 5th minute of the 10-minute run, at about half their cap. So
# there the bound is a ceiling from the caps: the trace's start (~75 MiB: ring buffer and maps),
# the joiner at its cap (~160 MiB seen), the capture sites at theirs (~150 MiB), with room:
# 512 MiB. A leak of an entry per event (23k events/s) would pass it within the 6-minute phase.
TRACE_CEILING_MIB = 512
# The mock app's loop on 2 shared CPUs with the trace attached put ~370k graph kernel records a
# second through the library with every launch announced (26.6M in 72 s); the floor of the short
# form is a twentieth of that, so that a loaded CI machine passes and a phase that did not run
# does not.
MIN_GRAPH_RECORDS_PER_S = 20000
# What parcagpu-trace's text report must say when the counter is nonzero: counter -> pattern of
# the text (tools/trace/report.cc print_summary).
LOSS_TEXT = {
    "ringbuf_drops": r"ring-buffer drops (\d+)",
    "read_errors": r"read errors (\d+)",
    "stacks_dropped": r"stacks dropped (\d+)",
    "orphan_kernels": r"orphan kernels (\d+)",
    "orphan_correlations_eager": r"launches without kernels \(eager\) (\d+)",
    "orphan_correlations_graph": r"launches without kernels \(graph\) (\d+)",
    "batch_records_over_cap": r"records over the activity_batch cap (\d+)",
    "capture_entries_forgotten": r"capture sites forgotten (\d+)",
    "stack_table_overflows": r"stacks beyond the stack table (\d+)",
    "errors": r"library errors \(error probe\): (\d+)",
}
# Forgotten launches and kernels are said as one line of their sums.
FORGOTTEN_TEXT = r"of which forgotten: launches (\d+), kernels (\d+)"


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def growth_after_warmup(series, column, warmup_s):
    """MiB the column grew after the warm-up: the median of the last quarter of the samples after
    it against the median of the first quarter. A leak grows from one to the other; a burst that
    is given back (the activity buffers taken by records outrunning delivery on a busy machine)
    moves neither median."""
    after = [s[column] for s in series if s[0] >= warmup_s and s[column] is not None]
    if len(after) < 2:
        return 0.0, after
    q = max(1, len(after) // 4)
    first, last = sorted(after[:q]), sorted(after[-q:])
    return (last[len(last) // 2] - first[len(first) // 2]) / 1024.0, after


def unsaid_losses(j, text):
    """Loss counters nonzero in the JSON summary whose number the text report does not say."""
    unsaid = []
    for counter, pattern in LOSS_TEXT.items():
        n = j.get(counter, 0)
        if not n:
            continue
        m = re.search(pattern, text)
        if not m or int(m.group(1)) != n:
            unsaid.append("%s=%d" % (counter, n))
    launches = j.get("forgotten_correlations_eager", 0) + j.get("forgotten_correlations_graph", 0)
    kernels = j.get("forgotten_kernels", 0)
    if launches or kernels:
        m = re.search(FORGOTTEN_TEXT, text)
        if not m or (int(m.group(1)), int(m.group(2))) != (launches, kernels):
            unsaid.append("forgotten launches=%d kernels=%d" % (launches, kernels))
    return unsaid


class Soak(unittest.TestCase):
    def phase(self, name, env, phase_s):
        """One phase: parcagpu-trace --pc attached, the mock app looping phase_s seconds. Returns
        (RSS series [(t, app KiB, trace KiB)], trace JSON summary, trace text, app run)."""
        tag = name.replace(" ", "-")
        summary_path = os.path.join(harness.BUILD, "soak-%s-%d.json" % (tag, os.getpid()))
        self.addCleanup(lambda: os.path.exists(summary_path) and os.unlink(summary_path))
        trace = harness.TraceTool(["-l", os.path.abspath(harness.LIB), "--pc",
                                   "--json=" + summary_path])
        self.addCleanup(trace.stop)
        app = harness.start_mockapp(["--threads=4", "--loop", "--duration=%ds" % phase_s,
                                     "--scenario=" + SCENARIOS], env=env)
        self.addCleanup(lambda: app.poll() is None and app.kill())
        interval = min(5.0, max(1.0, phase_s / 40))
        start = time.time()
        series = []
        while app.poll() is None:
            t = time.time() - start
            a, c = rss_kib(app.pid), rss_kib(trace.proc.pid)
            if a is None:
                break
            series.append((round(t, 1), a, c))
            time.sleep(interval)
        run = harness.finish_mockapp(app, timeout=phase_s + 120)
        trace.stop(timeout=180)
        with open(summary_path) as f:
            j = json.loads(f.read())
        text = trace.stdout
        if OUT_DIR:
            os.makedirs(OUT_DIR, exist_ok=True)
            with open(os.path.join(OUT_DIR, tag + "-rss.txt"), "w") as f:
                f.write("t_s app_rss_kib trace_rss_kib\n")
                f.writelines("%s %s %s\n" % s for s in series)
            with open(os.path.join(OUT_DIR, tag + "-trace.txt"), "w") as f:
                f.write(text + trace.stderr)
            with open(os.path.join(OUT_DIR, tag + "-trace.json"), "w") as f:
                json.dump(j, f, indent=1)
            with open(os.path.join(OUT_DIR, tag + "-app.txt"), "w") as f:
                f.write(run.stdout[-20000:] + run.stderr[-20000:])
        return series, j, text, run

    def check_phase(self, name, env, phase_s, default_rates):
        series, j, text, run = self.phase(name, env, phase_s)
        warmup_s = app_warmup(phase_s)
        trace_warmup_s = max(warmup_s, TRACE_WARMUP_S)
        app_growth, app_after = growth_after_warmup(series, 1, warmup_s)
        trace_growth, trace_after = growth_after_warmup(series, 2, trace_warmup_s)
        firings = {k: v for k, v in j.items()
                   if k in ("correlations", "kernel_records", "graph_kernel_records", "events",
                            "graph_node_clones", "graph_capture_launches", "pc_sample_batches",
                            "activity_batches", "ringbuf_drops", "orphan_kernels",
                            "orphan_correlations_eager", "orphan_correlations_graph",
                            "forgotten_kernels", "impossible_kernel_records")}
        print("\nsoak %s, %.0f s: app RSS %d -> %d KiB (max %d; +%.1f MiB after %.0f s), "
              "trace RSS %d -> %d KiB (+%.1f MiB after %.0f s); %s" % (
                  name, phase_s, series[0][1], series[-1][1], max(s[1] for s in series),
                  app_growth, warmup_s, series[0][2] or 0, series[-1][2] or 0, trace_growth,
                  trace_warmup_s, json.dumps(firings)), flush=True)
        lost = re.search(r"  lost: .*", text)
        print("  trace: %s" % (lost.group(0).strip() if lost else "(no lost line)"), flush=True)
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])
        self.assertGreaterEqual(len(trace_after), 2,
                                "too few RSS samples after warm-up: %s" % series)
        self.assertLess(app_growth, APP_GROWTH_MIB,
                        "%s: the app's RSS grew %.1f MiB after warm-up (KiB: %s)" % (
                            name, app_growth, app_after))
        if default_rates:
            self.assertLess(trace_growth, TRACE_GROWTH_MIB,
                            "%s: parcagpu-trace's RSS grew %.1f MiB after warm-up (KiB: %s)" % (
                                name, trace_growth, trace_after))
        else:
            self.assertLess(max(s[2] or 0 for s in series) / 1024.0, TRACE_CEILING_MIB,
                            "%s: parcagpu-trace's RSS past its caps' ceiling (KiB: %s)" % (
                                name, [s[2] for s in series]))
        self.assertEqual(unsaid_losses(j, text), [],
                         "%s: losses in the JSON summary its text does not say:\n%s" % (name, text))
        if default_rates or STRICT_IMPOSSIBLE:
            harness.check_no_impossible_records(j, "parcagpu-trace (%s)" % name)
        elif j["impossible_kernel_records"]:
            # Open (see STRICT_IMPOSSIBLE): said, at least, in the text a person reads.
            self.assertIn("impossible kernel records: %d " % j["impossible_kernel_records"], text)
            print("  %d impossible kernel records with every launch announced (not failed: "
                  "PARCAGPU_SOAK_STRICT=0)" % j["impossible_kernel_records"], flush=True)
        if default_rates:
            self.assertEqual(j["ringbuf_drops"], 0,
                             "%s: ring-buffer drops; events by probe: %s" % (name, firings))
            # What filled the ring buffer (issue 30 item 3): graph_node_clone fired for every
            # clone, and later every stored clone was re-fired 1 s after the library started
            # (243k of 250k events in 48 s, for 454 captures announced). Now it fires for the
            # clones of announced captures (one each here: a captured graph is instantiated
            # once) and, at attach, for the live execs' mappings (a few dozen).
            self.assertLessEqual(j["graph_node_clones"], 2 * j["graph_capture_launches"] + 1000,
                                 "%s: graph_node_clone events beyond the announced captures: %s"
                                 % (name, firings))
        self.assertEqual(len(run.exit_reports), 1, run.stderr[-3000:])
        self.exit_stats = run.exit_reports[0]["stats"]
        return j

    def test_soak(self):
        self.check_phase("default rates", {}, DEFAULT_PHASE_S, default_rates=True)
        j = self.check_phase("every launch announced", harness.UNLIMITED, ANNOUNCED_PHASE_S,
                             default_rates=False)
        floor = max(GRAPH_RECORDS, int(MIN_GRAPH_RECORDS_PER_S * ANNOUNCED_PHASE_S))
        through = self.exit_stats["graph_records_written"]
        print("  graph kernel records through the library: %d (the trace got %d); wanted %d" % (
            through, j["graph_kernel_records"], floor), flush=True)
        self.assertGreaterEqual(through, floor,
                                "every launch announced: %d graph kernel records, wanted %d" % (
                                    through, floor))


if __name__ == "__main__":
    harness.main()
