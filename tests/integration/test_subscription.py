#!/usr/bin/env python3
"""What the library asks of CUPTI, read back from the mock: exactly the subscription table, no
whole-domain enabling, teardown disables it all, and no kernel activity while nobody listens."""
import unittest

import harness


class Subscription(unittest.TestCase):
    def test_enabled_set_equals_the_table_and_teardown_clears_it(self):
        r = harness.run_mockapp(["--scenario=all-cbids"])
        self.assertEqual(r.returncode, 0, r.stderr)
        s = r.summary
        # The suite's CUPTI: CUDA 13's, or CUDA 12.0's (libcupti.so.12) under
        # MOCK_CUPTI_PERSONALITY=12, which knows no CUDA 13 launch callbacks.
        self.assertEqual(s["cupti_api_version"], 19 if harness.PERSONALITY == "12" else 130001)
        if harness.PERSONALITY == "12":
            self.assertNotIn("RUNTIME:505", s["enabled_callbacks"])
        self.assertEqual(s["table_missing"], [], "table entries the library did not enable")
        self.assertEqual(s["table_extra"], [], "API cbids enabled beyond the table")
        self.assertEqual(s["whole_domain_enables"], 0)
        self.assertIn("DRIVER:514", s["enabled_callbacks"])
        self.assertIn("DRIVER:515", s["enabled_callbacks"])
        self.assertEqual(len(r.exit_reports), 1, r.stderr[-2000:])
        self.assertEqual(r.exit_reports[0]["still_enabled"], [],
                         "teardown left callbacks enabled")

    def test_no_consumer_no_activity(self):
        r = harness.run_mockapp(["--duration=1s", "--launch-rate=2000", "--graph-rate=200"])
        self.assertEqual(r.returncode, 0, r.stderr)
        s = r.summary
        self.assertGreater(s["kernels_run"], 1000)
        self.assertFalse(s["activity_ever_enabled"])
        self.assertEqual(s["activity_enable_calls"], 0)
        self.assertEqual(s["records_written"], 0)

    def test_operator_can_leave_out_a_launch_path(self):
        r = harness.run_mockapp(["--scenario=graph-driver"],
                                env={"PARCAGPU_DISABLE_CBIDS": "DRIVER:514"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("DRIVER:514", r.summary["enabled_callbacks"])
        self.assertEqual(r.summary["table_missing"], ["DRIVER:514"])


if __name__ == "__main__":
    harness.main()
