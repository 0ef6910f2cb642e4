#!/usr/bin/env python3
"""Snapshot and compare the machine code of every kernel in an attnjit cubin cache.

A refactor that must not move machine code is proved by two snapshots: one of the warm-up cache
built before the change, one after, compared kernel by kernel under the kernel's readable name
(KernelSpec::describe(), stored in each entry's manifest). No GPU is needed: cuobjdump reads the
cubins the warm-up wrote.

  sass_compare.py snapshot CACHE_DIR OUT_DIR   # one <describe>.sass per kernel (+ resources.json)
  sass_compare.py compare BEFORE_DIR AFTER_DIR # exit 1 when any kernel changed, vanished or appeared

A cache is filled with `ATTNJIT_CACHE_DIR=CACHE_DIR attnjit warmup --arch sm_90a`.
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path


def cuobjdump() -> str:
    # NOTE: the CUDA 13.0 toolkit here ships no cuobjdump; `pip install nvidia-cuda-cuobjdump` brings one.
    cands = [os.environ.get("CUOBJDUMP"), "/usr/local/cuda/bin/cuobjdump", shutil.which("cuobjdump")]
    try:
        import nvidia.cu13 as cu13  # the pip package's location
        cands.append(str(Path(list(cu13.__path__)[0]) / "bin" / "cuobjdump"))
    except ImportError:
        pass
    for cand in cands:
        if cand and Path(cand).exists():
            return cand
    sys.exit("sass_compare: no cuobjdump (set CUOBJDUMP, or pip install nvidia-cuda-cuobjdump)")


def normalised_sass(cubin: Path) -> str:
    out = subprocess.run([cuobjdump(), "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    # NOTE: the header names the input file; everything from the first "Function :" on is machine code.
    start = out.find("Function :")
    body = out[start:] if start >= 0 else out
    return re.sub(r"[ \t]+\n", "\n", body)


def snapshot(cache_dir: Path, out_dir: Path) -> int:
    out_dir.mkdir(parents=True, exist_ok=True)
    resources = {}
    entries = sorted((cache_dir / "v1").glob("*/manifest.json"))
    for manifest_path in entries:
        manifest = json.loads(manifest_path.read_text())
        name = manifest["describe"]
        cubin = manifest_path.parent / "kernel.cubin"
        (out_dir / f"{name}.sass").write_text(normalised_sass(cubin))
        resources[name] = manifest.get("resources", {})
    (out_dir / "resources.json").write_text(json.dumps(resources, indent=1, sort_keys=True) + "\n")
    print(f"snapshot: {len(entries)} kernels from {cache_dir} into {out_dir}")
    return 0 if entries else 1


def compare(before: Path, after: Path) -> int:
    b = {p.stem: p for p in before.glob("*.sass")}
    a = {p.stem: p for p in after.glob("*.sass")}
    same, changed = [], []
    for name in sorted(b.keys() & a.keys()):
        (same if b[name].read_bytes() == a[name].read_bytes() else changed).append(name)
    gone, new = sorted(b.keys() - a.keys()), sorted(a.keys() - b.keys())
    for name in changed:
        nb = b[name].read_text().count("\n")
        na = a[name].read_text().count("\n")
        print(f"CHANGED  {name}  ({nb} -> {na} lines)")
    for name in gone:
        print(f"GONE     {name}")
    for name in new:
        print(f"NEW      {name}")
    print(f"sass compare: {len(same)} identical, {len(changed)} changed, {len(gone)} gone, {len(new)} new")
    return 0 if not (changed or gone or new) else 1


def main(argv) -> int:
    if len(argv) != 4 or argv[1] not in ("snapshot", "compare"):
        print(__doc__, file=sys.stderr)
        return 2
    fn = snapshot if argv[1] == "snapshot" else compare
    return fn(Path(argv[2]), Path(argv[3]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
