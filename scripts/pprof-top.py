#!/usr/bin/env python3
"""What `pprof -top` and `pprof -tags` print of a gzipped pprof profile, for machines without Go's
pprof: decoded with protoc from tools/trace/proto/profile.proto, the schema parcagpu-trace writes.

  scripts/pprof-top.py FILE [--sample_index=pc_samples] [--nodes=10] [--tag=stall_reason]
  scripts/pprof-top.py --mock [--duration=3s] [--readme]

--mock runs parcagpu-mockapp under parcagpu-trace --pc --pprof (the build in build/, or
PARCAGPU_BUILD_DIR) and prints the -top and -tags of its PC samples; --readme puts that output
into tools/trace/README.md between its pprof-top markers (the sample shown there). Run as root
(eBPF).

-top: one row per location's leaf (function and line, else the PC offset), flat and cum of the
chosen sample type, as pprof's -top with -nodecount. -tags: the totals per value of a label.
"""
import argparse
import collections
import io
import os
import subprocess
import sys
import tempfile
import time

from pprof_decode import decode, one

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def frame_names(p):
    """location id -> what -top shows for it: "function file:line", or "function +0xOFF"."""
    s = p["string_table"]
    functions = {one(f, "id"): f for f in p.get("function", [])}
    names = {}
    for loc in p.get("location", []):
        lines = loc.get("line", [])
        if not lines:
            names[one(loc, "id")] = "0x%x" % one(loc, "address")
            continue
        ln = lines[0]
        f = functions[one(ln, "function_id")]
        where = os.path.basename(s[one(f, "filename")])
        names[one(loc, "id")] = s[one(f, "name")] + (" %s:%d" % (where, one(ln, "line")) if one(ln, "line") else "")
    return names


def top(p, index, nodes, out):
    s = p["string_table"]
    types = [s[one(t, "type")] for t in p["sample_type"]]
    i = types.index(index)
    names = frame_names(p)
    flat, cum = collections.Counter(), collections.Counter()
    for x in p.get("sample", []):
        v = x["value"][i]
        if not v:
            continue
        locs = x.get("location_id", [])
        if locs:
            flat[names[locs[0]]] += v
        for name in {names[l] for l in locs}:
            cum[name] += v
    total = sum(flat.values())
    unit = s[one(p["sample_type"][i], "unit")]
    out.write("Type: %s (%s)\n" % (index, unit))
    shown = flat.most_common(nodes)
    out.write("Showing nodes accounting for %d, %.2f%% of %d total\n"
              % (sum(v for _, v in shown), 100.0 * sum(v for _, v in shown) / total if total else 0, total))
    out.write("      flat  flat%   sum%        cum   cum%\n")
    run = 0
    for name, v in shown:
        run += v
        out.write("%10d %5.2f%% %5.2f%% %10d %5.2f%%  %s\n"
                  % (v, 100.0 * v / total, 100.0 * run / total, cum[name], 100.0 * cum[name] / total, name))


def tags(p, index, tag, out):
    s = p["string_table"]
    types = [s[one(t, "type")] for t in p["sample_type"]]
    i = types.index(index)
    by = collections.Counter()
    for x in p.get("sample", []):
        v = x["value"][i]
        if not v:
            continue
        for lab in x.get("label", []):
            if s[one(lab, "key")] == tag:
                by[s[one(lab, "str")] if one(lab, "str") else str(one(lab, "num"))] += v
    total = sum(by.values())
    out.write(" %s: Total %d\n" % (tag, total))
    for value, v in by.most_common():
        out.write("%24d (%5.2f%%): %s\n" % (v, 100.0 * v / total, value))


def mock_profile(duration):
    """A --pc --pprof profile of the mock app, as bytes."""
    build = os.environ.get("PARCAGPU_BUILD_DIR", os.path.join(SOURCE, "build"))
    lib = os.path.join(build, "lib", "libparcagpu.so")
    tmp = tempfile.mkdtemp(prefix="parcagpu-pprof-top-")
    path = os.path.join(tmp, "pc.pb.gz")
    tool = subprocess.Popen([os.path.join(build, "bin", "parcagpu-trace"), "-l", lib, "--pc", "--pprof", path],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in tool.stderr:  # ready once attached
        if "attached" in line:
            break
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PARCAGPU_", "MOCK_"))}
    env["LD_LIBRARY_PATH"] = os.path.join(build, "mock")
    subprocess.run([os.path.join(build, "bin", "parcagpu-mockapp"), lib, "--duration=" + duration,
                    "--launch-rate=2000", "--graph-rate=200", "--threads=2"],
                   env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    time.sleep(0.5)
    tool.send_signal(2)
    tool.communicate(timeout=60)
    with open(path, "rb") as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?")
    ap.add_argument("--sample_index", default="pc_samples")
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--tag", default="stall_reason")
    ap.add_argument("--mock", action="store_true", help="profile the mock app first")
    ap.add_argument("--duration", default="3s")
    ap.add_argument("--readme", action="store_true", help="with --mock: update tools/trace/README.md")
    a = ap.parse_args()
    out = io.StringIO()
    if a.mock:
        raw = mock_profile(a.duration)
        out.write("$ scripts/pprof-top.py --sample_index=%s --nodes=%d pc.pb.gz"
                  "   # pprof -sample_index=%s -top, then -tags\n" % (a.sample_index, a.nodes, a.sample_index))
    elif a.file:
        with open(a.file, "rb") as f:
            raw = f.read()
    else:
        ap.error("a FILE or --mock")
    p = decode(raw)
    top(p, a.sample_index, a.nodes, out)
    out.write("\n")
    tags(p, a.sample_index, a.tag, out)
    sys.stdout.write(out.getvalue())
    if a.readme:
        readme = os.path.join(SOURCE, "tools", "trace", "README.md")
        text = open(readme).read()
        begin, end = text.index(BEGIN), text.index(END)
        body = "\n```\n" + out.getvalue() + "```\n"
        with open(readme, "w") as f:
            f.write(text[:begin + len(BEGIN)] + body + text[end:])


BEGIN = "<!-- pprof-top:begin (generated by scripts/pprof-top.py --mock --readme) -->"
END = "<!-- pprof-top:end -->"


if __name__ == "__main__":
    main()
