#!/usr/bin/env python3
"""NVTX ranges collected by the library (issue 46 item 2), seen by a real eBPF consumer: a
bpftrace program attached to nvtx_event_batch, nvtx_resource_name and cuda_correlation reads
every record at the offsets of include/parcagpu/abi.h. The mock app's --scenario=nvtx makes nested
push/pop ranges, a start/end range and a mark around its kernel launches on each thread, through
NVTX v3's own loader (--nvtx: NVTX_INJECTION64_PATH names the library, which forwards NVTX's
injection to the mock libcupti), from message buffers it overwrites right after each call, and
says what it made (MOCKAPP_NVTX). The consumer must read exactly that: kinds, messages, colors,
payloads, range IDs, tids, names, and each thread's ranges before the launch they enclose.
Without an NVTX consumer the library subscribes no NVTX callback and collects nothing; an
injection that cannot be had is said once and leaves the application running."""
import os
import re
import unittest

import harness

# Prints every record of a firing (at most 24: the batches here hold a few events, since every
# launch is announced and fires its thread's batch first; the test checks the bound), with a
# sequence number per thread: bpftrace prints from per-CPU buffers, so lines of one thread may
# come out of order when it moved between CPUs, but their sequence numbers keep the order in
# which the probes fired.
SCRIPT = r"""
BEGIN { printf("READY nvtx.bt\n"); }

usdt:$1:parcagpu:cuda_correlation
{
  @seq[tid] = @seq[tid] + 1;
  printf("LAUNCH pid=%d tid=%d seq=%d corr=%u\n", pid, tid, @seq[tid], (uint32)arg0);
}

usdt:$1:parcagpu:nvtx_event_batch
{
  @seq[tid] = @seq[tid] + 1;
  $n = (int64)(uint32)arg1;
  $base = (int64)arg0;
  $s = @seq[tid];
  printf("NVTXBATCH pid=%d tid=%d seq=%d count=%d\n", pid, tid, $s, $n);
  $i = (int64)0;
  unroll(24) {
    if ($i < $n) {
      $r = *(uint64 *)($base + 8 * $i);
      printf("NVTX pid=%d tid=%d seq=%d i=%d ts=%lu rtid=%u corr=%u dom=%u kind=%u flags=%u color=%u dev=%u payload=%lu range=%lu msg=%s\n",
             pid, tid, $s, $i, *(uint64 *)($r + 0), *(uint32 *)($r + 8), *(uint32 *)($r + 12),
             *(uint32 *)($r + 16), *(uint16 *)($r + 20), *(uint16 *)($r + 22),
             *(uint32 *)($r + 24), *(uint32 *)($r + 28), *(uint64 *)($r + 32),
             *(uint64 *)($r + 40), str(*(uint64 *)($r + 48)));
    }
    $i = $i + 1;
  }
}

usdt:$1:parcagpu:nvtx_resource_name
{
  printf("NVTXNAME pid=%d tid=%d kind=%u id=%lu name=%s\n", pid, tid, (uint32)arg0, arg1,
         str(arg2));
}

usdt:$1:parcagpu:error
{
  printf("ERROR pid=%d code=%d component=%s message=%s\n", pid, (int32)arg0, str(arg2),
         str(arg1));
}
"""
BATCH_LINES = 24
KINDS = {1: "push", 2: "pop", 3: "start", 4: "end", 5: "mark"}


class NvtxBpftrace(harness.Bpftrace):
    """The program above, attached to the test's copy of the library; stop() drains as the
    harness's bpftrace does (its `error` line carries the drain markers)."""
    ready_pattern = r"READY nvtx\.bt"

    def __init__(self, lib=harness.LIB):
        self.lib = os.path.abspath(lib)
        path = os.path.join(harness.PRIVATE_DIR, "nvtx.bt")
        with open(path, "w") as f:
            f.write(SCRIPT)
        harness._Consumer.__init__(self, ["bpftrace", path, self.lib])

    def parsed(self):
        """(batches, records, correlations, names), each a list of dicts, from the output."""
        out = {"NVTXBATCH": [], "NVTX": [], "LAUNCH": [], "NVTXNAME": []}
        for line in self.stdout.splitlines():
            tag = line.split(" ", 1)[0]
            if tag not in out:
                continue
            if tag == "NVTX" or tag == "NVTXNAME":
                head, text = re.split(r" (?:msg|name)=", line, maxsplit=1)
            else:
                head, text = line, ""
            f = {k: int(v) for k, v in (kv.split("=", 1) for kv in head.split()[1:])}
            f["text"] = text
            out[tag].append(f)
        return out["NVTXBATCH"], out["NVTX"], out["LAUNCH"], out["NVTXNAME"]


def made_by_thread(run):
    import json
    made = [json.loads(l.split(" ", 1)[1]) for l in run.stdout.splitlines()
            if l.startswith("MOCKAPP_NVTX ")]
    return {m["tid"]: m for m in made}


def nvtx_env(extra=None):
    env = dict(harness.UNLIMITED)
    env["PARCAGPU_DEBUG"] = "1"
    env.update(extra or {})
    return env


def nvtx_totals(run):
    """The library's debug totals line for NVTX, as a dict."""
    m = re.search(r"nvtx: events=(\d+) batches=(\d+) names=(\d+)", run.stderr)
    assert m, run.stderr[-3000:]
    return {"events": int(m[1]), "batches": int(m[2]), "names": int(m[3])}


class NvtxRanges(unittest.TestCase):
    def run_traced(self, threads=2, env=None):
        with NvtxBpftrace() as bt:
            r = harness.run_mockapp(["--nvtx", "--scenario=nvtx", "--threads=%d" % threads],
                                    env=nvtx_env(env))
            bt.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        return r, bt

    def check_thread(self, tid, made, records, corrs, names):
        mine = sorted((x for x in records if x["tid"] == tid), key=lambda x: (x["seq"], x["i"]))
        self.assertTrue(all(x["rtid"] == tid for x in mine))
        counts = {k: sum(1 for x in mine if KINDS.get(x["kind"]) == k) for k in KINDS.values()}
        self.assertEqual(counts, {k: made[k] for k in KINDS.values()}, tid)
        # Every message as the app gave it, though it overwrote its buffer right after the call.
        self.assertEqual([x["text"] for x in mine], made["messages"])
        for x in mine:
            self.assertEqual((x["dom"], x["flags"], x["dev"]), (0, 0, 0xffffffff), x)
            colored = x["text"] == "backward"
            self.assertEqual(x["color"], made["color"] if colored else 0, x)
            self.assertEqual(x["payload"], made["payload"] if colored else 0, x)
        starts = [x["range"] for x in mine if x["kind"] == 3]
        self.assertEqual(starts, [x["range"] for x in mine if x["kind"] == 4])
        self.assertEqual(len(set(starts)), len(starts))
        self.assertTrue(all(r != 0 for r in starts))
        # Every launch announced (unlimited rates), each after the ranges that enclose it: no
        # record made before an announcement (it carries an older correlation ID) comes after it.
        announced = [c for c in corrs if c["tid"] == tid]
        self.assertEqual(len(announced), made["launches"])
        for x in mine:
            later = [c for c in announced if c["seq"] < x["seq"] and c["corr"] > x["corr"]]
            self.assertEqual(later, [], "record %s fired after the launch it preceded" % x)
        # And each record carries the last launch announced before it was made.
        self.assertEqual(sorted({x["corr"] for x in mine}),
                         sorted({0} | {c["corr"] for c in announced}))
        self.assertIn({"kind": 1, "id": tid, "text": made["name"]},
                      [{k: n[k] for k in ("kind", "id", "text")} for n in names])

    def test_every_range_reaches_the_consumer_in_order(self):
        r, bt = self.run_traced(threads=2)
        made = made_by_thread(r)
        self.assertEqual(len(made), 2, r.stdout[-2000:])
        batches, records, corrs, names = bt.parsed()
        self.assertTrue(batches)
        self.assertLessEqual(max(b["count"] for b in batches), BATCH_LINES)
        self.assertEqual(len(records), sum(b["count"] for b in batches))
        for tid, m in made.items():
            self.check_thread(tid, m, records, corrs, names)
        total = sum(m[k] for m in made.values() for k in KINDS.values())
        self.assertEqual(len(records), total)
        # The mark before cuInit was made before anyone subscribed: not collected.
        self.assertNotIn("before cuInit", [x["text"] for x in records])
        self.assertEqual(nvtx_totals(r), {"events": total, "batches": len(batches), "names": 2})
        report = r.exit_reports[0]
        self.assertIn("NVTX:8", report["ever_enabled"])  # nvtxRangePushA
        self.assertEqual([p for p in report["still_enabled"] if p.startswith("NVTX:")], [])

    def test_libcuptis_own_injection_path_works_too(self):
        # NVTX_INJECTION64_PATH naming libcupti itself (CUPTI's documented way): the same
        # libcupti the library then finds in the process.
        cupti = os.path.join(harness.MOCK_DIR, "libcupti.so.%s" % (harness.PERSONALITY or "13"))
        r, bt = self.run_traced(threads=1, env={"NVTX_INJECTION64_PATH": cupti})
        made = made_by_thread(r)
        _, records, corrs, names = bt.parsed()
        for tid, m in made.items():
            self.check_thread(tid, m, records, corrs, names)
        self.assertNotIn("forwarding NVTX's injection", r.stderr)


class NvtxWithoutConsumer(unittest.TestCase):
    def test_no_nvtx_callback_and_no_event_without_an_nvtx_consumer(self):
        # A launch consumer (parcagpu.bt attaches no NVTX probe): launches announced, NVTX off.
        with harness.Bpftrace() as bt:
            r = harness.run_mockapp(["--nvtx", "--scenario=nvtx"], env=nvtx_env())
            bt.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertGreater(len(bt.correlations), 0)
        report = r.exit_reports[0]
        self.assertEqual([p for p in report["ever_enabled"] if p.startswith("NVTX:")], [])
        self.assertEqual(nvtx_totals(r), {"events": 0, "batches": 0, "names": 0})
        self.assertIn("forwarding NVTX's injection", r.stderr)  # NVTX itself was served


class NvtxInjectionMissing(unittest.TestCase):
    def test_a_libcupti_without_the_entry_point_is_said_once_and_nvtx_stays_off(self):
        with NvtxBpftrace() as bt:
            r = harness.run_mockapp(["--nvtx", "--scenario=nvtx", "--threads=2"],
                                    env=nvtx_env({"MOCK_CUPTI_HIDE": "InitializeInjectionNvtx2"}))
            bt.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        said = [l for l in r.parcagpu_errors() if "NVTX_INJECTION64_PATH" in l]
        self.assertEqual(len(said), 1, r.stderr[-3000:])
        self.assertIn("NVTX calls stay no-ops", said[0])
        errors = [l for l in bt.stdout.splitlines()
                  if l.startswith("ERROR ") and "component=nvtx" in l]
        self.assertEqual(len(errors), 1, bt.stdout[-2000:])
        _, records, corrs, _ = bt.parsed()
        self.assertEqual(records, [])
        self.assertGreater(len(corrs), 0)  # the profiler itself runs on
        self.assertEqual(nvtx_totals(r)["events"], 0)


if __name__ == "__main__":
    harness.main()
