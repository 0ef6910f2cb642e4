#!/usr/bin/env python3
"""Exit 0 when two JSON files hold the same document up to float values within a relative 1e-13 (and an
absolute 1e-300): the same keys, lists, strings, integers and booleans. gen_cpu_cases.sh uses it for
golden files whose float64 values numpy rounds differently on different CPUs (SIMD exp / log).
Usage: json_close.py A.json B.json"""
import json
import math
import sys


def close(a, b, path="$"):
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, int) and isinstance(b, int):
        return a == b or sys.exit(f"json_close: {path}: {a!r} != {b!r}")
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= 1e-13 * max(abs(a), abs(b)) + 1e-300):
            return True
        sys.exit(f"json_close: {path}: {a!r} != {b!r}")
    if type(a) is not type(b):
        sys.exit(f"json_close: {path}: {type(a).__name__} != {type(b).__name__}")
    if isinstance(a, dict):
        if list(a) != list(b):
            sys.exit(f"json_close: {path}: keys differ")
        return all(close(a[k], b[k], f"{path}.{k}") for k in a)
    if isinstance(a, list):
        if len(a) != len(b):
            sys.exit(f"json_close: {path}: lengths {len(a)} != {len(b)}")
        return all(close(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b)))
    return a == b or sys.exit(f"json_close: {path}: {a!r} != {b!r}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as fa, open(sys.argv[2]) as fb:
        close(json.load(fa), json.load(fb))
    return 0


if __name__ == "__main__":
    sys.exit(main())
