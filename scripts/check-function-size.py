#!/usr/bin/env python3
"""Every function in src/ and tools/ at most MAX lines (default 60): ctest runs it
(function_size.src, function_size.tools).

Rough, by brace matching, no parser: comments, string and character literals and preprocessor
lines are blanked first; then each `{` outside a function body is judged by the text before it
(since the last `;`, `{` or `}`): a namespace, class, struct, union, enum or extern block is a
scope (searched for functions inside, e.g. inline member functions); a head with a `)` is a
function (a constructor's member-initializer braces are not); anything else (an initializer) is
skipped. A function's length is its lines from the first line of its signature to its closing
brace, both included, comments and blank lines counted (what a reader scrolls through). Lambdas
and local classes count as part of the function they are in.

The files: C, C++ and CUDA sources and headers (.c .cc .h .cu, the BPF programs' .bpf.c and
.bpf.h among them) below each folder named, in every subfolder. Generated code (the BPF
skeletons, protoc's profile.pb.*) is written to the build tree, not to these folders, and is not
checked: nobody edits it.

  scripts/check-function-size.py             # check src/ and tools/
  scripts/check-function-size.py tools       # check tools/ only
  scripts/check-function-size.py --top 20    # also list the 20 longest functions
  scripts/check-function-size.py --max 40 src/pc/pc_sampling.cc
"""
import argparse
import pathlib
import re
import sys

SCOPE_RE = re.compile(r"^(?:template\s*<[^{]*>\s*)?(?:namespace|class|struct|union|enum|extern)\b")
ACCESS_RE = re.compile(r"^\s*(?:public|private|protected)\s*$")
CTOR_INIT_RE = re.compile(r"\)\s*(?:noexcept\s*)?:(?!:)")
ATTR_RE = re.compile(r"\b(?:__attribute__|alignas|__declspec)\s*\(")
SOURCE_SUFFIXES = {".c", ".cc", ".h", ".cu"}
ROOT = pathlib.Path(__file__).resolve().parent.parent
NAME_RE = re.compile(r"((?:[A-Za-z_~][\w]*\s*::\s*)*(?:operator\s*[^\s(]+|~?[A-Za-z_]\w*))\s*$")


def strip_attributes(head):
    """The head without __attribute__((...)), alignas(...) and the like, parentheses balanced."""
    while True:
        m = ATTR_RE.search(head)
        if not m:
            return head
        depth, j = 0, m.end() - 1
        while j < len(head):
            depth += {"(": 1, ")": -1}.get(head[j], 0)
            j += 1
            if depth == 0:
                break
        head = head[:m.start()] + " " + head[j:]


def blank(text):
    """Comments, literals and preprocessor lines as spaces; newlines kept."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # A preprocessor line (with its continuations).
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append(" \n")
                    i += 2
                    continue
                out.append(" ")
                i += 1
            continue
        if c == "\n":
            out.append(c)
            line_start = True
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out.append(" ")
                i += 1
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        m = re.match(r'R"([^(\s]*)\(', text[i:i + 20]) if c == "R" else None
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 200'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else " " * (j - i))
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


def functions(path):
    """(name, first line, last line) of every function in the file."""
    text = blank(path.read_text())
    found = []
    stack = []  # 'scope', 'fn', 'init', 'other'
    head, head_pos = [], None
    line = 1
    fn_start = []

    def reset():
        nonlocal head, head_pos
        head, head_pos = [], None

    for c in text:
        if c == "\n":
            line += 1
        in_fn = any(k == "fn" for k in stack)
        if in_fn:
            if c == "{":
                stack.append("inner")
            elif c == "}":
                kind = stack.pop()
                if kind == "fn":
                    name, start = fn_start.pop()
                    found.append((name, start, line))
                    reset()
            continue
        if stack and stack[-1] == "init":
            if c == "{":
                stack.append("init")
            elif c == "}":
                stack.pop()
            head.append(c)
            continue
        if c == ";":
            reset()
            continue
        if c == "{":
            h = "".join(head).strip()
            before = "".join(head).rstrip()
            if SCOPE_RE.match(h) and ")" not in strip_attributes(h):
                stack.append("scope")
                reset()
            elif ")" in h and CTOR_INIT_RE.search(h) and before and (
                    before[-1].isalnum() or before[-1] in "_>"):
                stack.append("init")  # a member initializer's braces
                head.append(c)
            elif ")" in h:
                stripped = strip_attributes(h)
                # The name: the identifier before the first '(' left once attributes are out.
                idx = stripped.find("(")
                m = NAME_RE.search(stripped[:idx]) if idx >= 0 else None
                name = re.sub(r"\s+", "", m.group(1)) if m else "?"
                stack.append("fn")
                fn_start.append((name, head_pos if head_pos is not None else line))
            else:
                stack.append("other")
                reset()
            continue
        if c == "}":
            if stack:
                stack.pop()
            reset()
            continue
        if c == ":" and ACCESS_RE.match("".join(head)):
            reset()
            continue
        if head_pos is None and not c.isspace():
            head_pos = line
        head.append(c)
    return found


def source_files(paths, suffixes):
    """The files named and those below the folders named whose names end in one of `suffixes`;
    None (said) when a path does not exist."""
    files = []
    for p in map(pathlib.Path, paths):
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.suffix in suffixes)
        elif p.exists():
            files.append(p)
        else:
            print(f"{pathlib.Path(sys.argv[0]).stem}: no such file or folder: {p}")
            return None
    return files


def command_line(doc, options, paths_help, default_paths, suffixes):
    """The arguments of a checker whose `options` are (flag, default, help) whole numbers, and the
    files it reads: those of the paths named, else of `default_paths`. None for the files when a
    path named does not exist (said)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    for flag, default, help_text in options:
        ap.add_argument(flag, type=int, default=default, help=help_text)
    ap.add_argument("paths", nargs="*", help=paths_help)
    args = ap.parse_args()
    return args, source_files(args.paths or default_paths, suffixes)


def shown(f):
    """A file as a report names it: from the repository's root where it is below it."""
    return f.resolve().relative_to(ROOT) if f.resolve().is_relative_to(ROOT) else f


def verdict(over, heading, fine):
    """A checker's exit status, said: `heading` and the lines of `over` (1) where anything is
    over its limit, else `fine` (0)."""
    if over:
        print(heading)
        print("\n".join(over))
        return 1
    print(fine)
    return 0


def main():
    args, files = command_line(__doc__, [("--max", 60, "most lines a function may have"),
                                         ("--top", 0, "list the N longest functions too")],
                               "files and folders (default: src tools)",
                               [ROOT / "src", ROOT / "tools"], SOURCE_SUFFIXES)
    if files is None:
        return 2
    rows = []
    for f in files:
        for name, start, end in functions(f):
            rows.append((end - start + 1, f"{shown(f)}:{start}", name))
    rows.sort(key=lambda r: -r[0])
    for n, where, name in rows[:args.top]:
        print(f"{n:5d}  {where}  {name}")
    over = [f"  {where}  {name}: {n} lines" for n, where, name in rows if n > args.max]
    return verdict(over, f"check-function-size: {len(over)} of {len(rows)} functions over "
                   f"{args.max} lines:", f"check-function-size: {len(rows)} functions in "
                   f"{len(files)} files, none over {args.max} lines")


if __name__ == "__main__":
    sys.exit(main())
