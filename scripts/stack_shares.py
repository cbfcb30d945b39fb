#!/usr/bin/env python3
"""Where the launch stacks of a profile end, by GPU time (issue 29): read a folded file from
`parcagpu-trace --folded` (root frame first, the value GPU ns) and the name of the user's script,
and print the share of GPU time

  under a line of the script   a frame `SCRIPT:LINE ...` (a Python frame of the script)
  whole, no line of the script the stack begins at a thread's first frame: its DWARF walk ended
                               at the frame whose CFI says it has no caller (_start, clone3, even
                               where a stripped libc names it only libc.so.6+0x...)
  cut                          it holds parcagpu-trace's `[stack cut short]` frame (the walk ended
                               before the thread's start: the copy ran out inside a library)

--by-root-name reads folded files of a parcagpu-trace without that frame (before issue 29)
by the outermost frame's name instead: whole where it is _start, clone3 or start_thread, else cut.

with the outermost frames of the cut stacks, and `STACKS_COMPLETE P%` (the first two rows).

  scripts/stack_shares.py FOLDED SCRIPT [--min-complete P]
      exits 1 when --min-complete is given and the complete share is below it
"""
import argparse
import re
import sys

THREAD_START = {"_start", "clone3", "clone", "__clone3", "__clone", "start_thread"}
CUT = "[stack cut short]"


def function(frame):
    """A folded frame's function: `f (file:line)` -> f; Python frames `x.py:12 f` stay whole."""
    return re.sub(r" \([^()]*:\d+\)( \[inlined\])?$", "", frame)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folded")
    ap.add_argument("script")
    ap.add_argument("--min-complete", type=float)
    ap.add_argument("--by-root-name", action="store_true")
    a = ap.parse_args()
    line_re = re.compile(re.escape(a.script) + r":\d+")
    under = whole = cut = 0
    cut_roots = {}
    stacks = 0
    lines = [l.rstrip("\n") for l in open(a.folded)]
    marked = not a.by_root_name
    for text in lines:
        if not text:
            continue
        key, value = text.rsplit(" ", 1)
        ns = int(value)
        frames = key.split(";")
        stacks += 1
        root = function(frames[0])
        if any(line_re.match(f) for f in frames):
            under += ns
        elif (CUT not in frames) if marked else (root in THREAD_START):
            whole += ns
        else:
            cut += ns
            cut_roots[root] = cut_roots.get(root, 0) + ns
    total = under + whole + cut
    if total == 0:
        print("no GPU time in %s" % a.folded)
        return 1
    pct = lambda v: 100.0 * v / total
    print("%d stacks, %.3f s of GPU time" % (stacks, total / 1e9))
    print("  %-44s %6.1f%%" % ("under a line of " + a.script, pct(under)))
    print("  %-44s %6.1f%%" % ("whole, no line of the script", pct(whole)))
    print("  %-44s %6.1f%%" % ("cut (does not begin at a thread's start)", pct(cut)))
    for root, ns in sorted(cut_roots.items(), key=lambda kv: -kv[1])[:8]:
        print("      begins at %-60s %6.1f%%" % (root[:60], pct(ns)))
    complete = pct(under + whole)
    print("STACKS_COMPLETE %.1f%%" % complete)
    if a.min_complete is not None and complete < a.min_complete:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
