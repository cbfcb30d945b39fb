#!/usr/bin/env python3
"""Issue 31 on a GPU: are the backward kernels under the forward line that caused them? Reads a
folded file from `parcagpu-trace --folded` of tools/bench/torch_autograd_lines.py (or any script whose
forward lines carry a `# op: NodeA / NodeB` comment) and prints, by GPU time:

  * the share under a line of the script (any frame `SCRIPT:LINE ...`);
  * for each `[backward] Node` frame, the script line just outside it, and whether that line's
    `# op:` comment names the node (a backward kernel under its own forward op).

  scripts/autograd_verdict.py FOLDED SCRIPT_PATH [--min-under P]
      exits 1 when a node sits under a line that does not name it, or the share is below P
"""
import argparse
import os
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folded")
    ap.add_argument("script")
    ap.add_argument("--min-under", type=float, default=90.0)
    a = ap.parse_args()
    base = os.path.basename(a.script)
    ops = {}
    for n, text in enumerate(open(a.script), 1):
        m = re.search(r"#\s*op:\s*(.*)$", text)
        if m:
            ops[n] = {x.strip() for x in m.group(1).split("/")}
    line_re = re.compile(re.escape(base) + r":(\d+) ")
    total = under = 0
    by_link = {}
    for text in open(a.folded):
        text = text.rstrip("\n")
        if not text:
            continue
        key, value = text.rsplit(" ", 1)
        ns = int(value)
        frames = key.split(";")
        total += ns
        if any(line_re.match(f) for f in frames):
            under += ns
        for i, f in enumerate(frames):
            if f.startswith("[backward] "):
                node = f[len("[backward] "):]
                # The nearest line of the script outside the node: the forward op's line (frames
                # of torch's own Python, e.g. functional.py's layer_norm, may sit between).
                line = None
                for outer in reversed(frames[:i]):
                    m = line_re.match(outer)
                    if m:
                        line = int(m.group(1))
                        break
                k = (line, node)
                by_link[k] = by_link.get(k, 0) + ns
                break
    if total == 0:
        print("no GPU time in %s" % a.folded)
        return 1
    ok = True
    share = 100.0 * under / total
    print("GPU time %.3f s; under a line of %s: %.1f%%" % (total / 1e9, base, share))
    print("  %-10s %-32s %8s  %s" % ("line", "[backward] node", "GPU %", "verdict"))
    for (line, node), ns in sorted(by_link.items(), key=lambda kv: -kv[1]):
        if line is None:
            verdict = "NO LINE"
        elif node in ops.get(line, set()):
            verdict = "its own forward op"
        elif line in ops:
            verdict = "OTHER OP's LINE (%s)" % "/".join(sorted(ops[line]))
        else:
            verdict = "a line with no # op"
        # A node with no forward line at all (AccumulateGrad: created for a leaf, by no op) passes.
        ok &= verdict in ("its own forward op", "NO LINE")
        print("  %-10s %-32s %7.1f%%  %s" % (line, node, 100.0 * ns / total, verdict))
    if share < a.min_under:
        ok = False
    print("AUTOGRAD_VERDICT", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
