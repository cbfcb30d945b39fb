#!/usr/bin/env python3
"""parcagpu-trace on code without frame pointers (issue 18): the launch stack of a program built
-O2 -fomit-frame-pointer (build/bin/deep-launch, tests/programs/deep_launch.c: main -> deep_a ->
... -> deep_e -> the mock driver) is unwound by DWARF CFI from the stack the BPF program copies,
whole; with --stack-bytes 0 (the frame-pointer walk alone) it is not."""
import os
import subprocess
import re
import tempfile
import unittest

import harness

C = harness.COUNTER  # the summary's counters, by name (trace/counters.h)

DEEP_LAUNCH = os.path.join(harness.BUILD, "bin", "deep-launch")
CHAIN = ["main", "deep_a", "deep_b", "deep_c", "deep_d", "deep_e", "[gpu] k_add"]
NOT_CODE = re.compile(r"^\[(heap|stack|anon|unmapped)\]|^\[.*\]\+0x")
LAUNCHES = 200


def run_deep_launch(extra_trace_args):
    folded = tempfile.mktemp(prefix="parcagpu-unwind-")
    env = harness.base_env(dict(harness.UNLIMITED, CUDA_INJECTION64_PATH=harness.LIB))
    if env.get("MOCKAPP_CUDART"):
        # Under the CUDA 12 personality the program "links" the CUDA 12 runtime, as the mock app
        # does with --cudart: the library then looks for a CUDA 12 CUPTI.
        env["LD_PRELOAD"] = env["MOCKAPP_CUDART"]
    with harness.Trace(extra=["--folded", folded] + extra_trace_args) as tr:
        r = subprocess.run([DEEP_LAUNCH, str(LAUNCHES)], capture_output=True, text=True, timeout=120, env=env)
    tr.stop()
    with open(folded) as f:
        lines = f.read().splitlines()
    os.unlink(folded)
    assert r.returncode == 0, r.stdout + r.stderr
    # Frames by function: the folded names carry their call sites ("main (x.c:12)").
    return tr, [([harness.frame_function(f) for f in l.rsplit(" ", 1)[0].split(";")],
                 int(l.rsplit(" ", 1)[1])) for l in lines]


def holds_chain(frames):
    n = len(CHAIN)
    return any(frames[i:i + n] == CHAIN for i in range(len(frames) - n + 1))


class DwarfUnwinding(unittest.TestCase):
    def test_whole_chain_without_frame_pointers(self):
        tr, stacks = run_deep_launch([])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr)
        j = tr.result
        self.assertEqual(j[C.kernels_matched], LAUNCHES)
        self.assertEqual(j[C.dwarf_stacks], LAUNCHES, tr.stderr)
        self.assertGreater(j[C.stack_copy_bytes], 0)
        self.assertTrue(stacks, tr.stderr)
        # Every launch's GPU time is under the whole chain main;deep_a;...;deep_e.
        self.assertEqual(sum(v for frames, v in stacks if holds_chain(frames)), j[C.gpu_ns_matched],
                         "\n".join(";".join(f) for f, _ in stacks))
        for frames, _ in stacks:
            for f in frames:
                self.assertIsNone(NOT_CODE.search(f), frames)

    def test_frame_pointers_alone_lose_the_chain(self):
        # What the tool did before (and still does with --stack-bytes 0): the walk misses callers.
        tr, stacks = run_deep_launch(["--stack-bytes", "0"])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr)
        self.assertEqual(tr.result[C.dwarf_stacks], 0)
        self.assertTrue(stacks)
        self.assertFalse(any(holds_chain(frames) for frames, _ in stacks), stacks)
        for frames, _ in stacks:
            for f in frames:
                self.assertIsNone(NOT_CODE.search(f), frames)  # cut, never printed


if __name__ == "__main__":
    unittest.main()
