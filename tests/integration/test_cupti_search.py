#!/usr/bin/env python3
"""Where the library finds CUPTI (issue 13): the layouts real installs use, laid out in a temporary
directory with the mock's libraries, and the mock app run with --no-mock-path and an empty loader
path in a mount namespace where this machine's own CUDA is out of sight (harness.hermetic). Each
layout must be found through the place it belongs to (PARCAGPU_DEBUG says which), a CUPTI of the
wrong CUDA major must be passed over for the right one, and with nothing anywhere the library must
stay inert with one line saying where it looked. A layout counts as found only if the launches of
the run are then announced and their kernels delivered (bpftrace on the library's probes).

SHOW_SEARCH_LOG=1 prints each run's "cupti search" log lines."""
import os
import re
import shutil
import sys
import tempfile
import unittest

import harness

MOCK_CUPTI = {12: os.path.join(harness.MOCK_DIR, "libcupti.so.12"),
              13: os.path.join(harness.MOCK_DIR, "libcupti.so.13")}
SITE = "venv/lib/python3.12/site-packages"
SCENARIOS = "--scenario=eager-runtime,graph-driver"


def wheels(major, cudart, cupti):
    """A layout (a CuptiSearch.layout_* method): a CUDA `major` libcudart and libcupti at these
    paths in a venv's site-packages, the runtime loaded by the application as PyTorch loads its
    wheels'."""
    def layout(cls, root):
        rt = cls.put(harness.CUDART[major], root, SITE, cudart)
        cls.put(MOCK_CUPTI[major], root, SITE, cupti)
        return ["--cudart=" + rt], {}
    return classmethod(layout)


def search_log(run):
    return [l.split("parcagpu", 1)[1] for l in run.stderr.splitlines()
            if re.search(r"parcagpu\[\d+\]: (cupti search|cupti:|loaded )", l)]


class CuptiSearch(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="parcagpu-search-")
        cls.runs = {}
        cls.layouts = {}
        cls.bt = harness.Bpftrace()
        try:
            for name in sorted(n for n in dir(cls) if n.startswith("layout_")):
                root = os.path.join(cls.tmp, name[len("layout_"):])
                os.makedirs(root)
                args, env = getattr(cls, name)(root)
                # The layout decides which CUPTI and which runtime: not the suite's personality.
                env = dict(harness.UNLIMITED, LD_LIBRARY_PATH="", PARCAGPU_DEBUG="1",
                           MOCK_CUPTI_PERSONALITY="", MOCKAPP_CUDART="", **env)
                cls.layouts[name] = root
                cls.runs[name] = harness.run_mockapp(["--no-mock-path", SCENARIOS] + args, env=env,
                                                     isolated=True)
        finally:
            cls.bt.stop()
        if os.environ.get("SHOW_SEARCH_LOG"):
            for name, r in sorted(cls.runs.items()):
                sys.stderr.write("\n--- %s (%s)\n%s\n" % (name, cls.layouts[name],
                                                         "\n".join(search_log(r))))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @staticmethod
    def put(src, *path):
        dst = os.path.join(*path)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy2(src, dst)
        return dst

    # ---- Layouts: each returns (mock app arguments, environment) ----

    @classmethod
    def layout_toolkit_under_cuda_home(cls, root):
        # A CUDA 13 toolkit in an unusual prefix: CUPTI only in extras/CUPTI/lib64.
        cls.put(MOCK_CUPTI[13], root, "opt/nv/cuda-13.0/extras/CUPTI/lib64/libcupti.so.13")
        cls.put(harness.CUDART[13], root, "opt/nv/cuda-13.0/targets/x86_64-linux/lib/libcudart.so.13")
        return [], {"CUDA_HOME": os.path.join(root, "opt/nv/cuda-13.0")}

    # nvidia-cuda-runtime-cu12 and nvidia-cuda-cupti-cu12.
    layout_pip_cuda12 = wheels(12, "nvidia/cuda_runtime/lib/libcudart.so.12",
                               "nvidia/cuda_cupti/lib/libcupti.so.12")
    # CUDA 13 wheels keep every library in nvidia/cu13/lib.
    layout_pip_cuda13 = wheels(13, "nvidia/cu13/lib/libcudart.so.13",
                               "nvidia/cu13/lib/libcupti.so.13")
    # A CUDA 13 runtime from a wheel without CUPTI beside it; Triton's own copy in the same
    # site-packages.
    layout_triton = wheels(13, "nvidia/cu13/lib/libcudart.so.13",
                           "triton/backends/nvidia/lib/cupti/libcupti.so.13")

    @classmethod
    def layout_conda(cls, root):
        cls.put(MOCK_CUPTI[13], root, "conda/lib/libcupti.so.13")
        return [], {"CONDA_PREFIX": os.path.join(root, "conda")}

    @classmethod
    def layout_mismatch_skipped(cls, root):
        # The application runs CUDA 12. $CUDA_HOME (searched first) has a CUDA 13 CUPTI only;
        # the CUDA 12 one is in $CONDA_PREFIX, later in the order.
        rt = cls.put(harness.CUDART[12], root, "app/lib/libcudart.so.12")
        cls.put(MOCK_CUPTI[13], root, "cuda13/extras/CUPTI/lib64/libcupti.so.13")
        cls.put(MOCK_CUPTI[12], root, "conda12/lib/libcupti.so.12")
        return ["--cudart=" + rt], {"CUDA_HOME": os.path.join(root, "cuda13"),
                                    "CONDA_PREFIX": os.path.join(root, "conda12")}

    @classmethod
    def layout_mismatch_only(cls, root):
        # CUDA 12 application, and only a CUDA 13 CUPTI anywhere: used, with one error line.
        rt = cls.put(harness.CUDART[12], root, "app/lib/libcudart.so.12")
        cls.put(MOCK_CUPTI[13], root, "cuda13/extras/CUPTI/lib64/libcupti.so.13")
        return ["--cudart=" + rt], {"CUDA_HOME": os.path.join(root, "cuda13")}

    @classmethod
    def layout_already_loaded(cls, root):
        # A libcupti the application loaded itself (a profiler in it, Kineto say), from a
        # directory no rule knows; $CUDA_HOME has another one that must not be loaded.
        odd = cls.put(MOCK_CUPTI[13], root, "vendor/private/libcupti.so.13")
        cls.put(MOCK_CUPTI[13], root, "cuda/extras/CUPTI/lib64/libcupti.so.13")
        return [], {"LD_PRELOAD": odd, "CUDA_HOME": os.path.join(root, "cuda")}

    @classmethod
    def layout_nothing(cls, root):
        return [], {}

    # ---- Checks ----

    def errors(self, run):
        """The run's `error` probes as bpftrace saw them, each with its line on stderr (bpftrace
        cuts strings at 64 bytes): [(code, component, full message)]."""
        pid = run.summary["pid"]
        out = []
        for _, code, component, message in (e for e in self.bt.errors if e[0] == pid):
            lines = [l.split("%s: " % component, 1)[1] for l in run.stderr.splitlines()
                     if "parcagpu[%d]: %s: %s" % (pid, component, message) in l]
            self.assertEqual(len(lines), 1, (message, run.stderr[-3000:]))
            out.append((code, component, lines[0]))
        return out

    def found(self, layout, path, why, api_version):
        r = self.runs[layout]
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        log = "\n".join(search_log(r))
        want = os.path.join(self.layouts[layout], path)
        self.assertIn("cupti search: using %s (%s), API version %d" % (want, why, api_version),
                      log)
        s = r.summary
        self.assertTrue(s["cupti_loaded"] and s["subscribed"], log)
        self.assertEqual(s["cupti_api_version"], api_version)
        self.assertEqual(s["table_missing"], [], log)
        # Working, not just loaded: every launch announced, every kernel delivered.
        pid = s["pid"]
        corrs = [c for c in self.bt.correlations if c[0] == pid]
        kernels = [k for k in self.bt.kernels if k[0] == pid]
        self.assertEqual(len(corrs), s["launches"], log)
        self.assertEqual(len(kernels), s["kernels_run"], log)
        return r, log

    def test_toolkit_layout_under_cuda_home(self):
        r, log = self.found("layout_toolkit_under_cuda_home",
                            "opt/nv/cuda-13.0/extras/CUPTI/lib64/libcupti.so.13", "$CUDA_HOME",
                            130001)
        self.assertEqual(self.errors(r), [])

    def test_pip_cuda12_wheel_next_to_libcudart(self):
        r, log = self.found("layout_pip_cuda12", SITE + "/nvidia/cuda_cupti/lib/libcupti.so.12",
                            "pip wheel beside libcudart", 19)
        self.assertIn("CUDA 12 in use (libcudart.so.12 in ", log)

    def test_pip_cuda13_wheel_next_to_libcudart(self):
        r, log = self.found("layout_pip_cuda13", SITE + "/nvidia/cu13/lib/libcupti.so.13",
                            "next to libcudart", 130001)
        self.assertIn("CUDA 13 in use (libcudart.so.13 in ", log)
        self.assertEqual(self.errors(r), [])

    def test_triton_bundled_cupti(self):
        r, log = self.found("layout_triton", SITE + "/triton/backends/nvidia/lib/cupti/libcupti.so.13",
                            "bundled with Triton", 130001)
        self.assertEqual(self.errors(r), [])

    def test_conda_prefix(self):
        r, log = self.found("layout_conda", "conda/lib/libcupti.so.13", "$CONDA_PREFIX", 130001)
        self.assertEqual(self.errors(r), [])

    def test_mismatched_major_skipped_for_the_matching_one(self):
        r, log = self.found("layout_mismatch_skipped", "conda12/lib/libcupti.so.12",
                            "$CONDA_PREFIX", 19)
        skipped = os.path.join(self.layouts["layout_mismatch_skipped"],
                               "cuda13/extras/CUPTI/lib64/libcupti.so.13")
        self.assertIn("$CUDA_HOME: %s: CUPTI 13, skipped: CUDA 12 in use" % skipped, log)
        # The CUDA 12 CUPTI (the mock's CUDA 12.0 personality) lacks cuptiGetGraphExecId, and does
        # not know CUDA 13's launch callbacks: those are left out, which is no error.
        errs = self.errors(r)
        self.assertEqual(len(errs), 1, errs)
        self.assertIn("lacks cuptiGetGraphExecId", errs[0][2])
        self.assertIn("not subscribing __cudaLaunchKernel: new in CUDA 13", r.stderr)

    def test_mismatched_major_used_when_nothing_matches(self):
        r, log = self.found("layout_mismatch_only", "cuda13/extras/CUPTI/lib64/libcupti.so.13",
                            "$CUDA_HOME", 130001)
        errs = self.errors(r)
        self.assertEqual(len(errs), 1, errs)
        self.assertIn("CUPTI 13: no CUPTI of the CUDA the application runs was found", errs[0][2])

    def test_libcupti_already_in_the_process_is_shared(self):
        r, log = self.found("layout_already_loaded", "vendor/private/libcupti.so.13",
                            "already in the process", 130001)
        self.assertNotIn("cuda/extras/CUPTI", log)  # never got that far

    def test_nothing_found_leaves_the_library_inert_with_one_line(self):
        r = self.runs["layout_nothing"]
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        s = r.summary
        self.assertGreater(s["kernels_run"], 0)
        self.assertFalse(s["cupti_loaded"])
        errs = self.errors(r)
        self.assertEqual(len(errs), 1, errs)
        line = [l for l in r.stderr.splitlines() if errs[0][2] in l][0]
        for part in ("no usable libcupti for CUDA 13", "looked in the process",
                     "$CUDA_HOME/$CUDA_PATH/$CONDA_PREFIX (unset)", "the loader path",
                     "set PARCAGPU_CUPTI_PATH to your CUDA's libcupti.so.13", "stays inert"):
            self.assertIn(part, line)
        # The debug log names every place tried.
        log = "\n".join(search_log(r))
        self.assertIn("loader path: libcupti.so.13: not found", log)
        self.assertIn("loader path: libcupti.so: not found", log)


if __name__ == "__main__":
    harness.main()
