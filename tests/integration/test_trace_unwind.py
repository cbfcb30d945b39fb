#!/usr/bin/env python3
"""parcagpu-trace on code without frame pointers (issues 18, 29): the launch stack of a program
built -O2 -fomit-frame-pointer (build/bin/deep-launch, tests/programs/deep_launch.c: main ->
launch_all -> deep_a ... deep_e in libdeep-frames.so, ~36 KiB of frames -> the mock driver) is
unwound by DWARF CFI from the stack the BPF program copies, whole, to the thread's first frame, by
default: on the main thread (whose stack ends within the copy's size, so the copy must reach its
end in chunks) and on a second thread. With --stack-bytes 0 (the frame-pointer walk alone) the
chain is lost; with a copy too small for the frames (8192, the old default) the stack is cut where
the copy ends, never completed from the live process."""
import os
import subprocess
import re
import tempfile
import unittest

import harness

C = harness.COUNTER  # the summary's counters, by name (tools/trace/counters.h)

DEEP_LAUNCH = os.path.join(harness.BUILD, "bin", "deep-launch")
CHAIN = ["launch_all", "deep_a", "deep_b", "deep_c", "deep_d", "deep_e", "[gpu] k_add"]
# The outermost frame of a whole stack: the main thread's, or a thread's made by clone3/clone.
THREAD_START = {"main": ("_start",), "thread": ("clone3", "clone", "__clone3", "__clone")}
NOT_CODE = re.compile(r"^\[(heap|stack|anon|unmapped)\]|^\[.*\]\+0x")
LAUNCHES = 200
CUT = "[stack cut short]"  # the root frame of a DWARF walk that ended before the thread's start


def run_deep_launch(extra_trace_args, thread=False):
    folded = tempfile.mktemp(prefix="parcagpu-unwind-")
    env = harness.base_env(dict(harness.UNLIMITED, CUDA_INJECTION64_PATH=harness.LIB))
    if env.get("MOCKAPP_CUDART"):
        # Under the CUDA 12 personality the program "links" the CUDA 12 runtime, as the mock app
        # does with --cudart: the library then looks for a CUDA 12 CUPTI.
        env["LD_PRELOAD"] = env["MOCKAPP_CUDART"]
    with harness.Trace(extra=["--folded", folded] + extra_trace_args) as tr:
        r = subprocess.run([DEEP_LAUNCH, str(LAUNCHES)] + (["--thread"] if thread else []), capture_output=True, text=True, timeout=120, env=env)
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
    def check_whole(self, thread):
        tr, stacks = run_deep_launch([], thread=thread)
        self.assertEqual(tr.proc.returncode, 0, tr.stderr)
        j = tr.result
        self.assertEqual(j[C.kernels_matched], LAUNCHES)
        self.assertEqual(j[C.dwarf_stacks], LAUNCHES, tr.stderr)
        self.assertGreater(j[C.stack_copy_bytes], 0)
        self.assertTrue(stacks, tr.stderr)
        shown = "\n".join(";".join(f) for f, _ in stacks)
        # Every launch's GPU time is under the whole chain launch_all;deep_a;...;deep_e, on a stack
        # that begins at the thread's first frame (main's: _start; a thread's: clone3).
        self.assertEqual(sum(v for frames, v in stacks if holds_chain(frames)), j[C.gpu_ns_matched], shown)
        starts = THREAD_START["thread" if thread else "main"]
        self.assertEqual(sum(v for frames, v in stacks if frames[0] in starts), j[C.gpu_ns_matched], shown)
        if not thread:
            self.assertIn("main", stacks[0][0], shown)
        # Whole walks (ended at the frame whose CFI says it has no caller) are not marked cut.
        self.assertEqual(j[C.dwarf_stacks_cut], 0, shown)
        for frames, _ in stacks:
            for f in frames:
                self.assertIsNone(NOT_CODE.search(f), frames)
        return j

    def test_whole_stack_on_the_main_thread(self):
        # The main thread's stack ends a few KiB above main, inside the default 128 KiB copy: the
        # copy reaches that end in chunks (a whole-size read fails there) on every launch.
        j = self.check_whole(thread=False)
        self.assertEqual(j[C.stack_copies_to_stack_end], LAUNCHES)

    def test_whole_stack_on_a_thread(self):
        # A thread's stack is megabytes deep (or memory above it reads): the whole 128 KiB are read
        # at once, and the walk still ends at clone3, whose CFI says it has no caller.
        j = self.check_whole(thread=True)
        self.assertEqual(j[C.stack_copies_to_stack_end], 0)

    def test_a_short_copy_cuts_the_stack_and_invents_nothing(self):
        # 8 KiB (the default before issue 29) holds the mock driver's and the library's frames and
        # part of deep_e..deep_b's 9,000-byte frames: the walk ends where the copy ends. No frame
        # above the copy is read from the live process (another moment's stack).
        tr, stacks = run_deep_launch(["--stack-bytes", "8192"])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr)
        self.assertEqual(tr.result[C.kernels_matched], LAUNCHES)
        self.assertTrue(stacks)
        # Every walk ended where the copy ended, before the thread's start: each stack says so with
        # its root frame, so that a flame graph does not show it as a whole stack of its own.
        self.assertEqual(tr.result[C.dwarf_stacks_cut], LAUNCHES, tr.stderr)
        for frames, _ in stacks:
            self.assertEqual(frames[0], CUT, frames)
            self.assertNotIn(CUT, frames[1:], frames)
            self.assertNotIn("main", frames, frames)
            self.assertNotIn("deep_a", frames, frames)
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
