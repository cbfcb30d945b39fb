#!/usr/bin/env python3
"""README.md as a first read: its sample output is what the demo prints now, and it stays short
with its two commands first.

The sample: scripts/readme-sample.py runs the demo (scripts/demo.sh, as `make demo` does) and
normalizes what changes from run to run (the library's random sample: announced launches, matched
records, GPU times and shares; the temporary directory; the order of stacks; which kernels are
the top 4); the block between README.md's demo-output markers must equal it. When it does not,
the failure shows the diff and the command that regenerates the block. The demo's consumer
attaches to the library's file, so a program using this build's library while the demo runs (a
second test run in the same build tree) adds its stacks: the other integration tests, which run
beside it, each run a copy of their own (harness.py), never the build tree's file."""
import importlib.util
import os
import re
import unittest

import harness

SCRIPT = os.path.join(harness.SOURCE, "scripts", "readme-sample.py")
README = os.path.join(harness.SOURCE, "README.md")


def readme_sample():
    spec = importlib.util.spec_from_file_location("readme_sample", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class ReadmeSample(unittest.TestCase):
    def test_sample_is_the_demo_output(self):
        rs = readme_sample()
        current, start, _ = rs.readme_block(open(README).read())
        self.assertIsNotNone(start, "README.md has no %s ... %s markers" % (rs.BEGIN, rs.END))
        block = rs.normalize(*rs.run_demo())
        if current != block:
            self.fail("README.md's sample output differs from the demo's:\n%s\nregenerate: %s"
                      % (rs.diff(current, block), rs.REGENERATE))


class TraceOptions(unittest.TestCase):
    """tools/trace/README.md's option block is `parcagpu-trace --help`'s (issue 44: it said
    --stack-bytes defaulted to 8192 long after it became 131072). scripts/readme-options.py
    makes it; the failure shows the diff and the command that regenerates it."""

    def test_option_block_is_the_help(self):
        spec = importlib.util.spec_from_file_location(
            "readme_options", os.path.join(harness.SOURCE, "scripts", "readme-options.py"))
        ro = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ro)
        text = open(ro.README).read()
        self.assertIn(ro.BEGIN, text, "tools/trace/README.md has no %s ... %s markers" % (ro.BEGIN, ro.END))
        body, end = ro.readme_block(text)
        want = ro.block(ro.help_text())
        self.assertIn("--stack-bytes=N", want)
        self.assertEqual(text[body:end], want, "tools/trace/README.md's options are not --help's: %s"
                         % ro.REGENERATE)


class ReadmeShape(unittest.TestCase):
    def test_first_read(self):
        text = open(README).read()
        lines = text.splitlines()
        self.assertLessEqual(len(lines), 300, "README.md: at most 300 lines; move detail to docs/")
        # The first commands: set up and run the demo, then every test (.ci/run runs `make test`).
        block = re.search(r"```sh\n(.*?)```", text, re.S)
        self.assertIsNotNone(block, "README.md: no sh block")
        commands = [l.split("#")[0].strip() for l in block.group(1).splitlines()]
        self.assertEqual(commands[:2], ["scripts/install-deps.sh && make demo", "make test"])
        self.assertNotIn("", commands, "README.md: the first sh block holds commands only (closed?)")


if __name__ == "__main__":
    unittest.main(verbosity=2)
