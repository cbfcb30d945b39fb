#!/usr/bin/env python3
"""The mock application under the library, observed with real eBPF: scripts/parcagpu.bt
attached system-wide to the library's USDT probes."""
import unittest

import harness


class WithBpftrace(unittest.TestCase):
    def run_scenario(self, scenario, env=None):
        with harness.Bpftrace() as bt:
            r = harness.run_mockapp(["--scenario=" + scenario], env=dict(harness.UNLIMITED,
                                                                          **(env or {})))
        bt.stop()
        self.assertEqual(r.returncode, 0, r.stderr)
        mine = [c for c in bt.correlations if c[0] == r.summary["pid"]]
        kernels = [k for k in bt.kernels if k[0] == r.summary["pid"]]
        return r, mine, kernels, bt

    def test_runtime_launch_announced_once_with_positive_cbid(self):
        r, corrs, kernels, _ = self.run_scenario("eager-runtime")
        rt = harness.signed_cbid("cudaLaunchKernel")
        self.assertEqual({c[2] for c in corrs}, {rt}, corrs)  # never cuLaunchKernel a second time
        self.assertEqual(len(corrs), harness.cbid_key(r.summary["launches_by_cbid"])[rt])
        self.assertEqual(len({c[1] for c in corrs}), len(corrs))
        self.assertTrue(all(c[3] for c in corrs), "every launch names its kernel")
        self.assertEqual(sorted(k[1] for k in kernels), sorted(c[1] for c in corrs))

    def test_driver_launch_announced_with_negative_cbid(self):
        r, corrs, kernels, _ = self.run_scenario("eager-driver")
        drv = harness.signed_cbid("cuLaunchKernel")
        self.assertEqual({c[2] for c in corrs}, {drv})
        self.assertEqual(len(corrs), harness.cbid_key(r.summary["launches_by_cbid"])[drv])
        self.assertEqual(sorted(k[1] for k in kernels), sorted(c[1] for c in corrs))

    def test_every_launch_path_is_announced_with_its_outermost_cbid(self):
        r, corrs, _, _ = self.run_scenario("all-cbids")
        seen = {}
        for c in corrs:
            seen[c[2]] = seen.get(c[2], 0) + 1
        self.assertEqual(seen, harness.cbid_key(r.summary["launches_by_cbid"]))

    def test_graph_launch_kernels_all_carry_the_launch_id(self):
        r, corrs, kernels, _ = self.run_scenario("graph-runtime,graph-driver,graph-driver-ptsz")
        cb = {c[2] for c in corrs}
        self.assertEqual(cb, {harness.signed_cbid(n) for n in
                              ("cudaGraphLaunch", "cuGraphLaunch", "cuGraphLaunch_ptsz")})
        announced = {c[1] for c in corrs}
        self.assertEqual(len(kernels), r.summary["graph_kernels_run"])
        self.assertTrue(all(k[1] in announced and k[2] != 0 for k in kernels))
        per_launch = {}
        for k in kernels:
            per_launch[k[1]] = per_launch.get(k[1], 0) + 1
        self.assertEqual(set(per_launch), announced, "a graph launch lost its kernels")

    def check_only_announced_kernels(self, mode):
        # Low rate limits: most launches are not announced, and their kernels must not show.
        with harness.Bpftrace() as bt:
            r = harness.run_mockapp(["--duration=2s", "--launch-rate=2000", "--graph-rate=200",
                                     "--threads=2"],
                                    env={"PARCAGPU_RATE_LIMIT": "20",
                                         "PARCAGPU_GRAPH_RATE_LIMIT": "5",
                                         "PARCAGPU_ACTIVITY_MODE": mode,
                                         # The script takes PC samples too, and while PC
                                         # sampling is enabled kernel activity stays on in
                                         # either mode (docs/pc-sampling.md, P12).
                                         "PARCAGPU_PC_SAMPLING": "0"})
        bt.stop()
        self.assertEqual(r.returncode, 0, r.stderr)
        pid = r.summary["pid"]
        corrs = [c for c in bt.correlations if c[0] == pid]
        kernels = [k for k in bt.kernels if k[0] == pid]
        announced = {c[1] for c in corrs}
        self.assertGreater(len(kernels), 0)
        self.assertLess(len(corrs), r.summary["eager_launches"] + r.summary["graph_launches"])
        stray = [k for k in kernels if k[1] not in announced]
        self.assertEqual(stray, [], "kernels of unannounced launches were delivered")
        # Every announced launch got its kernels.
        self.assertEqual({k[1] for k in kernels}, announced)
        # Rate limits are per thread: 2 threads x (20 + 5)/s over ~2 s plus one second's burst.
        self.assertLessEqual(len(corrs), 2 * 25 * 3 + 10)
        return r, kernels

    def test_kernels_delivered_only_for_announced_launches_activity_while_consumer(self):
        r, kernels = self.check_only_announced_kernels("consumer")
        # Activity was on throughout: unannounced launches were recorded, then filtered out.
        self.assertGreater(r.summary["records_written"], 10 * len(kernels))

    def test_kernels_delivered_only_for_announced_launches_activity_around_launches(self):
        r, kernels = self.check_only_announced_kernels("launch")
        # Activity on only around announced launches: few records beyond the delivered ones.
        self.assertLess(r.summary["records_written"], r.summary["kernels_run"] / 4)

    def test_captured_launches_are_not_executions(self):
        r, corrs, kernels, bt = self.run_scenario("capture")
        pid = r.summary["pid"]
        captures = [l for l in bt.stdout.splitlines() if l.startswith("CAPTURE pid=%d " % pid)]
        self.assertEqual(len(captures), r.summary["captured_launches"])
        self.assertGreater(len(captures), 0)
        captured_ids = {int(l.split("corr=")[1].split()[0]) for l in captures}
        self.assertFalse(captured_ids & {c[1] for c in corrs}, "a captured launch was announced")
        # The replayed graph's launches are announced and matched, nothing else.
        self.assertEqual({c[2] for c in corrs}, {harness.signed_cbid("cudaGraphLaunch")})
        self.assertEqual({k[1] for k in kernels}, {c[1] for c in corrs})
        self.assertTrue(all("node=" in l and "node=0" not in l for l in captures), captures)

    def test_conditional_body_kernels_keep_their_launch(self):
        # Two launches of one exec with a WHILE node, the exec destroyed before the flush.
        r, corrs, kernels, _ = self.run_scenario("conditional")
        self.assertEqual(len(corrs), 2)
        self.assertEqual(len(kernels), r.summary["conditional_kernels_run"])
        self.assertGreater(len(kernels), 0)
        # Every body kernel carries one of the launches' IDs (never 0), and each launch owns some.
        self.assertEqual({k[1] for k in kernels}, {c[1] for c in corrs},
                         "body kernels must carry their owning launch's ID, not 0")

    def test_graph_without_kernels_is_not_announced(self):
        r, corrs, kernels, _ = self.run_scenario("hostonly-graph")
        self.assertGreater(r.summary["graph_launches"], 0)
        self.assertEqual(corrs, [], "a host-only graph launch can never match a kernel")
        self.assertEqual(kernels, [])

    def test_metadata_and_batches_follow_the_abi(self):
        r, _, kernels, bt = self.run_scenario("eager-runtime,graph-runtime")
        # This consumer attaches pc_sample_batch: PC sampling is configured at the first launch,
        # and gpu_config then carries the sampling factor in force (the library's default). A
        # CUPTI older than 12.4 (personality 12) has no PC sampling for us: no factor, no firing.
        mine = [g for g in bt.gpu_configs if int(g["pid"]) == r.summary["pid"]]
        if harness.PERSONALITY == "12":
            self.assertEqual(mine, [], "gpu_config without PC sampling configured")
        else:
            self.assertTrue(mine, "gpu_config fires once PC sampling is configured")
            self.assertTrue(all(int(g["sampling"]) == harness.DEFAULT_SAMPLING_FACTOR for g in mine), mine)
        self.assertTrue(bt.batches)
        self.assertTrue(all(0 < n <= 128 for _, n in bt.batches))
        self.assertEqual(sum(n for p, n in bt.batches if p == r.summary["pid"]), len(kernels))


if __name__ == "__main__":
    harness.main()
