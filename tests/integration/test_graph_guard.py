#!/usr/bin/env python3
"""The driver-graph guard (make test-pc-mock-graph) is green, and turns red when the mock CUPTI
silently refuses the driver graph cbids, as a library that forgot to subscribe them would."""
import os
import subprocess
import sys
import unittest

import harness

SCRIPT = os.path.join(harness.SOURCE, "scripts", "test-pc-mock-graph.py")


def run(extra_env):
    env = dict(os.environ, **extra_env)
    return subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, env=env,
                          timeout=300)


class GraphGuard(unittest.TestCase):
    def test_green_with_the_library_as_built(self):
        p = run({})
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("PASS", p.stdout)

    def test_red_when_driver_graph_cbids_are_refused(self):
        p = run({"MOCK_CUPTI_REFUSE": "DRIVER:514,DRIVER:515"})
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn("cbid -514", p.stdout)
        self.assertIn("cbid -515", p.stdout)


if __name__ == "__main__":
    harness.main()
