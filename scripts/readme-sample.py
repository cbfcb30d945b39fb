#!/usr/bin/env python3
"""README.md's sample output, from the demo: runs scripts/demo.sh (as `make demo` does, root and a
built tree needed) and prints its output as README.md shows it, between the markers
<!-- demo-output:begin ... --> and <!-- demo-output:end -->, with what changes from run to run
made stable:

  - what the library's random sample decides: launches announced, kernel records matched, GPU
    times, shares and kernel counts: N, T, P% (in their columns, so the table keeps its shape);
    the app's own launch and kernel counts, the frames and their lines stay as they are;
  - the temporary directory: /tmp/parcagpu-demo.XXXXXX; the checkout's path: relative to it;
  - stacks in the order of their frames (the demo ranks them by GPU time, which varies);
  - each stack's kernels: every kernel of that stack by name, from the demo's folded stacks, with
    `(...)` for the parameter list (the demo shows the top 4 by GPU time and counts the rest,
    and which are the top 4 varies).

  scripts/readme-sample.py            # print the block
  scripts/readme-sample.py --update   # write it into README.md
  scripts/readme-sample.py --check    # compare with README.md; a diff and exit 1 when they differ

tests/integration/test_readme_sample.py runs --check's comparison. PARCAGPU_BUILD_DIR picks the
build directory (default build/)."""
import difflib
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
BEGIN = "<!-- demo-output:begin"
END = "<!-- demo-output:end -->"
REGENERATE = "scripts/readme-sample.py --update"


def run_demo():
    build = os.environ.get("PARCAGPU_BUILD_DIR", os.path.join(ROOT, "build"))
    env = dict(os.environ)
    env["BUILD"] = os.path.relpath(os.path.abspath(build), ROOT)  # demo.sh: relative to the root
    for var in ("OUT", "DEMO_ARGS", "CONSUMER", "PARCAGPU_LIB", "PARCAGPU_TRACE",
                "PARCAGPU_RATE_LIMIT", "PARCAGPU_GRAPH_RATE_LIMIT"):
        env.pop(var, None)
    p = subprocess.run([os.path.join(ROOT, "scripts", "demo.sh")], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    out_dir = re.search(r"flame graph: (\S+)/gpu\.svg", p.stdout)
    if p.returncode != 0 or not out_dir:
        sys.stderr.write(p.stdout + p.stderr)
        sys.exit("readme-sample: the demo failed (exit %d)" % p.returncode)
    out_dir = out_dir.group(1)
    try:
        folded = open(os.path.join(out_dir, "gpu.folded")).read()
    finally:
        if os.path.basename(out_dir).startswith("parcagpu-demo."):
            shutil.rmtree(out_dir, ignore_errors=True)
    return p.stdout, folded


def kernels_by_stack(folded):
    """{stack frames root-first joined by ';': sorted kernel names} from the folded stacks."""
    stacks = {}
    for line in folded.splitlines():
        path, _, _ = line.rpartition(" ")
        stack, sep, kernel = path.rpartition(";[gpu] ")
        if sep:
            stacks.setdefault(stack, set()).add(kernel)
    return {s: sorted(k) for s, k in stacks.items()}


def normalize(stdout, folded):
    lines = stdout.rstrip("\n").split("\n")
    head, report, tail = [], [], []
    part = head
    for line in lines:
        if line.startswith("   GPU time by launch stack:"):
            part = report
        elif part is report and not line.startswith("     "):
            part = tail
        part.append(line)
    text = "\n".join(head)
    text = text.replace(ROOT + "/", "")
    # The app's launches and kernels are fixed by its arguments; what the library announced, and
    # so the kernel records matched, is a random sample.
    text = re.sub(r"^== announced \d+ of (\d+) launches \(eager \d+, graph \d+\)",
                  r"== announced N of \1 launches (eager N, graph N)", text, flags=re.M)
    text = re.sub(r"^== matched \d+ of \d+ kernel records", "== matched N of N kernel records", text,
                  flags=re.M)

    # The report (parcagpu-trace's, indented 3 by the demo; tools/trace/report.cc's columns): its first
    # line, then per stack a "#k" line, kernel lines, "N more kernel names", the frames from
    # column 20.
    out = [re.sub(r": .* of GPU time in \d+ kernels,", ": T of GPU time in N kernels,", report[0])]
    blocks = []
    for line in report[1:]:
        if re.match(r"     #\d+ ", line):
            blocks.append({"frames": [], "outer": []})
        elif blocks and (line[10:19].strip() == "stack" or blocks[-1]["frames"]):
            rest = line[20:]
            if rest.startswith("... "):
                blocks[-1]["outer"].append(re.sub(r"\d+", "N", rest))
            else:
                blocks[-1]["frames"].append(rest)
    folded_kernels = kernels_by_stack(folded)
    blocks.sort(key=lambda b: b["frames"])
    for k, b in enumerate(blocks, 1):
        out.append("   " + "  #%-2d %12s %6s %8s kernels" % (k, "T", "P%", "N"))
        inner = ";".join(reversed(b["frames"]))
        names = next((v for st, v in sorted(folded_kernels.items()) if st.endswith(inner)), None)
        if not names:
            sys.exit("readme-sample: no folded stack ends with %r" % inner)
        for i, name in enumerate(names):
            out.append("   " + "       %-9s %12s %8s  %s(...)" % ("kernels" if i == 0 else "", "T",
                                                                "N", name))
        for i, f in enumerate(b["frames"] + b["outer"]):
            out.append("   " + "       %-9s %s" % ("stack" if i == 0 else "", f))
    report_text = "\n".join(out)

    tail_text = "\n".join(tail)
    tail_text = re.sub(r"/tmp/parcagpu-demo\.\w+", "/tmp/parcagpu-demo.XXXXXX", tail_text)
    tail_text = re.sub(r"and \d+ of (\d+) launches were announced", r"and N of \1 launches were announced",
                       tail_text)
    return "```text\n" + "\n".join([text, report_text, tail_text]) + "\n```"


def readme_block(readme_text):
    """The text between the markers (the lines after the begin marker's line, before the end's)."""
    begin = readme_text.find(BEGIN)
    end = readme_text.find(END)
    if begin < 0 or end < begin:
        return None, None, None
    start = readme_text.index("\n", begin) + 1
    return readme_text[start:end].rstrip("\n"), start, end


def diff(readme, generated):
    return "".join(difflib.unified_diff(
        [l + "\n" for l in (readme or "").splitlines()], [l + "\n" for l in generated.splitlines()],
        "README.md (between the demo-output markers)", "scripts/readme-sample.py (the demo now)"))


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in ("", "--update", "--check"):
        sys.exit(__doc__)
    block = normalize(*run_demo())
    if not mode:
        print(block)
        return 0
    text = open(README).read()
    current, start, end = readme_block(text)
    if start is None:
        sys.exit("readme-sample: README.md has no %s ... %s markers" % (BEGIN, END))
    if mode == "--update":
        if current != block:
            open(README, "w").write(text[:start] + block + "\n" + text[end:])
            print("readme-sample: README.md updated")
        else:
            print("readme-sample: README.md already up to date")
        return 0
    if current == block:
        print("readme-sample: README.md's sample matches the demo")
        return 0
    sys.stdout.write(diff(current, block))
    print("readme-sample: README.md's sample differs from the demo; regenerate: " + REGENERATE)
    return 1


if __name__ == "__main__":
    sys.exit(main())
