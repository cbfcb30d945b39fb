#!/usr/bin/env python3
"""Reliability under forks, load and a second copy of the library: no hang, no silent loss, no
change of behaviour. Faults come from the mock (MOCK_CUPTI_FAIL, MOCK_CUDA_FAIL), never from the
library."""
import os
import shutil
import tempfile
import unittest

import harness


def parcagpu_lines(r, pid=None):
    """The library's stderr lines (of `pid` only, if given)."""
    lines = r.parcagpu_errors()
    if pid is not None:
        lines = [l for l in lines if "parcagpu[%d]:" % pid in l]
    return lines


class Fork(unittest.TestCase):
    def test_children_forked_under_load_exit_promptly(self):
        # Children forked while 16 threads launch with a consumer attached: whatever lock another
        # thread held at the fork stays held in the child, and the child's exit() must not wait
        # for it (nor for a thread that does not exist in the child).
        with harness.Trace() as tr:
            r = harness.run_mockapp(["--threads=16", "--stress", "--duration=4s",
                                     "--fork-children=20"], env=harness.UNLIMITED, timeout=300)
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        s = r.summary
        self.assertEqual(s["fork_children"], 20)
        self.assertEqual(s["fork_children_hung"], 0, r.stderr[-3000:])
        # The parent still delivered its kernels to the consumer.
        self.assertGreater(tr.result["kernels_matched"], 0, tr.result)


if __name__ == "__main__":
    harness.main()
