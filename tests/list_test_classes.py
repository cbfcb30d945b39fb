#!/usr/bin/env python3
"""The TestCase classes of an integration test file that hold tests (their own or inherited from
classes of the same file), one name a line, in the file's order: tests/CMakeLists.txt registers
each as a ctest test of its own (`python3 FILE CLASS`), so that ctest -j spreads a long file's
classes over the machine. Read from the source (ast), not imported: importing a test file runs
harness.py, which needs a built tree.
  list_test_classes.py tests/integration/test_x.py"""
import ast
import sys


def base_names(cls):
    for b in cls.bases:
        if isinstance(b, ast.Name):
            yield b.id
        elif isinstance(b, ast.Attribute):
            yield b.attr


def main(path):
    tree = ast.parse(open(path).read(), path)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}

    def is_test_case(name):
        cls = classes.get(name)
        return name == "TestCase" if cls is None else any(is_test_case(b) for b in base_names(cls))

    def has_tests(name):
        cls = classes.get(name)
        if cls is None:
            return False
        return (any(isinstance(n, ast.FunctionDef) and n.name.startswith("test") for n in cls.body)
                or any(has_tests(b) for b in base_names(cls)))

    for name in classes:
        if is_test_case(name) and has_tests(name):
            print(name)


if __name__ == "__main__":
    main(sys.argv[1])
