#!/usr/bin/env python3
"""A bad CUPTI file is refused, never mapped into a crash (issue 30). A libcupti cut short (a
half-copied file on a shared mount) maps without error and faults (SIGBUS) when the loader
touches its missing pages, inside dlopen, inside cuInit: the application died with exit 135 and
nothing printed. The library now reads each candidate's ELF header and program headers with
pread before dlopen (src/base/elf_check.h) and refuses a file that does not hold what they name.

Copies of the mock libcupti cut at 64 B, 4 KiB, 8 KiB, 64 KiB, 1 MB and at the end of its last
loadable segment: each given as PARCAGPU_CUPTI_PATH must leave the application running to a clean
exit with exactly one line saying why the file was refused (and the `error` probe fired); the
whole copy must trace as usual. In the search (no PARCAGPU_CUPTI_PATH), a cut copy is passed over
for a whole one further on, and with nothing else the not-found line names it."""
import os
import shutil
import struct
import tempfile
import unittest

import harness

# The mock CUPTI of the suite's personality (integration12.*: the CUDA 12 one).
MOCK_CUPTI = os.path.join(harness.MOCK_DIR, "libcupti.so.12" if harness.PERSONALITY == "12"
                          else "libcupti.so.13")
SCENARIOS = "--scenario=eager-runtime,graph-driver"


def last_segment_end(path):
    """The end in the file of its last PT_LOAD segment (p_offset + p_filesz), from the ELF64
    program headers."""
    with open(path, "rb") as f:
        eh = f.read(64)
        assert eh[:4] == b"\x7fELF" and eh[4] == 2, "not a 64-bit ELF file"
        phoff, = struct.unpack_from("<Q", eh, 32)
        phentsize, phnum = struct.unpack_from("<HH", eh, 54)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
    end = 0
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", ph, i * phentsize)
        if p_type == 1:  # PT_LOAD
            end = max(end, p_offset + p_filesz)
    return end


class CuptiFile(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="parcagpu-cupti-file-")
        with open(MOCK_CUPTI, "rb") as f:
            cls.whole = f.read()
        size = len(cls.whole)
        cuts = {"64B": 64, "4KiB": 4096, "8KiB": 8192, "64KiB": 65536}
        if size > 1000000:
            cuts["1MB"] = 1000000
        cuts["last-segment-end"] = last_segment_end(MOCK_CUPTI)
        assert all(n < size for n in cuts.values()), (cuts, size)
        cls.cuts = {name: (n, cls.put(cls.whole[:n], name, os.path.basename(MOCK_CUPTI)))
                    for name, n in cuts.items()}

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def put(cls, data, *path):
        dst = os.path.join(cls.tmp, *path)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "wb") as f:
            f.write(data)
        return dst

    def test_cut_copies_are_refused_with_one_line(self):
        with harness.Bpftrace() as bt:
            runs = {name: harness.run_mockapp([SCENARIOS],
                                              env=dict(harness.UNLIMITED,
                                                       PARCAGPU_CUPTI_PATH=path))
                    for name, (_, path) in self.cuts.items()}
            bt.drain()
        bt.stop()
        for name, r in runs.items():
            n, path = self.cuts[name]
            with self.subTest(cut=name, size=n):
                self.assertEqual(r.returncode, 0, r.stderr[-3000:])
                s = r.summary
                self.assertGreater(s["kernels_run"], 0)
                self.assertFalse(s["cupti_loaded"])  # refused before dlopen
                errs = r.parcagpu_errors()
                self.assertEqual(len(errs), 1, errs)
                self.assertIn("cupti: cannot use PARCAGPU_CUPTI_PATH=%s: truncated: %d bytes, "
                              "its " % (path, n), errs[0])
                self.assertIn("stays inert", errs[0])
                self.assertEqual([e[1:3] for e in bt.errors if e[0] == s["pid"]],
                                 [(-2, "cupti")], "the error probe carried the refusal")
        # Where each was cut decides what is missing.
        self.assertIn("its program headers need", runs["64B"].parcagpu_errors()[0])
        for name in ("4KiB", "8KiB", "64KiB"):
            self.assertIn("its segments need %d" % self.cuts["last-segment-end"][0],
                          runs[name].parcagpu_errors()[0])
        # Segments whole, the section header table (the file's last bytes) missing.
        self.assertIn("its section headers need %d" % len(self.whole),
                      runs["last-segment-end"].parcagpu_errors()[0])

    def test_whole_copy_traces(self):
        path = self.put(self.whole, "whole", os.path.basename(MOCK_CUPTI))
        with harness.Bpftrace() as bt:
            r = harness.run_mockapp([SCENARIOS], env=dict(harness.UNLIMITED,
                                                          PARCAGPU_CUPTI_PATH=path))
            bt.drain()
        bt.stop()
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        # (CUPTI 12 lacks an optional entry point, and says so: not a refusal.)
        self.assertEqual([l for l in r.parcagpu_errors() if " lacks " not in l], [])
        s = r.summary
        self.assertTrue(s["cupti_loaded"] and s["subscribed"])
        pid = s["pid"]
        self.assertEqual(len([c for c in bt.correlations if c[0] == pid]), s["launches"])
        self.assertEqual(len([k for k in bt.kernels if k[0] == pid]), s["kernels_run"])

    def search(self, layout_env):
        """The mock app in the search (no PARCAGPU_CUPTI_PATH, nothing of this machine's CUDA in
        sight), as test_cupti_search runs it."""
        env = dict(harness.UNLIMITED, LD_LIBRARY_PATH="", PARCAGPU_DEBUG="1")
        env.update(layout_env)
        return harness.run_mockapp(["--no-mock-path", SCENARIOS], env=env, isolated=True)

    def test_cut_copy_in_the_search_is_passed_over(self):
        name = os.path.basename(MOCK_CUPTI)
        cut = self.put(self.whole[:8192], "search", "cuda/extras/CUPTI/lib64", name)
        good = self.put(self.whole, "search", "conda/lib", name)
        r = self.search({"CUDA_HOME": os.path.join(self.tmp, "search", "cuda"),
                         "CONDA_PREFIX": os.path.join(self.tmp, "search", "conda")})
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertIn("$CUDA_HOME: %s: truncated: 8192 bytes, its segments need" % cut, r.stderr)
        self.assertIn("cupti search: using %s ($CONDA_PREFIX)" % good, r.stderr)
        self.assertTrue(r.summary["cupti_loaded"])

    def test_cut_copies_alone_in_the_search_are_named(self):
        name = os.path.basename(MOCK_CUPTI)
        home = self.put(self.whole[:4096], "alone", "cuda/extras/CUPTI/lib64", name)
        on_path = self.put(self.whole[:65536], "alone", "ldpath", name)
        r = self.search({"CUDA_HOME": os.path.join(self.tmp, "alone", "cuda"),
                         "LD_LIBRARY_PATH": os.path.dirname(on_path)})
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertFalse(r.summary["cupti_loaded"])
        self.assertGreater(r.summary["kernels_run"], 0)
        # The loader path's copy is checked too, never handed to dlopen.
        self.assertIn("loader path: %s = %s: truncated: 65536 bytes" % (name, on_path), r.stderr)
        errs = [l for l in r.parcagpu_errors() if "no usable libcupti" in l]
        self.assertEqual(len(errs), 1, r.stderr[-3000:])
        self.assertIn("(%s: truncated: 4096 bytes, its segments need" % home, errs[0])
        self.assertIn("stays inert", errs[0])


if __name__ == "__main__":
    harness.main()
