#!/usr/bin/env python3
"""Compare a new benchmark wave with committed figures, row by row.

    python3 tools/bench/bench_compare.py --old 'docs/bench-*.json' --new 'out/t_*.json' [--impl attnjit]
        [--threshold 0.05] [--markdown]

Rows are results of tools/bench/bench_torch.py (`{"meta", "results": [...]}`, or such objects nested one
level deep, as docs/bench-2026-12-02-mla-dsa-torch.json holds; `FILE#KEY` reads only the nested object KEY,
e.g. `--old 'docs/bench-2026-12-06-redesign-ab-h100.json#before'`). A row is keyed by (suite, shape, impl); when
several old files hold a key, the newest file (by its meta time, else its name) wins. For every new row
whose key has an old row, prints old ms, new ms and new/old time; rows slower than 1 + threshold are
flagged SLOWER. Only rows whose impl contains --impl (default "attnjit") are compared unless --impl ''.
Exit status 0 always: the figures are for a person to read (machines of one type differ by up to 3%).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys


def result_sets(doc, key=None):
    """Yields (meta, results) for a bench_torch.py document or one nesting level of them (only `key`'s)."""
    if key is not None:
        doc = doc.get(key) if isinstance(doc, dict) else None
    if isinstance(doc, dict) and isinstance(doc.get("results"), list):
        yield doc.get("meta", {}), doc["results"]
        return
    if isinstance(doc, dict):
        for v in doc.values():
            if isinstance(v, dict) and isinstance(v.get("results"), list):
                yield v.get("meta", {}), v["results"]


def load_rows(patterns):
    rows = {}  # key -> (stamp, file, row, device)
    for spec in patterns:
        pat, _, key = spec.partition("#")
        for path in sorted(glob.glob(pat)):
            try:
                with open(path) as f:
                    doc = json.load(f)
            except (OSError, json.JSONDecodeError) as e:
                print(f"skip {path}: {e}", file=sys.stderr)
                continue
            for meta, results in result_sets(doc, key or None):
                stamp = meta.get("time") or os.path.basename(path)
                for r in results:
                    if not isinstance(r, dict) or not isinstance(r.get("ms"), (int, float)):
                        continue
                    key = (r.get("suite"), r.get("shape"), r.get("impl"))
                    old = rows.get(key)
                    if old is None or stamp >= old[0]:
                        rows[key] = (stamp, path, r, meta.get("device"))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", action="append", required=True, help="glob of committed JSONs (repeatable)")
    ap.add_argument("--new", action="append", required=True, help="glob of the new wave's JSONs (repeatable)")
    ap.add_argument("--impl", default="attnjit", help="compare rows whose impl contains this (default attnjit)")
    ap.add_argument("--threshold", type=float, default=0.05, help="flag rows slower by more than this fraction")
    ap.add_argument("--stat", default="ms", help="the row field compared: ms (median, default) or min_ms")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()

    old = load_rows(args.old)
    new = load_rows(args.new)
    matched = []
    for key, (_, path, r, dev) in sorted(new.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        if args.impl and args.impl not in str(key[2]):
            continue
        o = old.get(key)
        if o is None:
            continue
        matched.append((key, o, (path, r, dev)))
    if not matched:
        print("no new row matches an old one")
        return 0
    if args.markdown:
        print(f"| suite | shape | impl | old {args.stat} | new {args.stat} | new / old | old file |")
        print("|---|---|---|---|---|---|---|")
    ratios = []
    for key, (ostamp, opath, orow, odev), (npath, nrow, ndev) in matched:
        ov, nv = orow.get(args.stat), nrow.get(args.stat)
        if not isinstance(ov, (int, float)) or not isinstance(nv, (int, float)):
            continue
        ratio = nv / ov if ov > 0 else float("nan")
        ratios.append(ratio)
        flag = "SLOWER" if ratio > 1 + args.threshold else ""
        if args.markdown:
            print(f"| {key[0]} | {key[1]} | {key[2]} | {ov:.4f} | {nv:.4f} | {ratio:.3f} {flag} | "
                  f"{os.path.basename(opath)} |")
        else:
            print(f"{str(key[0]):<22} {str(key[1]):<48} {str(key[2]):<28} {ov:10.4f} {nv:10.4f} "
                  f"{ratio:6.3f} {flag}")
    ratios.sort()
    n = len(ratios)
    if n == 0:
        print(f"no matched row has {args.stat}")
        return 0
    slower = sum(1 for x in ratios if x > 1 + args.threshold)
    print(f"\n{n} rows matched; new/old {args.stat}: median {ratios[n // 2]:.3f}, best {ratios[0]:.3f}, "
          f"worst {ratios[-1]:.3f}; {slower} slower by more than {args.threshold:.0%}")
    devs = sorted({str(o[3]) for _, o, _ in matched}), sorted({str(nw[2]) for _, _, nw in matched})
    print(f"old device(s): {', '.join(devs[0])}; new device(s): {', '.join(devs[1])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
