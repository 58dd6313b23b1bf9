#!/usr/bin/env python3
"""The library's layers, checked on its includes:

    check_layers.py <repo root>            check (exit 1 naming each new wrong-way include)
    check_layers.py <repo root> --update   rewrite the list of known exceptions

A file of the library (src/, algorithms/, transports/) may include files of its own
layer and of the layers below it, never of a layer above. The layers, lowest first,
are LAYERS below (docs/architecture.md draws the same picture). The includes that break
the rule today are listed in tests/docs/layer_exceptions.txt, one "file -> include" a
line: the list may only shrink. An include that breaks the rule and is not listed fails
the check; a listed one that no longer exists fails it too (take it off the list, with
--update), so the list always tells how far the house still leans.
"""
import os
import re
import sys

LAYERS = [
    ("base", ["include", "src/config", "src/os"]),
    ("plans and services", ["src/reduce", "src/topo", "src/net", "src/bootstrap", "algorithms"]),
    ("exec core", ["src/exec", "src/diag"]),
    ("run", ["src/device", "src/rma", "transports"]),
    ("api and communicator", ["src/core"]),
    ("tools", ["src/tools"]),
]
SCANNED = ("src", "algorithms", "transports")
EXCEPTIONS = os.path.join("tests", "docs", "layer_exceptions.txt")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """(index, folder) of the layer holding path, or None (not a library path)."""
    best = None
    for i, (_, folders) in enumerate(LAYERS):
        for f in folders:
            if path == f or path.startswith(f + "/"):
                if best is None or len(f) > len(best[1]):
                    best = (i, f)
    return best


def resolve(root, src, inc):
    """The repository path an include names: from the root, or beside the file."""
    if os.path.exists(os.path.join(root, inc)):
        return inc
    if inc in ("nccl.h", "nccl_device.h", "nccl_net.h") or inc.startswith(("braid/", "nccl_device/")):
        return "include/" + inc
    beside = os.path.normpath(os.path.join(os.path.dirname(src), inc))
    if os.path.exists(os.path.join(root, beside)):
        return beside
    return None


def violations(root):
    out = []
    for top in SCANNED:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not name.endswith((".h", ".cc", ".cu", ".cuh")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root)
                mine = layer_of(path)
                if mine is None:
                    continue
                with open(os.path.join(root, path), errors="replace") as f:
                    for line in f:
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = resolve(root, path, m.group(1))
                        theirs = layer_of(target) if target else None
                        if theirs is not None and theirs[0] > mine[0]:
                            out.append((path, target, mine, theirs))
    return sorted(set(out))


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    root = sys.argv[1]
    found = violations(root)
    lines = [f"{a} -> {b}" for a, b, _, _ in found]
    listed_path = os.path.join(root, EXCEPTIONS)
    if len(sys.argv) > 2 and sys.argv[2] == "--update":
        with open(listed_path, "w") as f:
            f.write("# Includes from a lower layer to a higher one that are still there "
                    "(tests/docs/check_layers.py).\n# The list may only shrink.\n")
            for line in lines:
                f.write(line + "\n")
        print(f"{len(lines)} exceptions written to {EXCEPTIONS}")
        return 0
    listed = set()
    if os.path.exists(listed_path):
        with open(listed_path) as f:
            listed = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    pairs = {}
    for a, b, mine, theirs in found:
        key = (mine[1], theirs[1])
        pairs[key] = pairs.get(key, 0) + 1
    for (a, b), n in sorted(pairs.items()):
        print(f"{a:16s} -> {b:16s} {n:3d}")
    new = [l for l in lines if l not in listed]
    gone = sorted(listed - set(lines))
    print(f"{len(lines)} wrong-way includes ({len(listed)} listed as known)")
    for l in new:
        print("FAIL: a new include from a lower layer to a higher one:", l)
    for l in gone:
        print("FAIL: listed but no longer there (run with --update):", l)
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
