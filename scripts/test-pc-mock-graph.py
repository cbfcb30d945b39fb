#!/usr/bin/env python3
"""make test-pc-mock-graph: driver graph launches must reach the profiler.

Runs the mock application with graph launches split between the runtime (cudaGraphLaunch, 311
over 514) and the driver (cuGraphLaunch 514, cuGraphLaunch_ptsz 515), with bpftrace and
parcagpu-trace both attached, and asserts that driver graph launches produce cuda_correlation
with cbid -514 and -515, that their kernels arrive, and that both consumers agree on the counts.

Exits non-zero when any of that fails. The test suite also runs it with
MOCK_CUPTI_REFUSE=DRIVER:514,DRIVER:515 (the mock silently ignores enabling those) and expects
it to fail: the guard is proven red, not just green.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import harness  # noqa: E402


def main():
    env = dict(harness.UNLIMITED)
    for k in ("MOCK_CUPTI_REFUSE", "MOCK_CUPTI_FAIL"):
        if os.environ.get(k):
            env[k] = os.environ[k]
    use_trace = os.path.exists(harness.TRACE)
    with harness.Bpftrace() as bt:
        trace = harness.Trace() if use_trace else None
        r = harness.run_mockapp(["--duration=2s", "--launch-rate=400", "--graph-rate=200",
                                 "--threads=2"], env=env)
        if trace:
            trace.stop()
    bt.stop()
    failures = []
    if r.returncode != 0:
        failures.append("mock app failed: rc=%d" % r.returncode)
    s = r.summary
    pid = s["pid"]
    launched = harness.cbid_key(s["launches_by_cbid"])
    corrs = [c for c in bt.correlations if c[0] == pid]
    counts = {}
    for c in corrs:
        counts[c[2]] = counts.get(c[2], 0) + 1
    kernels_by_corr = {}
    for k in bt.kernels:
        if k[0] == pid:
            kernels_by_corr[k[1]] = kernels_by_corr.get(k[1], 0) + 1
    print("launched per cbid:  ", dict(sorted(launched.items())))
    print("bpftrace per cbid:  ", dict(sorted(counts.items())))
    for cbid in (-514, -515, 311):
        if launched.get(cbid, 0) == 0:
            failures.append("the mock app launched nothing through cbid %d" % cbid)
            continue
        n = counts.get(cbid, 0)
        if n != launched[cbid]:
            failures.append("cbid %d: %d launches, %d cuda_correlation events" %
                            (cbid, launched[cbid], n))
        ids = [c[1] for c in corrs if c[2] == cbid]
        without = [i for i in ids if kernels_by_corr.get(i, 0) == 0]
        if without:
            failures.append("cbid %d: %d of %d graph launches got no kernels" %
                            (cbid, len(without), len(ids)))
    if trace:
        tc = harness.cbid_key(trace.result["correlations_by_cbid"])
        print("parcagpu-trace per cbid:", dict(sorted(tc.items())))
        for cbid in (-514, -515):
            if tc.get(cbid, 0) != counts.get(cbid, 0):
                failures.append("consumers disagree on cbid %d: bpftrace %d, parcagpu-trace %d" %
                                (cbid, counts.get(cbid, 0), tc.get(cbid, 0)))
    total_kernels = sum(kernels_by_corr.values())
    print("kernels run: %d (graph %d), kernels delivered: %d" % (s["kernels_run"], s["graph_kernels_run"], total_kernels))
    if failures:
        for f in failures:
            print("FAIL:", f)
        return 1
    print("PASS: driver graph launches (-514, -515) announced and their kernels delivered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
