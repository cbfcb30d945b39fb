#!/usr/bin/env python3
"""What the library asks of CUPTI, read back from the mock: exactly the subscription table (its
from-start half at once, its launch half only while a consumer listens), no whole-domain
enabling, teardown disables it all, and no kernel activity while nobody listens."""
import unittest

import harness


class Subscription(unittest.TestCase):
    def test_enabled_set_equals_the_table_and_teardown_clears_it(self):
        # With a consumer, every entry of the table is enabled at some point (launch entries in
        # sampling windows), nothing beyond it, and teardown leaves nothing enabled.
        with harness.Trace() as tr:
            r = harness.run_mockapp(["--scenario=all-cbids"])
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr)
        s = r.summary
        # The suite's CUPTI: CUDA 13's, or CUDA 12.0's (libcupti.so.12) under
        # MOCK_CUPTI_PERSONALITY=12, which knows no CUDA 13 launch callbacks.
        self.assertEqual(s["cupti_api_version"], 19 if harness.PERSONALITY == "12" else 130001)
        if harness.PERSONALITY == "12":
            self.assertNotIn("RUNTIME:505", r.exit_reports[0]["ever_enabled"])
        self.assertEqual(s["table_never_enabled"], [], "table entries the library never enabled")
        self.assertEqual(s["from_start_missing"], [])
        self.assertEqual(s["table_extra"], [], "API cbids enabled beyond the table")
        self.assertEqual(s["whole_domain_enables"], 0)
        self.assertEqual(len(r.exit_reports), 1, r.stderr[-2000:])
        self.assertEqual(r.exit_reports[0]["still_enabled"], [],
                         "teardown left callbacks enabled")

    def test_without_consumer_only_the_from_start_half_is_ever_enabled(self):
        # Lazy subscription: no launch callback is ever enabled, so no launch reaches the library.
        r = harness.run_mockapp(["--scenario=all-cbids"])
        self.assertEqual(r.returncode, 0, r.stderr)
        s = r.summary
        self.assertEqual(s["from_start_missing"], [])
        self.assertIn("RESOURCE:13", s["enabled_callbacks"])
        self.assertEqual(s["launch_enabled_now"], [])
        never = set(s["table_never_enabled"])
        self.assertIn("DRIVER:514", never)
        self.assertIn("RUNTIME:211", never)
        self.assertEqual(len(never), len(s["table_missing"]))
        self.assertEqual(r.exit_reports[0]["ever_enabled"], s["enabled_callbacks"])
        self.assertEqual(r.exit_reports[0]["still_enabled"], [])

    def test_no_consumer_no_activity(self):
        r = harness.run_mockapp(["--duration=1s", "--launch-rate=2000", "--graph-rate=200"])
        self.assertEqual(r.returncode, 0, r.stderr)
        s = r.summary
        self.assertGreater(s["kernels_run"], 1000)
        self.assertFalse(s["activity_ever_enabled"])
        self.assertEqual(s["activity_enable_calls"], 0)
        self.assertEqual(s["records_written"], 0)

    def test_operator_can_leave_out_a_launch_path(self):
        with harness.Trace() as tr:
            r = harness.run_mockapp(["--scenario=all-cbids"],
                                    env={"PARCAGPU_DISABLE_CBIDS": "DRIVER:514"})
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr)
        # Every entry enabled at some point while the consumer listened, but that one.
        self.assertEqual(r.summary["table_never_enabled"], ["DRIVER:514"])
        self.assertNotIn("DRIVER:514", r.exit_reports[0]["ever_enabled"])


if __name__ == "__main__":
    harness.main()
