#!/usr/bin/env python3
"""The library's .note.stapsdt against the probe ABI (include/parcagpu/abi.h): every probe of
provider parcagpu is there, with a semaphore, the documented argument count, sizes and
signedness, and operands a USDT argument parser can read. Also: nothing links libcupti or
libcuda, and only the two injection entry points and the marker are exported."""
import os
import re
import subprocess
import unittest

import harness


def abi_probes():
    """The probe list (include/parcagpu/probe_list.h, which abi.h's kProbes is generated from):
    X(name, (parameters), (arguments), count, (sizes))."""
    text = open(os.path.join(harness.SOURCE, "include", "parcagpu", "probe_list.h")).read()
    text = text.replace("\\\n", " ")
    probes = {}
    for name, n, sizes in re.findall(r"X\((\w+),\s*\([^)]*\),\s*\([^)]*\),\s*(\d+),\s*\(([-\d,\s]+)\)\)",
                                     text):
        probes[name] = [int(s) for s in sizes.split(",")]
        assert len(probes[name]) == int(n)
    return probes


def notes(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True,
                         check=True).stdout
    found = {}
    for block in re.split(r"\n\s*stapsdt\s+", out)[1:]:
        prov = re.search(r"Provider: (\S+)", block)[1]
        name = re.search(r"Name: (\S+)", block)[1]
        sem = int(re.search(r"Semaphore: (0x[0-9a-f]+)", block)[1], 16)
        args = re.search(r"Arguments: ?(.*)", block)[1].split()
        if prov == "parcagpu":
            found.setdefault(name, []).append((sem, args))
    return found


class ProbeNotes(unittest.TestCase):
    def setUp(self):
        self.notes = notes(harness.LIB)
        self.abi = abi_probes()

    def test_every_abi_probe_is_present_with_a_semaphore(self):
        self.assertGreaterEqual(len(self.abi), 9)
        for name in self.abi:
            self.assertIn(name, self.notes, "probe %s missing from the library" % name)
            for sem, _ in self.notes[name]:
                self.assertNotEqual(sem, 0, "probe %s has no semaphore" % name)

    def test_every_probe_has_exactly_one_site(self):
        # The production agent attaches only the last note of each probe name: whatever fires
        # at any other site never reaches it (docs/probe-abi.md, "How the agent attaches").
        multi = {name: [a for _, a in sites] for name, sites in self.notes.items()
                 if len(sites) != 1}
        self.assertEqual(multi, {}, "probes with more than one site")

    def test_no_probe_outside_the_abi(self):
        self.assertEqual(set(self.notes) - set(self.abi), set())

    def test_argument_sizes_and_signedness_match_the_abi(self):
        for name, sites in self.notes.items():
            for _, args in sites:
                sizes = [int(a.split("@", 1)[0]) for a in args]
                self.assertEqual(sizes, self.abi[name], "%s: %s" % (name, " ".join(args)))

    def test_operands_are_readable_by_usdt_parsers(self):
        # libbpf and bpftrace cannot read segment-relative (TLS) operands.
        for name, sites in self.notes.items():
            for _, args in sites:
                for a in args:
                    self.assertNotRegex(a, r"%[fg]s:", "%s has a TLS operand %s" % (name, a))

    def test_no_build_time_cuda_dependency_and_three_exports(self):
        dyn = subprocess.run(["readelf", "-d", harness.LIB], capture_output=True, text=True,
                             check=True).stdout
        needed = re.findall(r"\(NEEDED\).*\[(.*)\]", dyn)
        self.assertFalse([n for n in needed if "cupti" in n or "libcuda" in n], needed)
        syms = subprocess.run(["nm", "-D", "--defined-only", harness.LIB], capture_output=True,
                              text=True, check=True).stdout.split("\n")
        exported = sorted(l.split()[-1] for l in syms if l.strip())
        # The entry points (CUDA's and NVTX's), and the marker by which copies of the library
        # find each other (src/base/process_guard.cc).
        self.assertEqual(exported, ["InitializeInjection", "InitializeInjectionNvtx2",
                                    "parcagpu_instance_marker_v1"])


if __name__ == "__main__":
    harness.main()
