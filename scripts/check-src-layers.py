#!/usr/bin/env python3
"""src/ is one folder per part of the library, and a folder includes only itself and the folders
below it (docs/ARCHITECTURE.md, "The parts of the library"). ctest runs it (layers.src).

  scripts/check-src-layers.py          # check; lists every include that points up or sideways

Also checked: every C/C++ file of src/ lives in one of the folders named below (a new folder is a
new line here, with what it may include), and every quoted include of the library names its folder
("pc/pc_step.h", not "pc_step.h"), so the folder a file depends on is read off the include line.
"""
import pathlib
import re
import sys

# Folder -> the folders its files may include besides itself. Bottom to top.
LAYERS = {
    "base": [],  # clocks, log, probes, configuration, the CUPTI and CUDA tables, consumers
    "trackers": ["base"],  # correlation IDs, graphs, graph completion, cubins
    "activity": ["base", "trackers"],  # kernel activity records and their switch
    "pc": ["base", "trackers"],  # PC sampling: episodes, sessions, records, publishing
    "nvtx": ["base", "trackers"],  # NVTX ranges: per-thread batches, the callbacks' decoding
    # the application's launch path, the watcher
    "launch": ["base", "trackers", "activity", "pc", "nvtx"],
    "profiler": ["base", "trackers", "activity", "pc", "nvtx", "launch"],  # wiring, entry points
}
# Headers from outside src/: the consumer contract and the two generated headers.
OUTSIDE = re.compile(r"^(parcagpu/[\w.]+|probes\.h|parcagpu_version\.h)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main():
    src = pathlib.Path(__file__).resolve().parent.parent / "src"
    bad = []
    files = sorted(p for p in src.rglob("*") if p.suffix in (".h", ".cc", ".c"))
    for f in files:
        rel = f.relative_to(src)
        folder = rel.parts[0] if len(rel.parts) == 2 else None
        if folder not in LAYERS:
            bad.append(f"src/{rel}: not in one of the folders {', '.join(LAYERS)}")
            continue
        allowed = {folder, *LAYERS[folder]}
        for n, line in enumerate(f.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or OUTSIDE.match(m.group(1)):
                continue
            target = m.group(1).split("/")
            if len(target) != 2 or not (src / m.group(1)).is_file():
                bad.append(f"src/{rel}:{n}: \"{m.group(1)}\" is not a file of src/<folder>/")
            elif target[0] not in allowed:
                bad.append(f"src/{rel}:{n}: {folder}/ includes {target[0]}/ "
                           f"(may include {', '.join(sorted(allowed))})")
    if bad:
        print(f"check-src-layers: {len(bad)} includes break the layering:")
        print("\n".join(f"  {b}" for b in bad))
        return 1
    print(f"check-src-layers: {len(files)} files in {len(LAYERS)} folders, "
          "each including only its own folder and those below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
