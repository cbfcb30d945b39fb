#!/usr/bin/env python3
"""No src/ file over MAX_LINES lines (default 450) and no class, struct or union over MAX_MEMBERS
members (default 30): ctest runs it (sizes.src) on the folders that meet it.

A member is a data member or a member function, declared or defined in the class body (static
ones too); not counted: nested types (each is judged as a class of its own), using-declarations,
friends, static_asserts, typedefs and deleted functions. `int a, b;` is two members. Rough, by
brace matching on the text blanked as scripts/check-function-size.py blanks it, no parser.

  scripts/check-src-size.py                          # every file of src/
  scripts/check-src-size.py src/launch src/base      # folders or files
  scripts/check-src-size.py --max-lines 400 --max-members 25 src/trackers
"""
import argparse
import importlib.util
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fsize", ROOT / "scripts" / "check-function-size.py")
fsize = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fsize)

TYPE_RE = re.compile(r"^(?:template\s*<[^{]*>\s*)?(class|struct|union|enum)\b")
SCOPE_RE = re.compile(r"^(?:namespace|extern)\b")
NAME_RE = re.compile(r"^(?:template\s*<[^{]*>\s*)?(?:class|struct|union)\s+(\w+)")
NOT_MEMBER_RE = re.compile(r"^(?:using|friend|static_assert|typedef|template\s*<[^;]*>\s*friend)\b")
TYPE_DECL_RE = re.compile(r"^(?:class|struct|union|enum)\b[^(=]*$")  # struct Foo; (a declaration)


def top_level_commas(text):
    depth = 0
    commas = 0
    for c in text:
        if c in "([{<":
            depth += 1
        elif c in ")]}>":
            depth -= 1
        elif c == "," and depth == 0:
            commas += 1
    return commas


def declaration_members(head):
    """Members a `;`-ended declaration in a class body declares."""
    h = fsize.strip_attributes(" ".join(head.split()))
    if not h or NOT_MEMBER_RE.match(h) or TYPE_DECL_RE.match(h):
        return 0
    if re.search(r"=\s*delete\s*$", h):
        return 0
    if "(" in h.split("=", 1)[0]:
        return 1  # a member function (or a data member of function type)
    return 1 + top_level_commas(h.split("=", 1)[0])


def classes(path):
    """(name, first line, members) of every class, struct and union in the file."""
    text = fsize.blank(path.read_text())
    found = []
    # Frames: ['scope'], ['class', name, line, members], ['skip'], ['init'].
    stack = [["scope"]]
    head = []
    line = 1
    for c in text:
        if c == "\n":
            line += 1
        top = stack[-1]
        if top[0] == "skip":
            if c == "{":
                stack.append(["skip"])
            elif c == "}":
                stack.pop()
                if stack[-1][0] == "class":
                    head = []  # a member function's body ends its declaration
            continue
        if top[0] == "init":
            head.append(c)
            if c == "{":
                stack.append(["init"])
            elif c == "}":
                stack.pop()
            continue
        in_class = top[0] == "class"
        if c == ";":
            if in_class:
                top[3] += declaration_members("".join(head))
            head = []
            continue
        if c == ":" and fsize.ACCESS_RE.match("".join(head)):
            head = []
            continue
        if c == "}":
            frame = stack.pop() if len(stack) > 1 else stack[0]
            if frame[0] == "class":
                found.append((frame[1], frame[2], frame[3]))
            head = []
            continue
        if c != "{":
            head.append(c)
            continue
        h = " ".join("".join(head).split())
        stripped = fsize.strip_attributes(h).strip()
        m = TYPE_RE.match(stripped)
        if m and ")" not in stripped:
            if m.group(1) == "enum":
                stack.append(["skip"])
            else:
                n = NAME_RE.match(stripped)
                stack.append(["class", n.group(1) if n else "(anonymous)", line, 0])
            head = []
        elif SCOPE_RE.match(stripped):
            stack.append(["scope"])
            head = []
        elif ")" in stripped and fsize.CTOR_INIT_RE.search(stripped) and h and (
                h[-1].isalnum() or h[-1] in "_>"):
            stack.append(["init"])  # a member initializer's braces: the head goes on
            head.append(c)
        elif ")" in stripped:
            if in_class:
                top[3] += 1  # a member function defined in the body
            stack.append(["skip"])
            head = []
        elif in_class:
            stack.append(["init"])  # a data member's braced initializer
            head.append(c)
        else:
            stack.append(["skip"])  # an initializer or body outside any class
            head = []
    return found


def main():
    args, files = fsize.command_line(
        __doc__, [("--max-lines", 450, "most lines a file may have"),
                  ("--max-members", 30, "most members a class may have")],
        "folders or files (default: src/)", [ROOT / "src"], (".cc", ".h"))
    if files is None:
        return 2
    over = []
    n_classes = 0
    for f in files:
        rel = fsize.shown(f)
        lines = f.read_text().count("\n")
        if lines > args.max_lines:
            over.append(f"  {rel}: {lines} lines (at most {args.max_lines})")
        for name, start, members in classes(f):
            n_classes += 1
            if members > args.max_members:
                over.append(f"  {rel}:{start}  {name}: {members} members (at most "
                            f"{args.max_members})")
    return fsize.verdict(over, f"check-src-size: {len(over)} over the limits in {len(files)} files:",
                         f"check-src-size: {len(files)} files, {n_classes} classes: no file over "
                         f"{args.max_lines} lines, no class over {args.max_members} members")


if __name__ == "__main__":
    sys.exit(main())
