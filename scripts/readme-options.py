#!/usr/bin/env python3
"""tools/trace/README.md's option block, from `parcagpu-trace --help`: the usage line and every
option as --help lists them (argp's layout, 79 columns), between the markers
<!-- trace-options:begin ... --> and <!-- trace-options:end -->. One source of truth: the options'
texts in tools/trace/options.cc.

  scripts/readme-options.py            # print the block
  scripts/readme-options.py --update   # write it into tools/trace/README.md
  scripts/readme-options.py --check    # compare with the README; a diff and exit 1 when they differ

tests/integration/test_readme_sample.py runs --check's comparison. PARCAGPU_BUILD_DIR picks the
build directory (default build/)."""
import difflib
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "tools", "trace", "README.md")
BEGIN = "<!-- trace-options:begin"
END = "<!-- trace-options:end -->"
REGENERATE = "scripts/readme-options.py --update"


def help_text():
    build = os.environ.get("PARCAGPU_BUILD_DIR", os.path.join(ROOT, "build"))
    env = {k: v for k, v in os.environ.items() if k not in ("ARGP_HELP_FMT", "COLUMNS")}
    p = subprocess.run([os.path.join(build, "bin", "parcagpu-trace"), "--help"], env=env,
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit("readme-options: parcagpu-trace --help failed (exit %d): %s" % (p.returncode, p.stderr))
    return p.stdout


def block(help_out):
    """The usage line and the option lines of --help (up to the empty line before argp's note
    after them), trailing blanks cut; argp leaves a line of blanks after a description that
    fills the width exactly, which goes too."""
    lines = help_out.split("\n")
    usage = [l for l in lines if l.startswith("Usage: ")]
    first = next(i for i, l in enumerate(lines) if l.startswith("  -") or l.startswith("      --"))
    last = next(i for i in range(first, len(lines)) if lines[i] == "")
    options = [l.rstrip() for l in lines[first:last] if l.strip()]
    return "\n".join(usage + options) + "\n"


def readme_block(text):
    start = text.index(BEGIN)
    body = text.index("```text\n", start) + len("```text\n")
    end = text.index("```\n" + END, body)
    return body, end


def main():
    want = block(help_text())
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "":
        sys.stdout.write(want)
        return 0
    with open(README) as f:
        text = f.read()
    body, end = readme_block(text)
    have = text[body:end]
    if mode == "--update":
        with open(README, "w") as f:
            f.write(text[:body] + want + text[end:])
        return 0
    if mode == "--check":
        if have == want:
            return 0
        sys.stdout.writelines(difflib.unified_diff(have.splitlines(True), want.splitlines(True),
                                                   "tools/trace/README.md", "parcagpu-trace --help"))
        print("tools/trace/README.md's option block is not what --help says: %s" % REGENERATE)
        return 1
    sys.exit("usage: scripts/readme-options.py [--update | --check]")


if __name__ == "__main__":
    sys.exit(main())
