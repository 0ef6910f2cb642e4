"""Result rows shared by the torch benchmark suites (tools/bench/bench_torch.py, tools/bench/bench_torch_fp8_indexer.py).

Standard library only. Key order in a row is the order of the printed JSON: keep it.
"""
from __future__ import annotations


def result_row(suite, shape, impl, params, peer, t=None, note="", error=None, extra=None, rate=None,
               out_fields=None):
    """One row: suite, shape, impl, params, peer; then error; the timing dict t, followed by the throughput
    fields rate(r, t) adds (rate may return a prefix for the note); out_fields (the output checks, a dict);
    note; extra."""
    r = {"suite": suite, "shape": shape, "impl": impl, "params": params, "peer": peer}
    if error is not None:
        r["error"] = error
    if t is not None:
        r.update(t)
        if rate is not None:
            note = (rate(r, t) or "") + note
    if out_fields:
        r.update(out_fields)
    r["note"] = note
    if extra:
        r.update(extra)
    return r


def per_second(amount, t, unit):
    """amount per second at the timing t (t["ms"] per call), in `unit`s (1e9: G, 1e12: T)."""
    return amount / (t["ms"] * 1e-3) / unit


def add_with_ratio(case_rows, peer_ms, add_row):
    """add_row(r) for each row, after setting r["ratio"] = peer_ms / r["ms"] where the row has a time and no
    error and the peer has a time."""
    for r in case_rows:
        if r.get("ms") and not r.get("error") and peer_ms:
            r["ratio"] = peer_ms / r["ms"]
        add_row(r)
