#!/usr/bin/env python3
"""parcagpu-trace shows the Python frames of a launch stack that passes through CPython (issue 18,
item 2): tests/programs/python_launch.py launches k_add on the mock driver through ctypes from
<module> -> outer -> middle -> inner; every kernel's GPU time must sit under a folded stack
holding those four frames ("python_launch.py:LINE function", LINE the call site each `# call:`
marker in the program names) in that order, in place of the interpreter loop's native frame,
with native frames still around them (CPython's startup above, ctypes / libffi below). Run with
each CPython 3.11+ found here (/usr/bin/python3 and pyenv's 3.11, 3.12, 3.13). With --no-python
the chain is gone (the red run)."""
import glob
import os
import re
import subprocess
import tempfile
import time
import unittest

import harness

C = harness.COUNTER  # the summary's counters, by name (tools/trace/counters.h)

PROGRAM = os.path.join(harness.SOURCE, "tests", "programs", "python_launch.py")
LAUNCHES = 100
FUNCTIONS = ["<module>", "outer", "middle", "inner"]


def call_lines():
    """function -> the line of its `# call: function` marker."""
    lines = {}
    with open(PROGRAM) as f:
        for n, text in enumerate(f, 1):
            m = re.search(r"# call: (\S+)", text)
            if m:
                lines[m.group(1)] = n
    assert sorted(lines) == sorted(FUNCTIONS), lines
    return lines


def chain():
    lines = call_lines()
    return ["python_launch.py:%d %s" % (lines[f], f) for f in FUNCTIONS]


def version_of(python):
    r = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                       capture_output=True, text=True, timeout=60)
    return r.stdout.strip() if r.returncode == 0 else None


def pythons():
    """(label, path) of each CPython 3.11+ here: the system one and pyenv's, one per version."""
    found, seen = [], set()
    candidates = ["/usr/bin/python3"] + sorted(
        glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[1-9].*/bin/python3")))
    for p in candidates:
        if not os.path.exists(p):
            continue
        v = version_of(p)
        if not v or tuple(map(int, v.split("."))) < (3, 11):
            continue
        real = os.path.realpath(p)
        if real in seen:
            continue
        seen.add(real)
        found.append(("%s (%s)" % (v, p), p))
    return found


def child_of(pid, timeout=30):
    """The first child process of `pid` (unshare --fork's), once it exists."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                kids = f.read().split()
            if kids:
                return int(kids[0])
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError("no child of %d" % pid)


def run_python_launch(python, extra_trace_args, threads=False, pid_namespace=False):
    """Runs the program under the library with parcagpu-trace -v attached; returns the tool and
    its folded stacks as (frames, value)."""
    folded = tempfile.mktemp(prefix="parcagpu-python-")
    env = harness.base_env(dict(harness.UNLIMITED, CUDA_INJECTION64_PATH=harness.LIB))
    if env.get("MOCKAPP_CUDART"):
        # Under the CUDA 12 personality the program "links" the CUDA 12 runtime, as the mock app
        # does with --cudart: the library then looks for a CUDA 12 CUPTI.
        env["LD_PRELOAD"] = env["MOCKAPP_CUDART"]
    libcuda = os.path.join(harness.MOCK_DIR, "libcuda.so.1")
    with harness.Trace(extra=["--folded", folded, "-v"] + extra_trace_args) as tr:
        # pid_namespace: as in a container, the program's thread ids are not the kernel's.
        prefix = ["unshare", "--pid", "--fork"] if pid_namespace else []
        p = subprocess.Popen(prefix + [python, PROGRAM, libcuda, str(LAUNCHES), "--wait"] +
                             (["--threads"] if threads else []), stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            # Launches before the tool knows the process runs Python carry no Python frames:
            # the program waits for this line (with --no-python it never comes: a short wait).
            known = "pid %d runs Python" % (child_of(p.pid) if pid_namespace else p.pid)
            deadline = time.time() + (30 if "--no-python" not in extra_trace_args else 1)
            while time.time() < deadline and known not in tr._read(tr.err):
                time.sleep(0.05)
            p.stdin.write("go\n")
            p.stdin.flush()
            done = p.stdout.readline()
            # The kernel records come with the library's flush (every second; later on busy
            # CPUs, past the tool's 2 s linger: 0 of 100 kernels matched at load 14): the tool is
            # stopped once it has had them all (-v prints each), or after 30 s.
            kernels = LAUNCHES * (2 if threads else 1)
            deadline = time.time() + 30
            while time.time() < deadline and tr._read(tr.err).count("] kernel corr=") < kernels:
                time.sleep(0.05)
            # The tool reads the code objects from the live process: stop it first.
            tr.stop()
        finally:
            out, err = p.communicate(timeout=60)  # closes its stdin: the program ends
    with open(folded) as f:
        lines = f.read().splitlines()
    os.unlink(folded)
    assert p.returncode == 0 and "0 failed" in done, done + out + err
    # Frames by function: the folded names carry their call sites ("main (x.c:12)").
    return tr, [([harness.frame_function(f) for f in l.rsplit(" ", 1)[0].split(";")],
                 int(l.rsplit(" ", 1)[1])) for l in lines]


def holds_chain(frames, want):
    n = len(want)
    return any(frames[i:i + n] == want for i in range(len(frames) - n + 1))


class PythonFrames(unittest.TestCase):
    def test_python_chain_in_launch_stacks(self):
        want = chain()
        found = pythons()
        self.assertTrue(found, "no CPython 3.11+ here")
        for label, python in found:
            with self.subTest(python=label):
                tr, stacks = run_python_launch(python, [])
                self.assertEqual(tr.proc.returncode, 0, tr.stderr[-4000:])
                j = tr.result
                self.assertEqual(j[C.kernels_matched], LAUNCHES, tr.stderr[-4000:])
                text = "\n".join(";".join(f) for f, _ in stacks)
                # Every launch's GPU time is under <module>;outer;middle;inner, at their lines.
                self.assertEqual(sum(v for frames, v in stacks if holds_chain(frames, want)),
                                 j[C.gpu_ns_matched], text)
                self.assertEqual(j[C.python_processes], 1)
                self.assertEqual(j[C.python_stacks], LAUNCHES)
                self.assertEqual(j[C.python_frame_read_errors], 0)
                self.assertEqual(j[C.python_merge_mismatches], 0)
                for frames, _ in stacks:
                    i = frames.index(want[0])
                    # Native frames around them: CPython's own above (its main), and below
                    # inner the ctypes call into the driver, the interpreter loop replaced.
                    self.assertTrue(any(f.startswith("Py_") for f in frames[:i]), frames)
                    self.assertIn("ffi_call", frames[i + len(want):], frames)
                    self.assertNotIn("_PyEval_EvalFrameDefault", frames, frames)
                    self.assertEqual(frames[-1], "[gpu] k_add")
                    self.assertFalse([f for f in frames if f.startswith("[python]")], frames)

    def test_python_threads(self):
        # Launches from the main thread and from a second Python thread while a third idles:
        # each launching thread's own frames, found among several thread states.
        want = chain()
        for label, python in pythons():
            with self.subTest(python=label):
                tr, stacks = run_python_launch(python, [], threads=True)
                self.assertEqual(tr.proc.returncode, 0, tr.stderr[-4000:])
                j = tr.result
                self.assertEqual(j[C.kernels_matched], 2 * LAUNCHES, tr.stderr[-4000:])
                text = "\n".join(";".join(f) for f, _ in stacks)
                main = sum(v for frames, v in stacks if holds_chain(frames, want))
                worker = sum(v for frames, v in stacks
                             if holds_chain(frames, want[1:]) and not holds_chain(frames, want)
                             and any(f.endswith(" Thread.run") for f in frames))
                self.assertGreater(main, 0, text)
                self.assertGreater(worker, 0, text)
                self.assertEqual(main + worker, j[C.gpu_ns_matched], text)
                self.assertEqual(j[C.python_stacks], 2 * LAUNCHES)

    def test_pid_namespace(self):
        # A program in a pid namespace of its own (a container's): CPython knows its threads by
        # their ids there, not by the kernel's.
        label, python = pythons()[0]
        tr, stacks = run_python_launch(python, [], pid_namespace=True)
        self.assertEqual(tr.proc.returncode, 0, tr.stderr[-4000:])
        j = tr.result
        self.assertEqual(j[C.kernels_matched], LAUNCHES, tr.stderr[-4000:])
        self.assertEqual(sum(v for frames, v in stacks if holds_chain(frames, chain())), j[C.gpu_ns_matched],
                         "\n".join(";".join(f) for f, _ in stacks))
        self.assertEqual(j[C.python_no_thread], 0)

    def test_no_python_shows_native_frames_only(self):
        # The red run: what the tool showed before (and shows with --no-python).
        label, python = pythons()[0]
        tr, stacks = run_python_launch(python, ["--no-python"])
        self.assertEqual(tr.proc.returncode, 0, tr.stderr[-4000:])
        self.assertEqual(tr.result[C.kernels_matched], LAUNCHES)
        self.assertEqual(tr.result[C.python_stacks], 0)
        self.assertTrue(stacks)
        self.assertFalse(any(holds_chain(frames, chain()) for frames, _ in stacks), stacks)
        self.assertTrue(all("_PyEval_EvalFrameDefault" in frames for frames, _ in stacks), stacks)


if __name__ == "__main__":
    unittest.main()
