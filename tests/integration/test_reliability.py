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


class SecondCopy(unittest.TestCase):
    """Two copies of the library in one process: the first to start profiles, the other changes
    nothing. CUPTI takes one subscriber and one pair of buffer callbacks."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="parcagpu-copy-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def copy_of_lib(self, name):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        shutil.copy(harness.LIB, path)
        return path

    def check_first_copy_profiles(self, preloaded):
        # `preloaded` starts from its constructor; build/lib/libparcagpu.so comes later as
        # CUDA_INJECTION64_PATH, loaded by cuInit.
        with harness.Trace(lib=preloaded) as tr:
            r = harness.run_mockapp(
                ["--preload", "--no-inject", "--scenario=eager-runtime,graph-driver,conditional"],
                lib=preloaded, env=dict(harness.UNLIMITED, CUDA_INJECTION64_PATH=harness.LIB))
        tr.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        s = r.summary
        j = tr.result
        # Every kernel reached the consumer of the copy that profiles.
        self.assertEqual(j["kernel_records"], s["kernels_run"], (j, r.stderr[-3000:]))
        self.assertEqual(j["kernels_matched"], j["kernel_records"], j)
        self.assertEqual(j["orphan_correlations_eager"] + j["orphan_correlations_graph"], 0, j)
        # The other copy said so once, and subscribed to nothing.
        lines = [l for l in parcagpu_lines(r) if "another copy of parcagpu" in l]
        self.assertEqual(len(lines), 1, r.parcagpu_errors())
        self.assertIn(preloaded, lines[0])
        self.assertEqual(r.exit_reports[0]["stats"]["subscribe_calls"], 1)

    def test_copy_with_another_name(self):
        self.check_first_copy_profiles(self.copy_of_lib("libother-name.so"))

    def test_copy_with_the_same_file_name(self):
        self.check_first_copy_profiles(self.copy_of_lib("sub/libparcagpu.so"))


if __name__ == "__main__":
    harness.main()
